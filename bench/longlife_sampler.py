"""What the long-life bench records every minute, from outside the system: the server's messages and bytes per
stream (and the files behind them on disk), each process's memory and CPU, and the refusals the services and
the server logged. Nothing here asks a service: a service that is out of memory or wedged must not take the
measurement down with it."""

from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")

STORAGE_FULL = ("storage full", "maximum bytes", "maximum messages", "insufficient resources", "resource limits",
                "10047", "10048", "10026", "10027")
"""Words of a write the server refused for lack of room (jetcron.core.errors.Unavailable from jetcron.bus.kv.translate,
and the server's own codes and log lines)."""
UNAVAILABLE = ("retry later", "did not answer", "unavailable", "10008", "no responders", "timed out", "timeout")
"""Words of a write that found no answer or a server not ready."""


def streams(monitor_url: str) -> dict[str, dict[str, int]]:
    """Messages, bytes, sequences and deletions of every stream (KV buckets are streams `KV_<bucket>`), from the
    monitor port's /jsz: one request however many streams, and no client connection."""
    with urllib.request.urlopen(f"{monitor_url}/jsz?streams=true", timeout=10) as resp:
        data = json.loads(resp.read())
    out: dict[str, dict[str, int]] = {}
    for account in data.get("account_details", []):
        for stream in account.get("stream_detail", []):
            state = stream.get("state", {})
            out[stream["name"]] = {"messages": int(state.get("messages", 0)), "bytes": int(state.get("bytes", 0)),
                                   "first_seq": int(state.get("first_seq", 0)),
                                   "last_seq": int(state.get("last_seq", 0)),
                                   "deleted": int(state.get("num_deleted", 0))}
    return out


def disk_bytes(store_dir: Path) -> dict[str, int]:
    """Bytes of the files behind each stream (`<store>/jetstream/<account>/streams/<name>/`): what the disk holds,
    which can stay above the stream's own byte count when removed messages leave their blocks half used."""
    out: dict[str, int] = {}
    for streams_dir in store_dir.glob("jetstream/*/streams"):
        for stream in streams_dir.iterdir():
            out[stream.name] = out.get(stream.name, 0) + _tree_bytes(stream)
    return out


def _tree_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # a block the server removed while we walked
                pass
    return total


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (/proc/<pid>/status VmRSS); None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU a process has used (/proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class LogCounts:
    """Lines of one process's log so far: by level, and those that say a write was refused."""

    errors: int = 0
    warnings: int = 0
    storage_full: int = 0
    unavailable: int = 0
    last_refusal: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"errors": self.errors, "warnings": self.warnings, "storage_full": self.storage_full,
                "unavailable": self.unavailable, "last_refusal": self.last_refusal[:300]}


@dataclass
class LogScanner:
    """Reads each log from where it stopped last time: a minute's new lines, not the whole file again."""

    paths: dict[str, Path]
    offsets: dict[str, int] = field(default_factory=dict)
    counts: dict[str, LogCounts] = field(default_factory=dict)

    def scan(self) -> dict[str, dict[str, Any]]:
        for name, path in self.paths.items():
            counts = self.counts.setdefault(name, LogCounts())
            try:
                with path.open("rb") as f:
                    f.seek(self.offsets.get(name, 0))
                    chunk = f.read()
            except FileNotFoundError:
                continue
            end = chunk.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[name] = self.offsets.get(name, 0) + end
            for raw in chunk[:end].splitlines():
                _count(counts, raw.decode(errors="replace"))
        return {name: c.as_dict() for name, c in self.counts.items()}


def _count(counts: LogCounts, line: str) -> None:
    lower = line.lower()
    if '"level":"error"' in lower or "[err]" in lower or '"level": "error"' in lower:
        counts.errors += 1
    elif '"level":"warning"' in lower or "[wrn]" in lower or '"level": "warning"' in lower:
        counts.warnings += 1
    else:
        return  # an info line saying "retry later" is a plan, not a refusal
    if any(word in lower for word in STORAGE_FULL):
        counts.storage_full += 1
        counts.last_refusal = line
    elif any(word in lower for word in UNAVAILABLE):
        counts.unavailable += 1
        counts.last_refusal = line


WATCHED_METRICS = ("jetcron_history_shed_total", "jetcron_history_pruned_total", "jetcron_occurrences_total",
                   "jetcron_fire_gate_duplicates_total", "jetcron_leases_expired_total", "jetcron_retries_total",
                   "jetcron_topology_recreated_total", "jetcron_storage_used_ratio", "jetcron_api_requests_total")
"""What each service's /metrics says about refusals and early removals (libs/jetcron/telemetry/metrics.py): history shed
because storage was near full, topology made again, occurrences by outcome, storage use per stream."""


def scrape(url: str) -> dict[str, float]:
    """The watched series of one /metrics page that are not zero (an API request is counted only when it was
    not answered `ok`)."""
    out: dict[str, float] = {}
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return out
    for line in text.splitlines():
        if not line.startswith(WATCHED_METRICS):
            continue
        series, _, value = line.rpartition(" ")
        if series.startswith("jetcron_api_requests_total") and 'outcome="ok"' in series:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        if number:
            out[series] = number
    return out


@dataclass
class Processes:
    """The pids to watch, by name (nats-server and each service), and their CPU at the last sample."""

    pids: dict[str, int]
    last_cpu: dict[str, float] = field(default_factory=dict)

    def sample(self, interval: float) -> tuple[dict[str, int | None], dict[str, float | None]]:
        """(RSS bytes, CPU share of one core over the interval) of each process."""
        rss: dict[str, int | None] = {}
        share: dict[str, float | None] = {}
        for name, pid in self.pids.items():
            rss[name] = rss_bytes(pid)
            cpu = cpu_seconds(pid)
            before = self.last_cpu.get(name)
            share[name] = None if cpu is None or before is None or interval <= 0 else round(
                (cpu - before) / interval, 3)
            if cpu is not None:
                self.last_cpu[name] = cpu
        return rss, share
