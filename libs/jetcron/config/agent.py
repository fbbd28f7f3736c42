"""Settings: what an agent offers, how it starts and reports its attempts, and as whom its jobs run."""

from __future__ import annotations

from typing import Self

from pydantic import Field, field_validator, model_validator

from jetcron.config.group import SettingsGroup
from jetcron.core.errors import Misconfigured
from jetcron.core.host.sim import SimExecution
from jetcron.core.host.uid_pool import parse_uid_range


class AgentSettings(SettingsGroup):
    """An agent: its offer, its pace, its simulated runs, its GPUs' health, its jobs' user, view and limits, and
    how it stops them."""

    agent_id: str | None = None
    """This process's id among its peers (agent id, trigger replica); default host-pid."""
    agent_cpu: float | None = None
    """CPU cores the agent offers; default: what the host or its cgroup allows."""
    agent_memory_mb: int | None = None
    """Memory (MiB) the agent offers; default: what the host or its cgroup allows."""
    agent_labels: str = ""
    """comma-separated key=value labels, e.g. zone=eu,leaf=l1"""
    agent_slots: int = Field(default=64, ge=1)
    """Attempts one agent runs at once."""
    agent_start_rate: float = Field(default=500.0, gt=0)
    """Attempts per second an agent is assumed to start when a staged herd comes due at once: a staged
    attempt's first lease covers its place in the queue (jetcron.core.lifecycle.leases.first_grant)."""
    agent_start_burst: int = Field(default=256, ge=1)
    """Staged attempts an agent has begun to start and not yet started: a herd due at one instant starts as a
    stream, not as 50,000 tasks at once (services/jetcron_services/agent/waiting.py)."""
    agent_report_window: int = Field(default=256, ge=1)
    """Reports (started, finished) an agent has in flight, waiting for their JetStream acks."""
    agent_report_hold: float = Field(default=10.0, ge=0)
    """Seconds an agent's reports may wait while it starts a herd's due attempts
    (services/jetcron_services/agent/reports.py)."""
    agent_report_batch: int = Field(default=32, ge=1, le=256)
    """Finish reports an agent hands to the trackers in one direct request (`report_by` direct), as many as came
    while its last two requests were out: one at once when idle, a few dozen to a request in a burst, where one
    to a request left most to the events stream at a stored write each. 1: one to a request, and only while at
    most 16 of the agent's reports are in flight (the protocol before; a tracker from before takes no batch, and
    answers one so that the agent sends its reports to the stream)."""
    agent_sim: bool = False
    """Execute nothing and report how the simulated run ended (scale tests and the virtual fleet only)."""
    agent_sim_seconds: str = "0"
    """How long a simulated attempt runs: `S`, `fixed:S`, `uniform:A,B` or `exp:MEAN[,CAP]` seconds, drawn per
    attempt from its run id (jetcron.core.host.sim)."""
    agent_sim_exit_codes: str = "0"
    """How a simulated attempt exits: `CODE[:WEIGHT],...`, e.g. `0:95,1:5`."""
    gpu_health_check: str | None = None
    """A command (split like a shell line, run without a shell) whose exit 0 says this host's GPUs are healthy,
    e.g. "nvidia-smi -L"; default: NVML still sees as many GPUs as at start. A GPU host that missed heartbeats
    gets no GPU work until a check passes after its return."""
    gpu_health_every: float = Field(default=60.0, gt=0)
    """Seconds between GPU health checks (only on hosts with GPUs)."""
    agent_job_user: str = "nobody"
    """The user jobs run as where the agent can switch users (it runs as root, or holds CAP_SETUID, CAP_SETGID,
    CAP_CHOWN, CAP_DAC_OVERRIDE and CAP_KILL as ambient capabilities), unless each attempt gets a uid of its own
    (agent_job_uids); `@agent` runs them as the agent's own user. An agent that cannot switch runs jobs as itself,
    with its supplementary groups, and says so at start (and in its entry: AgentInfo.job_user); a root agent
    without CAP_SETUID and CAP_SETGID refuses to start rather than run jobs as root."""
    agent_allow_root: bool = False
    """Whether a job that asks for it (run_as_root) may run as root on this agent; its tenant's policy must allow
    it too (TenantPolicy.allow_run_as_root, `jetcron tenants set TENANT --allow-run-as-root`)."""
    agent_job_path: str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    """PATH of a job's process (its environment is otherwise only its own variables and the run's)."""
    agent_max_pids: int = Field(default=1024, ge=8)
    """Processes (and threads) one run may have at a time, where the agent enforces limits by cgroup."""
    agent_spare: bool = True
    """Keep a child waiting in fresh run groups, so that a run starts without joining them
    (services/jetcron_services/agent/ spares.py: 10-20 ms saved per run on an idle host). Off: every run is spawned and
    joins its groups."""
    agent_launcher: bool = True
    """Start each run's child through jetcron-launch where it is built (make, the image): one static exec that
    joins the run's groups, binds its private /tmp, sets its limits and switches to the job's user. Off, or where
    it is missing: its twin in Python, the same steps after an interpreter's start (about 15 ms more CPU per run
    and per spare; docs/decisions-job-view.md). Either way the job's environment reaches its program alone, never
    a step that runs as root."""
    agent_scratch_dir: str = ""
    """Where each attempt's private scratch directory is made (its working directory, JETCRON_SCRATCH and TMPDIR;
    removed when the attempt ends): a folder of the agent's, mode 0711, with one folder per agent id in it (agents
    sharing it need ids of their own: each empties its folder at start) and one per attempt in that, mode 0700,
    owned by the job's user. Empty: `<data_dir>/scratch`."""
    agent_job_uids: str | None = None
    """A range of uids, FIRST-LAST (e.g. 60578-61183: systemd leaves it unused), from which an agent that can
    switch users (agent_job_user) gives each attempt a uid of its own (its gid the same number, no supplementary
    group, HOME its scratch), so that no two running jobs share a user: jobs sharing one can read each other's
    scratch, /tmp and environment (secrets, run credential) through /proc, signal and trace each other. Uids a user
    or group of the host has are skipped; agents on one host share the range through a lock per uid
    (agent_job_uid_locks). Unset (the default): the first of 60578-61183 and 65536-99999 that no user or group of
    the host reaches into (checked at each start; where neither is free, the agent says so and every job runs as
    agent_job_user). Empty: off, every job runs as agent_job_user."""
    agent_job_uid_locks: str = "/run/jetcron/job-uids"
    """The folder of the locks on agent_job_uids, one file per uid held while an attempt runs as it (the kernel
    releases it when the agent dies). Every agent of one host must use the same folder, whatever its data dir: an
    agent at its start kills what runs under a uid of its range that no lock holds, and would kill another's jobs."""
    agent_private_tmp: bool = True
    """Where the agent runs as root and jobs as another user: each child in a mount namespace of its own in which
    /tmp is its scratch (if the host allows it: the agent checks at start and logs why not)."""
    agent_max_file_mb: int = Field(default=16384, ge=0)
    """The largest file a job may write, in MiB (RLIMIT_FSIZE: any file, in its scratch or not; the write past it
    fails and the process gets SIGXFSZ). The bound a scratch's size can have without a quota. 0: no limit."""
    log_cap_bytes: int = Field(default=1_048_576, ge=1024)
    """Output kept per run; more is cut with a truncation marker."""
    drain_grace: float = Field(default=20.0, ge=0)
    """Seconds a stopping agent lets running attempts finish before handing them back."""
    kill_grace: float = Field(default=5.0, ge=0)
    """Seconds between SIGTERM and SIGKILL when a run is stopped (timeout, cancel)."""

    @property
    def agent_sim_execution(self) -> SimExecution:
        """How a simulated attempt runs and exits (agent_sim)."""
        return SimExecution.parse(self.agent_sim_seconds, self.agent_sim_exit_codes)

    @model_validator(mode="after")
    def _sim_execution(self) -> Self:
        try:
            self.agent_sim_execution  # noqa: B018 - parsed here so that a malformed one stops the start, named
        except Misconfigured as exc:
            raise ValueError(f"JETCRON_AGENT_SIM_SECONDS={self.agent_sim_seconds!r}, JETCRON_AGENT_SIM_EXIT_CODES="
                             f"{self.agent_sim_exit_codes!r}: {exc}") from None
        return self

    @field_validator("agent_job_uids")
    @classmethod
    def _uid_range(cls, text: str | None) -> str | None:
        if text is not None:
            parse_uid_range(text)  # a malformed range stops the agent at start, naming it
        return text
