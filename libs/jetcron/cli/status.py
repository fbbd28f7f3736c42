"""`jetcron status`: one screen on the whole system (or `-o json` with every instance and its /metrics URL)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from datetime import UTC, datetime

import msgspec
import typer
from rich.table import Table

from jetcron.bus.storage import SERVER, Usage
from jetcron.cli.connection import target, unreachable
from jetcron.cli.identity import Target
from jetcron.cli.output import console, fail, output_option
from jetcron.core.errors import JetcronError, Unavailable
from jetcron.ops.overview import AGENTS_SHOWN, Overview, gather
from jetcron.sdk.client import Client


async def _collect(where: Target, agents: int) -> Overview:
    client = await Client.connect(where.url, timeout=5, identity=where.identity)
    assert client.nc is not None  # Client.connect makes a connection of its own
    try:
        return await gather(client.nc, datetime.now(UTC), os.environ.get("JETCRON_NATS_MONITOR_URL"), agents)
    finally:
        await client.close()


def _when(at: datetime, now: datetime) -> str:
    return f"{max(0.0, (now - at).total_seconds()):.0f}s ago"


def render(view: Overview) -> None:
    now = view.at
    per_service = Counter(i.service for i in view.services)
    console.print(f"[bold]jetcron status[/bold]  {now:%Y-%m-%d %H:%M:%S} UTC   services: "
                  + (", ".join(f"{name} ×{n}" for name, n in sorted(per_service.items())) or "[red]none[/red]"))
    table = Table("service", "instance", "host", "ready", "ping", "heartbeat", "metrics", box=None)
    for i in view.services:
        table.add_row(i.service, i.instance, i.host, "yes" if i.ready else "[red]no[/red]",
                      "ok" if i.answers_ping else "[red]no answer[/red]", _when(i.heartbeat_at, now), i.metrics_url)
    console.print(table)
    holders = Counter(view.shard_holders.values())
    console.print(f"placement leader: {view.placement_leader or '[red]none[/red]'}   "
                  f"tracker leader: {view.tracker_leader or '[red]none[/red]'}   "
                  f"trigger shards held: {len(view.shard_holders)} of {view.trigger_shards or '?'} "
                  f"({', '.join(f'{h}: {n}' for h, n in sorted(holders.items())) or 'nobody'})")
    agents = Table("agent", "host", "free cpu", "free memory MiB", "free gpus", "running", "draining", "heartbeat",
                   box=None)
    for a in view.agents:
        agents.add_row(a.agent_id, a.host, f"{a.free_cpu if a.free_cpu is not None else '?'}/{a.cpu:g}",
                       f"{a.free_memory_mb if a.free_memory_mb is not None else '?'}/{a.memory_mb}",
                       f"{a.free_gpus if a.free_gpus is not None else '?'}/{a.gpus}", str(a.running),
                       "yes" if a.draining else "", _when(a.heartbeat_at, now))
    rest = (f" (the first {len(view.agents)} by id; `jetcron agents list` pages through every one)"
            if view.agents_total > len(view.agents) else "")
    console.print(f"agents: {view.agents_total}{rest}")
    if view.agents:
        console.print(agents)
    console.print("queue depth: " + ", ".join(f"{p} {n}" for p, n in view.queue_depth.items()))
    runs = {state: n for state, n in view.runs_last_hour.items() if n}
    console.print("runs created in the last hour: " + (", ".join(f"{s} {n}" for s, n in runs.items()) or "none")
                  + (" (truncated: more runs than were read)" if view.runs_truncated else ""))
    console.print(f"dead-lettered: {view.dlq}")
    console.print("storage: " + storage_line(view.storage))


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - the loop returns


def storage_line(usages: list[Usage], shown: int = 6) -> str:
    """The server's store and the fullest streams: a share of a limit in red from 80 %, where history starts to
    be let go early at 90 % (docs/operations.md, "Storage pressure")."""
    if not usages:
        return "unknown"
    parts = []
    for u in usages[:shown]:
        name = "server store" if u.stream == SERVER else u.stream
        if u.limit > 0:
            share = f"{u.ratio:.0%} of {_size(u.limit)}"
            parts.append(f"{name} [red]{share}[/red]" if u.ratio >= 0.8 else f"{name} {share}")
        else:
            parts.append(f"{name} {_size(u.used)}")
    return ", ".join(parts)


def status(ctx: typer.Context, output: str = output_option(),
           agents: int = typer.Option(AGENTS_SHOWN, "--agents", min=0,
                                      help="How many agents to show, the first by id (all are counted).")) -> None:
    """Services alive, leaders and shard holders, agents and free capacity, queue depth, recent runs, DLQ."""
    where = target(ctx)
    try:
        view = asyncio.run(_collect(where, agents))
    except Unavailable as exc:
        fail(unreachable(exc, where.url))
    except JetcronError as exc:
        fail(exc)
    except Exception as exc:
        fail(unreachable(RuntimeError(f"cannot read the system's state from NATS at {where.url}: {exc}"), where.url))
    if output == "json":
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(view), indent=2).decode() + "\n")
        return
    render(view)
