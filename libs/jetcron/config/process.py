"""Settings of one process whatever its service: its HTTP endpoint, its collector, its stop, its files, and
the faults tests inject into it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from jetcron.config.group import SettingsGroup

_Count = Annotated[int, Field(ge=0)]


class EndpointSettings(SettingsGroup):
    """The HTTP port a process serves /metrics, /livez and /readyz on."""

    metrics_port: int | None = None
    """HTTP port for /metrics, /livez and /readyz; unset or 0 picks a free one (published in jc_services)."""
    metrics_host: str = "0.0.0.0"
    """Address the HTTP port binds to; 127.0.0.1 keeps it on this host."""


class ProcessSettings(SettingsGroup):
    """How a process traces to its console, keeps its files, tunes its collector and stops; and how long the run
    tracker keeps a finished run's checkpoint, kept here where docs/settings.md lists it."""

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


class FaultSettings(SettingsGroup):
    """Faults the chaos tests inject into a process: a skewed clock, a fault point."""

    clock_skew: float = Field(default=0.0, ge=-3600, le=3600)
    """Seconds added to this process's clock (a host whose clock is 30 s ahead: 30). For fault tests: nothing
    that decides who holds a lease or whether it expired reads this clock (the NATS server judges that)."""
    fault: str | None = None
    """Fault point for chaos tests: POINT=ACTION, e.g. agent.after_exit=exit."""
