"""Service settings from JETCRON_* environment variables (pydantic-settings)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from jetcron.bus.connect import Identity
from jetcron.bus.topology import Limits
from jetcron.core.errors import Misconfigured
from jetcron.core.host.sim import SimExecution
from jetcron.core.host.uid_pool import parse_uid_range
from jetcron.core.lifecycle.retention import ClusterHistory
from jetcron.wire.messages import HandBy

_Count = Annotated[int, Field(ge=0)]
_MiB = 1024 * 1024
_GiB = 1024 * _MiB


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JETCRON_", extra="ignore", use_attribute_docstrings=True)

    nats_url: str = "nats://127.0.0.1:4222"
    """NATS server URL; several, comma-separated, for a cluster."""
    nats_monitor_url: str | None = None
    """Where to read /varz and /jsz to check fsync; default: the NATS host on port 8222."""
    nats_ping_interval: float = Field(default=2.0, gt=0)
    """Seconds between this process's pings to its NATS server: a server that answers none of three in a row
    (frozen, or behind a link that drops packets without a reset) is left and reconnected to, and the process says
    so (/readyz, jetcron_nats_connected)."""
    allow_unsafe_storage: bool = False
    """Accept a server that acknowledges writes before fsync (throwaway dev setups only)."""
    nats_creds: str | None = None
    """A NATS credentials file (user JWT and seed) for this process's role; `jetcron up` writes one per role."""
    nats_tls_ca: str | None = None
    """PEM file of the CA that signed the NATS server's certificate: set it to connect over TLS and verify it."""
    nats_tls_cert: str | None = None
    """Client certificate (PEM) for servers that verify clients; needs nats_tls_key."""
    nats_tls_key: str | None = None
    """Private key (PEM) of nats_tls_cert."""
    replicas: int | None = None
    """Stream and bucket replicas; default 1 on one node, 3 on a cluster."""

    run_lease_ttl: float = Field(default=10.0, gt=1)
    """Seconds a run lease lives without renewal (judged by the server): each agent's own lease, which fences every
    attempt it holds, and a run claim of its own (a gang member's); each is renewed at a third of it."""
    report_by: HandBy = "direct"
    """How an agent's finish report reaches the run trackers: `direct`, a core NATS request a tracker answers once
    it has written the run record, so no RunFinished is stored (one acknowledged write less per run); a report not
    answered so within `handoff_timeout` (no tracker answering, a finish ahead of its start, the storage slow)
    goes to JC_EVENTS. `stream`, every finish to JC_EVENTS: for a cluster where every finish must be on the events
    stream's trail of each run's reports, at one stored write per run. Trackers take both."""
    handoff_timeout: float = Field(default=0.5, gt=0, le=30)
    """Seconds placement waits for an agent's answer to a direct hand-off (an agent for a tracker's) before it sends
    the message to its stream; a taker that let one pass is sent to the stream only for `handoff_timeout` × 20
    after."""
    run_claim_ttl: float = Field(default=600.0, gt=1)
    """Seconds a run claim bound to its agent's lease lives without renewal: the agent renews it at a third of
    this, so that it outlives no run by much once the run has ended; its liveness is the agent lease's, not this."""
    leader_lease_ttl: float = Field(default=5.0, gt=1)
    """Seconds a placement or tracker leader lease lives without renewal."""
    trigger_shards: int = Field(default=16, ge=1, le=4096)
    """Shards of the job schedules (fixed by the first trigger replica; a replica configured otherwise refuses
    to start)."""
    trigger_lease_ttl: float = Field(default=2.0, gt=0.5)
    """Trigger shard lease TTL: a dead replica's shards are taken over within about TTL + TTL/3."""
    trigger_horizon: float = Field(default=2.0, ge=0)
    """Seconds ahead an occurrence is recorded and handed to placement (herd staging)."""
    trigger_herd_rate: float = Field(default=200.0, gt=0)
    """Runs per second the cluster can record, place and lease ahead of their due time. A second holding more
    occurrences than horizon x rate is staged earlier: each one beyond that 1/rate s before the previous."""
    trigger_herd_max_lead: float = Field(default=900.0, ge=0)
    """The most seconds beyond the horizon a herd's occurrence is staged ahead (a herd larger than
    rate x this starts late by the rest)."""
    placement_lead: float | None = Field(default=None, ge=0)
    """Seconds before its due time placement assigns a later attempt (a retry after its backoff); default: the
    trigger horizon. A first attempt the trigger staged ahead is assigned as soon as placement has it."""
    placement_ageing_seconds: float = Field(default=300.0, gt=0)
    """Seconds a waiting run takes to be promoted one priority level (low -> normal -> high -> critical) in
    placement's order, so low-priority work behind a steady stream of higher work still starts."""
    preemption_max_per_run: int = Field(default=3, ge=0, le=1000)
    """A run preempted this many times is not preempted again, where its tenant's or queue's policy does not say
    (TenantPolicy.preemption; docs/preemption.md). Read by placement."""
    preemption_min_runtime: float = Field(default=60.0, ge=0)
    """Seconds an attempt must have run before it may be preempted, where its policy does not say."""
    preemption_grace: float = Field(default=30.0, ge=0)
    """Seconds between SIGTERM and SIGKILL when a run is preempted (time to save a checkpoint), where its policy
    does not say; its next attempt is due once they have passed."""
    min_interval: float = Field(default=1.0, gt=0)
    """The shortest schedule interval a job may have, in seconds."""
    redrive_after: float = Field(default=30.0, gt=0)
    """A run scheduled but not placed this long after its due time is handed to placement again (a PlaceRun), and
    again at ages that double, at most every 16 minutes (jetcron.core.lifecycle.reconcile.REDRIVE_GAP_MAX); the tracker
    re-drives at most 64 runs a second (jetcron_services.run_tracker.reconciler.REDRIVES_PER_SWEEP), the rest a period
    later."""
    topology_check: float = Field(default=10.0, gt=0)
    """Seconds between a core service's checks that every stream, bucket and durable consumer still exists: one
    deleted under the running system is made again, empty, and logged as an error."""
    assign_stall: float = Field(default=30.0, gt=0)
    """An assignment not started after this many seconds is re-dispatched."""
    heartbeat: float = Field(default=2.0, gt=0)
    """Seconds between an agent's heartbeats (and services' registry updates)."""
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
    metrics_port: int | None = None
    """HTTP port for /metrics, /livez and /readyz; unset or 0 picks a free one (published in jc_services)."""
    metrics_host: str = "0.0.0.0"
    """Address the HTTP port binds to; 127.0.0.1 keeps it on this host."""
    agents_max: int = Field(default=20_000, ge=1)
    """Agents the cluster takes at most: each has a durable consumer of its own on the assignment stream, whose
    max_consumers this is (left unset, nats-server takes 1,000 and refuses the next agent). An existing stream is
    raised in place at start."""
    place_queue_max: int = Field(default=2_000_000, ge=10)
    """Messages the placement and assignment queue streams hold at most, and runs the placement leader holds
    waiting (their records are the hand-off); submits are refused (unavailable, retry) once any is 90 % full."""
    history_keep_seconds: float = Field(default=3 * 86400.0, gt=0)
    """Seconds a finished run is kept after it ended (its record with every attempt, its events and output), where
    neither its job nor its tenant says otherwise (HistoryPolicy); then the server removes it (per-message TTL)."""
    history_min_seconds: float = Field(default=3600.0, ge=1)
    """The least any finished run is kept, whatever a job or tenant asks: watchers and the notifier read its last
    change first. A run is also kept at least its job's misfire catch-up window (its record is its occurrence's
    fire gate)."""
    history_max_seconds: float = Field(default=90 * 86400.0, gt=0)
    """The most a job or tenant may ask to keep runs; also the events and output streams' max_age."""
    history_keep_succeeded: int | None = Field(default=None, ge=0)
    """At most this many succeeded runs kept per job (the newest), where no job or tenant says; unset: no limit."""
    history_keep_failed: int | None = Field(default=None, ge=0)
    """The same for failed, dead and blocked runs."""
    dlq_keep_seconds: float = Field(default=30 * 86400.0, gt=0)
    """Seconds a dead letter is kept (JC_DLQ's max_age); a dead run's record is kept at least as long."""
    idempotency_max_seconds: float = Field(default=30 * 86400.0, gt=0)
    """The longest lifetime an idempotency key may ask for (once(key, ttl), a request's Idempotency-Key): the
    idempotency bucket's max_age, which would otherwise cut a longer TTL short."""
    request_key_seconds: float = Field(default=86400.0, gt=0)
    """Seconds an api request's idempotency key (and an intake request's outcome) is remembered."""
    runs_max_bytes: int = Field(default=0, ge=0)
    """Bytes the run records' bucket may hold; 0 (the default): no limit of its own, so it shares the server's
    JetStream store (max_file_store) with every stream without one, and JetStream reserves nothing for it. Ended
    runs age out by their retention; near a limit (its own or the store's) the run tracker lets the oldest go
    (JETCRON_STORAGE_SHED_AT). docs/operations.md, "Sizing the streams"."""
    jobs_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes the job definitions' bucket (16 revisions kept per job) holds at most."""
    events_max_bytes: int = Field(default=0, ge=0)
    """Bytes the run events stream (the tracker's input and the audit trail) may hold; 0: no limit of its own, as
    for the run records."""
    logs_max_bytes: int = Field(default=0, ge=0)
    """Bytes of run output kept at most (the oldest goes first when full); 0: no limit of its own, as for the run
    records."""
    dlq_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes of dead letters kept at most."""
    idempotency_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes of idempotency keys kept at most; full, new keys are refused (fail closed), never old ones forgotten."""
    checkpoints_max_bytes: int = Field(default=_GiB, ge=_MiB)
    """Bytes of run checkpoints (jetcron.checkpoint) kept at most."""
    notify_max_bytes: int = Field(default=256 * _MiB, ge=_MiB)
    """Bytes of each of the notification delivery log and the subject targets' stream."""
    redeliver_queue_max: int = Field(default=100_000, ge=10)
    """Requests to try a parked notification again that may wait at most (JC_REDELIVER)."""
    agent_entry_seconds: float = Field(default=30.0, gt=0)
    """How long an agent's entry in jc_agents outlives its last heartbeat (the bucket's max_age)."""
    service_entry_seconds: float = Field(default=15.0, gt=0)
    """How long a service instance's entry in jc_services outlives its last heartbeat."""
    notify_keep_seconds: float = Field(default=7 * 86400.0, gt=0)
    """Seconds a notice for a rule with a `subject` target waits in JC_NOTIFY for its service to read it."""
    deliveries_keep_seconds: float = Field(default=30 * 86400.0, gt=0)
    """Seconds the delivery log (jc_notify) keeps each notification delivery and its tries."""
    finished_counts_keep_seconds: float = Field(default=7 * 86400.0, ge=3600)
    """Seconds the finished runs per minute (jc_finished, the dashboard's chart) are kept: each minute's record
    ages out this long after its last write."""
    calendars_max_bytes: int = Field(default=64 * _MiB, ge=_MiB)
    """Bytes the named calendars' bucket (jc_calendars, 16 revisions kept per calendar) holds at most."""
    storage_shed_at: float = Field(default=0.9, gt=0, le=1)
    """Used share of a stream's limit (or of the server's JetStream store) at which the run tracker lets the oldest
    finished runs go ahead of their time, so that new occurrences are still recorded."""
    storage_check_seconds: float = Field(default=15.0, gt=0)
    """Seconds between the run tracker's looks at every stream's and the server's storage (headroom metrics)."""
    http_port: int = Field(default=8080, ge=0, le=65535)
    """The HTTP gateway's REST API port (0 picks a free one and logs it)."""
    http_host: str = "127.0.0.1"
    """Address the gateway's REST API binds to; 0.0.0.0 in a container (every request needs a bearer token)."""
    http_api_timeout: float = Field(default=10.0, gt=0)
    """Seconds the gateway waits for the API service to answer one verb before answering 503."""
    http_public_url: str = Field(default="", pattern=r"^(https?://[^/?#\s]+(/[^?#\s]*)?)?$")
    """The REST API's URL as its users reach it (e.g. https://jetcron.example.com behind a proxy, with a path
    prefix if the proxy adds one): the gateway's absolute links (a job's logs_url) start with it. Empty: each
    request's own scheme, host and port."""
    ui_trace_url: str = ""
    """The dashboard links a run's trace here: a URL with `{trace_id}` in it (your Jaeger, Tempo or Honeycomb
    trace view, e.g. http://jaeger.example:16686/trace/{trace_id}); empty shows the id unlinked."""
    ui_session_seconds: float = Field(default=12 * 3600.0, ge=60)
    """How long a dashboard login lasts: the session cookie's Max-Age, and checked by the gateway on every request
    (an older session is refused whatever the browser sends). Revoking the token ends its sessions at once."""
    ui_session_key_file: str | None = None
    """A file of at least 32 random bytes the gateway signs dashboard sessions with; every gateway replica behind
    one address needs the same. Unset: derived from the gateway's NATS credential (JETCRON_NATS_CREDS, which its
    replicas share), else random at each start (sessions then end with the process)."""
    ui_cookie_secure: Literal["auto", "always", "never"] = "auto"
    """`Secure` on the dashboard's session cookie. `auto`: when the browser reached the gateway over TLS, to the
    gateway itself or to a proxy in http_trusted_proxies that says so (X-Forwarded-Proto), and on plain http from
    anywhere but loopback (TLS ended elsewhere); not on plain http from loopback (`jetcron up`)."""
    http_trusted_proxies: str = "127.0.0.1,::1"
    """Addresses or networks (CIDR), comma-separated, of the proxies in front of the gateway whose
    X-Forwarded-Proto it believes; empty: none."""
    http_log_followers: int = Field(default=8, ge=1)
    """Log streams one token may have open at once on one gateway replica (`GET .../logs?follow=1` and the
    dashboard's live output): one more is refused with 429."""
    trace_console: bool = False
    """Print spans to stdout (when no OTEL_EXPORTER_OTLP_ENDPOINT is set)."""
    checkpoint_retention: float = Field(default=86400.0, ge=0)
    """Seconds a finished run's checkpoint is kept (jetcron.checkpoint) before the run tracker removes it."""
    data_dir: str = ".jetcron"
    """Where the agent keeps its list of child process groups (to kill strays after a crash), its uid locks and
    (by default) its jobs' scratch directories; an agent whose jobs run as another user closes it to them."""
    gc_thresholds: tuple[_Count, _Count, _Count] = (20_000, 20, 20)
    """The cycle collector's thresholds (gc.set_threshold), as JSON, e.g. [20000, 20, 20]; [0, 0, 0] turns it off.
    Python's (700, 10, 10) suit a small heap: an agent holding a staged herd of 50,000 attempts spent a minute in
    collections over one herd, the tracker and placement most of one too (jetcron_gc_pause_seconds_total)."""
    stop_grace: float | None = Field(default=None, gt=0)
    """Seconds a service has to stop after SIGTERM before it is cut short (also when NATS is unreachable);
    default 10, and for an agent its drain (drain_grace + kill_grace) plus 5."""
    secrets_key_file: str | None = None
    """api and agents: the key tenants' secrets are encrypted under (`jetcron up` makes auth/secrets.key)."""
    agent_secrets_dir: str | None = None
    """agents: a folder of secrets kept on this host, <dir>/<tenant>/<NAME>; one there wins over the store."""
    job_signing_key_file: str | None = None
    """api only: the seed of the scoped job signing key (auth/job-signing.seed). Set, the api answers agents'
    requests for a run's own short-lived credential (jobs use it for once() and checkpoints); unset, jobs get
    none."""
    job_credential_seconds: float = Field(default=21600.0, gt=0)
    """How long a run's credential lives when its job has no timeout (with a timeout: the timeout, plus 10 min)."""
    notify_allow_private: bool = False
    """Let webhooks reach loopback, private and link-local addresses (off: those are server-side request forgery
    targets such as cloud metadata). The api checks it when a job is stored, the notifier at each delivery."""
    notify_max_attempts: int = Field(default=8, ge=1, le=100)
    """Tries of one delivery before it is parked (listed by `jetcron notifications list --parked`)."""
    notify_backoff: float = Field(default=1.0, gt=0)
    """Seconds before a delivery's second try; doubled per try (jitter 50 %), at most 5 minutes."""
    notify_timeout: float = Field(default=10.0, gt=0)
    """Seconds one webhook or SMTP exchange may take in all (resolving, connecting, TLS, sending, the answer): a
    receiver that answers a byte at a time is cut there, and the try counts as failed."""
    notify_per_target: int = Field(default=4, ge=1)
    """Webhook deliveries in flight to one host at once, per notifier replica: a slow receiver holds these; one more
    to that host is put off (not tried, not counted) until one of them ends, and holds nothing meanwhile."""
    notify_per_tenant: int = Field(default=16, ge=1)
    """Webhook deliveries in flight for one tenant at once, per notifier replica (whatever their hosts): below
    notify_concurrency, so that one tenant's slow receivers never hold every place; one more is put off as above."""
    notify_concurrency: int = Field(default=64, ge=1)
    """Run records one notifier replica works on at once, and webhook deliveries it has in flight at once."""
    smtp_host: str | None = None
    """The SMTP server email notifications go through; unset, rules with `email` are refused."""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    """The SMTP server's port (587: submission with STARTTLS)."""
    smtp_from: str = "jetcron@localhost"
    """The From: address of notification emails."""
    smtp_starttls: bool = True
    """Upgrade the SMTP connection with STARTTLS before logging in (off only for a local relay)."""
    smtp_username: str | None = None
    """Log in as this user (with the password in smtp_password_file); unset, send without logging in."""
    smtp_password_file: str | None = None
    """A file holding the SMTP password (a mounted secret): it never sits in the environment or a log."""
    clock_skew: float = Field(default=0.0, ge=-3600, le=3600)
    """Seconds added to this process's clock (a host whose clock is 30 s ahead: 30). For fault tests: nothing
    that decides who holds a lease or whether it expired reads this clock (the NATS server judges that)."""
    fault: str | None = None
    """Fault point for chaos tests: POINT=ACTION, e.g. agent.after_exit=exit."""

    @property
    def agent_sim_execution(self) -> SimExecution:
        """How a simulated attempt runs and exits (agent_sim)."""
        return SimExecution.parse(self.agent_sim_seconds, self.agent_sim_exit_codes)

    @model_validator(mode="after")
    def _sim_execution(self) -> Settings:
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

    @model_validator(mode="after")
    def _history_in_bounds(self) -> Settings:
        """The cluster's retention lies between its own floor and ceiling (a job's or tenant's must too); a request
        key is kept no longer than the idempotency bucket keeps any key."""
        if not self.history_min_seconds <= self.history_keep_seconds <= self.history_max_seconds:
            raise ValueError(
                f"JETCRON_HISTORY_KEEP_SECONDS ({self.history_keep_seconds:.0f}) must lie between "
                f"JETCRON_HISTORY_MIN_SECONDS ({self.history_min_seconds:.0f}) and JETCRON_HISTORY_MAX_SECONDS "
                f"({self.history_max_seconds:.0f})")
        if self.request_key_seconds > self.idempotency_max_seconds:
            raise ValueError(f"JETCRON_REQUEST_KEY_SECONDS ({self.request_key_seconds:.0f}) must not exceed "
                             f"JETCRON_IDEMPOTENCY_MAX_SECONDS ({self.idempotency_max_seconds:.0f})")
        return self

    def grace_for(self, service: str) -> float:
        if self.stop_grace is not None:
            return self.stop_grace
        return self.drain_grace + self.kill_grace + 5.0 if service == "agent" else 10.0

    @property
    def identity(self) -> Identity:
        return Identity(creds=self.nats_creds, tls_ca=self.nats_tls_ca, tls_cert=self.nats_tls_cert,
                        tls_key=self.nats_tls_key)

    @property
    def limits(self) -> Limits:
        """Every stream's and bucket's limits, from these settings (jetcron.bus.topology)."""
        return Limits(place_msgs=self.place_queue_max, runs_bytes=self.runs_max_bytes, jobs_bytes=self.jobs_max_bytes,
                      events_age=self.history_max_seconds, events_bytes=self.events_max_bytes,
                      logs_age=self.history_max_seconds, logs_bytes=self.logs_max_bytes,
                      dlq_age=self.dlq_keep_seconds, dlq_bytes=self.dlq_max_bytes,
                      idempotency_age=self.idempotency_max_seconds, idempotency_bytes=self.idempotency_max_bytes,
                      requests_age=self.request_key_seconds, job_marker_age=self.history_min_seconds,
                      checkpoints_bytes=self.checkpoints_max_bytes,
                      notify_bytes=self.notify_max_bytes, notify_age=self.notify_keep_seconds,
                      deliveries_age=self.deliveries_keep_seconds, redeliver_msgs=self.redeliver_queue_max,
                      agents_ttl=self.agent_entry_seconds, services_ttl=self.service_entry_seconds,
                      finished_age=self.finished_counts_keep_seconds, calendars_bytes=self.calendars_max_bytes,
                      agents_max=self.agents_max)

    @property
    def history(self) -> ClusterHistory:
        """The cluster's retention (jetcron.core.lifecycle.retention)."""
        return ClusterHistory(keep_seconds=self.history_keep_seconds, min_seconds=self.history_min_seconds,
                              max_seconds=self.history_max_seconds, keep_succeeded=self.history_keep_succeeded,
                              keep_failed=self.history_keep_failed, dead_letter_seconds=self.dlq_keep_seconds)

    @property
    def lead_seconds(self) -> float:
        return self.trigger_horizon if self.placement_lead is None else self.placement_lead


def reference() -> str:
    """docs/settings.md: every JETCRON_* setting, its type, default and meaning, from the class above."""
    lines = ["# Settings", "", "Every service reads these from `JETCRON_*` environment variables (pydantic-settings).",
             "Generated by `python -m jetcron.config` from `libs/jetcron/config.py`; a test fails when this page is "
             "stale.",
             "", "| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        kind = str(field.annotation).replace("<class '", "").replace("'>", "").replace("typing.", "")
        kind = kind.replace("|", "\\|")
        default = "" if field.default is None else f"`{field.default}`"
        meaning = " ".join((field.description or "").split()).replace("|", "\\|")
        lines.append(f"| `JETCRON_{name.upper()}` | `{kind}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(reference())
