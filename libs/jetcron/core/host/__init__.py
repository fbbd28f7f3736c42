"""What a run's child gets on its host, decided before anything is done: its view of the job, its launch, its user
id, its environment's names, a simulated run. Pure: no I/O.

Each module's public names are re-exported here, loaded on first use: importing one module of the group
loads that module alone."""

from __future__ import annotations

from jetcron.core.lazy import exports

_HOME = {
    "CONTAINER_CLI": "env_names",
    "CONTAINER_CLI_PREFIXES": "env_names",
    "ChildView": "job_view",
    "DURATIONS": "sim",
    "ENGINE": "env_names",
    "ENGINE_PREFIXES": "env_names",
    "HostFacts": "launch_plan",
    "INTERPRETER": "env_names",
    "JETCRON_PREFIXES": "env_names",
    "LABEL_AGENT": "launch_plan",
    "LOADER": "env_names",
    "LOADER_PREFIXES": "env_names",
    "LOCAL_RANGES": "uid_pool",
    "Launch": "launch_plan",
    "MAX_UID": "uid_pool",
    "OWN": "env_names",
    "PRIVATE_TMP": "job_view",
    "SCRATCH_MODE": "job_view",
    "SCRATCH_PARENT_MODE": "job_view",
    "SHELL": "env_names",
    "SimExecution": "sim",
    "UidPool": "uid_pool",
    "container_cli_env": "launch_plan",
    "container_name": "launch_plan",
    "data_dir_mode": "job_view",
    "first_blocked": "job_view",
    "format_uid_range": "uid_pool",
    "gpu_args": "launch_plan",
    "local_range": "uid_pool",
    "parse_uid_range": "uid_pool",
    "passed_to_container": "launch_plan",
    "refusal": "env_names",
    "run_argv": "launch_plan",
    "runtime_name": "launch_plan",
    "usable_uids": "uid_pool",
}
"""Where each re-exported name is defined, by module of jetcron.core.host."""

__all__, __getattr__ = exports(__name__, _HOME)
