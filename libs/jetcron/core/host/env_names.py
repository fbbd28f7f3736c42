"""Which variable names a job may not set (its `env` and its secrets' names), and why.

A job's variables are meant for its own program. Every name here is read by something else first: the dynamic
loader and libc of any program the variable reaches, a shell before the script it runs, an interpreter before
its program, jetcron's own client libraries, or the container CLI that starts an image run with the agent's
access to its engine. The agent hands the job's environment to nothing but the job's own program (the helpers
that set a child up, as root, start with an empty one: services/jetcron_services/agent/host/launch.py); refusing these
names as well keeps a stored job from ever holding one, whatever path its variables take. Pure: names in, a reason out.
"""

from __future__ import annotations

LOADER_PREFIXES = ("LD_", "DYLD_", "MALLOC_")
LOADER = frozenset({
    # glibc's UNSECURE_ENVVARS (sysdeps/generic/unsecvars.h): what its loader and libc ignore for a privileged
    # program, because each names a file to load code or data from or changes how the program runs. LD_* and
    # MALLOC_* go by their prefix; TMPDIR, in glibc's list too, is a job's own (its scratch sets it, and a job's
    # env may set another): no privileged process ever gets a job's variables.
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH", "NLSPATH",
    "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
})
SHELL = frozenset({"BASH_ENV", "ENV", "BASHOPTS", "SHELLOPTS", "PS4", "IFS", "CDPATH", "GLOBIGNORE"})
"""Read by a shell before the script it is given (a file to source, options, how words split and paths resolve)."""
INTERPRETER = frozenset({"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT"})
"""Code an interpreter loads before its program."""
JETCRON_PREFIXES = ("JETCRON_", "NATS_")
"""The run's own variables and the client libraries': a job must not point its once() or checkpoints at another
server or credential."""
ENGINE_PREFIXES = ("DOCKER_", "CONTAINERS_")
ENGINE = frozenset({"CONTAINER_HOST", "CONTAINER_CONNECTION", "REGISTRY_AUTH_FILE"})
"""Which container engine a docker or podman CLI talks to, with which configuration and credentials: an image
run's CLI runs with the agent's access to its engine (whoever reaches an engine is root on its host)."""
CONTAINER_CLI_PREFIXES = ("XDG_",)
CONTAINER_CLI = frozenset({"PATH", "HOME", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY",
                           "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"})
"""Where a container CLI finds its configuration, credential helpers and certificates, and how it reaches a
registry: an image run's variables reach its container through that CLI's own environment (`-e NAME`, so that
no value is on a command line), so in an image job these are the CLI's, set by the agent, never the job's."""
OWN = ("CUDA_VISIBLE_DEVICES",)
"""Set by the agent for the GPUs an attempt was given."""


def refusal(name: str, *, image: bool = False) -> str | None:
    """Why a job (an image run's, with `image`) may not set a variable of this name; None: it may."""
    if name.startswith(LOADER_PREFIXES) or name in LOADER:
        return "is read by the dynamic loader or libc of every program it reaches; not allowed"
    if name in SHELL or name in INTERPRETER:
        return "would change how a shell or an interpreter starts, before the job's own code; not allowed"
    if name.startswith(JETCRON_PREFIXES) or name in OWN:
        return "is set by the agent for the run; not allowed"
    if name.startswith(ENGINE_PREFIXES) or name in ENGINE:
        return "would point a container CLI at another engine, configuration or credential; not allowed"
    if image and (name.startswith(CONTAINER_CLI_PREFIXES) or name in CONTAINER_CLI):
        return ("is read by the container CLI that starts an image run (it passes the job's variables into the "
                "container from its own environment); set it in the image or in the command")
    return None
