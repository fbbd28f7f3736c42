"""What the dashboard shows, computed without I/O: schedules in words (jetcron.core.timing.schedule_words, the CLI's
too), state labels, small SVG charts, a DAG.

Everything returns plain values or escaped markup (markupsafe), so templates only place it and the unit tests
check it without a browser.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

from jetcron.core.lifecycle.dag import Graph
from jetcron.core.lifecycle.finished import FinishedMinute
from jetcron.core.lifecycle.run_state import RunState
from jetcron.core.models import JobRecord, Run, Schedule, ScheduleKind
from jetcron.core.timing import cron
from jetcron.core.timing.calendars import CalendarSpec
from jetcron.core.timing.schedule_words import schedule_words as schedule_words
from jetcron.wire.api import FireTime

# One colour family per outcome; the template always prints the state as text too (colour is never the only cue).
STATE_TONE: Mapping[str, str] = {
    RunState.WAITING: "wait", RunState.SCHEDULED: "wait", RunState.ASSIGNED: "active", RunState.RUNNING: "active",
    RunState.RETRY_WAIT: "warn", RunState.SUCCEEDED: "ok", RunState.FAILED: "bad", RunState.DEAD: "bad",
    RunState.CANCELLED: "muted", RunState.SKIPPED: "muted", RunState.BLOCKED: "warn",
}


def tone(state: str) -> str:
    return STATE_TONE.get(state, "muted")


@dataclass(frozen=True)
class NextFire:
    local: datetime
    utc: datetime


_NEXT: dict[tuple[Schedule, datetime], tuple[datetime, NextFire | None]] = {}
_NEXT_MAX = 20_000


def next_fire(record: JobRecord, now: datetime) -> NextFire | None:
    """The next occurrence of an active job, in its zone and in UTC; None when it will not fire again.

    Remembered until it passes (the next fire after a moment is the next fire after every later moment before
    it), so a jobs page does not compute 50 cron matches per view."""
    if record.status != "active":
        return None
    schedule = record.spec.schedule
    if schedule.kind == ScheduleKind.NOW:
        return None
    key = (schedule, record.created_at)
    if key in _NEXT:
        asked, known = _NEXT[key]
        if asked <= now and (known.utc > now if known is not None else True):
            return known
    upcoming = cron.next_fires(schedule, now, 1, created_at=record.created_at)
    at = upcoming[0].at if upcoming else None
    fire = NextFire(local=at.astimezone(cron.zone(schedule.tz)), utc=at) if at is not None else None
    if len(_NEXT) >= _NEXT_MAX:
        _NEXT.clear()
    _NEXT[key] = (now, fire)
    return fire


@dataclass(frozen=True)
class FireRow:
    local: str
    utc: str
    note: str


def _moment(at: datetime, zone_name: str) -> str:
    """`Sun 2026-11-01 01:30 EDT`: the weekday and the zone's own abbreviation (which tells the two passes of a
    fold apart), seconds only where a schedule has them."""
    clock = "%H:%M:%S" if at.second or at.microsecond else "%H:%M"
    return f"{at:%a %Y-%m-%d} {at.strftime(clock)} {at.tzname() or zone_name}"


def fire_rows(schedule: Schedule, fires: Iterable[FireTime]) -> list[FireRow]:
    """A job's next fire times as its page shows them: read, in its zone and in UTC, each with why it is skipped
    (and until when) or what a DST change does to it (jetcron.core.timing.cron.dst_note)."""
    zone = cron.zone(schedule.tz)
    rows = []
    for fire in fires:
        at = datetime.fromisoformat(fire.utc)
        if fire.skipped:
            note = f"skipped: {fire.skipped}" + (f", as is every one until {fire.until}" if fire.until else "")
        else:
            note = cron.dst_note(schedule, at) or ""
        rows.append(FireRow(local=_moment(at.astimezone(zone), schedule.tz), utc=_moment(at.astimezone(UTC), "UTC"),
                            note=note))
    return rows


def set_fields(value: Any) -> Any:
    """A spec as its page shows it: only the fields that are set (no nulls, no empty lists or maps)."""
    if isinstance(value, dict):
        kept = {k: set_fields(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [set_fields(v) for v in value]
    return value


def calendar_uses(calendar: CalendarSpec, jobs: Iterable[JobRecord]) -> list[tuple[JobRecord, list[str]]]:
    """The jobs that name `calendar`, each with where (`exclude`, `only`, or both), by name. Only its own
    tenant's jobs count: names are per tenant, so the admin's list of every job can hold another tenant's job
    naming a calendar of the same name, which is not this one."""
    found: list[tuple[JobRecord, list[str]]] = []
    for record in jobs:
        spec = record.spec
        if spec.tenant != calendar.tenant:
            continue
        where = [field for field, names in (("exclude", spec.exclude_calendars), ("only", spec.only_calendars))
                 if calendar.name in names]
        if where:
            found.append((record, where))
    return sorted(found, key=lambda pair: pair[0].spec.name)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def wait_seconds(run: Run) -> float | None:
    """How long a started run waited past its due time."""
    if run.started_at is None:
        return None
    return max(0.0, (run.started_at - run.due_at).total_seconds())


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


FINISHED_ORDER = (RunState.SUCCEEDED, RunState.FAILED, RunState.DEAD, RunState.CANCELLED, RunState.SKIPPED,
                  RunState.BLOCKED)
"""Outcomes from the bottom of a bar up; one the server knows and this list does not comes last."""


def outcomes_of(minutes: Iterable[FinishedMinute]) -> list[str]:
    """The outcomes that occur in `minutes`, in FINISHED_ORDER, then any other by name."""
    seen = {outcome for m in minutes for outcome, n in m.counts.items() if n}
    known = [o.value for o in FINISHED_ORDER if o.value in seen]
    return known + sorted(seen - set(known))


def finished_totals(minutes: Sequence[FinishedMinute]) -> list[tuple[str, int]]:
    """Each outcome's runs over the span, in the bars' order: the chart's legend and its figures as text."""
    totals: Counter[str] = Counter()
    for minute in minutes:
        totals.update(minute.counts)
    return [(outcome, totals[outcome]) for outcome in outcomes_of(minutes)]


def stacked_bars(minutes: Sequence[FinishedMinute], *, width: int = 600, height: int = 120) -> Markup:
    """A stacked bar per minute (succeeded at the bottom, then failed, dead, cancelled, ...), each outcome in its
    state's colour (dead darker than failed), with a title per bar for hover and screen readers."""
    order = outcomes_of(minutes)
    peak = max((m.total for m in minutes), default=0) or 1
    bar = width / max(1, len(minutes))
    parts = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="finished runs per minute, last {len(minutes)} minutes">']
    for i, minute in enumerate(minutes):
        y = float(height)
        label = ", ".join(f"{minute.counts[o]} {o}" for o in order if minute.counts.get(o)) or "none"
        parts.append(f"<g><title>{escape(minute.minute.strftime('%H:%M'))} UTC: {escape(label)}</title>")
        for outcome in order:
            n = minute.counts.get(outcome, 0)
            if not n:
                continue
            h = n / peak * (height - 4)
            y -= h
            parts.append(f'<rect class="tone-{tone(outcome)} outcome-{escape(outcome)}" x="{i * bar + 1:.1f}" '
                         f'y="{y:.1f}" width="{bar - 2:.1f}" height="{h:.1f}"/>')
        if not minute.total:
            parts.append(f'<rect class="tone-none" x="{i * bar + 1:.1f}" y="{height - 1}" width="{bar - 2:.1f}" '
                         'height="1"/>')
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def hbars(rows: Sequence[tuple[str, float, float]], *, width: int = 300) -> Markup:
    """Horizontal capacity bars: (label, used, total) each, the figures as text beside the bar."""
    parts = [f'<svg class="bars" viewBox="0 0 {width} {18 * len(rows)}" role="img" aria-label="capacity">']
    for i, (label, used, total) in enumerate(rows):
        share = 0.0 if total <= 0 else min(1.0, used / total)
        y = i * 18
        parts.append(f'<text x="0" y="{y + 13}">{escape(label)}</text>'
                     f'<rect class="track" x="70" y="{y + 3}" width="{width - 150}" height="12"/>'
                     f'<rect class="fill" x="70" y="{y + 3}" width="{(width - 150) * share:.1f}" height="12"/>'
                     f'<text x="{width - 75}" y="{y + 13}">{used:g} / {total:g}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def timeline(run: Run, now: datetime, *, width: int = 800) -> Markup:
    """Each attempt as a bar from its start to its end (or now, while it runs) on one time axis from the run's
    due time, coloured by outcome and titled with its agent, fencing token and times."""
    spans = [(a.attempt, a.agent or "", a.token, a.started_at, a.finished_at, a.outcome or "running")
             for a in run.history if a.started_at is not None]
    if run.started_at is not None and not any(n == run.attempt for n, *_ in spans):
        spans.append((run.attempt, run.agent or "", run.token, run.started_at, run.finished_at, str(run.state)))
    if not spans:
        return Markup("")
    start = min([run.due_at, *(s[3] for s in spans if s[3] is not None)])
    end = max([now if any(s[4] is None for s in spans) else start, *(s[4] for s in spans if s[4] is not None)])
    total = max((end - start).total_seconds(), 0.001)
    row, label = 22, 160
    scale = (width - label - 10) / total
    parts = [f'<svg class="timeline" viewBox="0 0 {width} {row * len(spans) + 4}" role="img" '
             'aria-label="attempts on a time axis">']
    for i, (n, agent, token, began, ended, outcome) in enumerate(spans):
        assert began is not None
        x = label + (began - start).total_seconds() * scale
        w = max(2.0, ((ended or now) - began).total_seconds() * scale)
        # An attempt's outcome is a run state (succeeded, cancelled, ...) or a way of failing (timed out, lost)
        shade = tone(outcome) if outcome in STATE_TONE else "bad"
        title = (f"attempt {n} on {agent} (token {token}): {outcome}, from {began:%H:%M:%S} "
                 f"to {ended:%H:%M:%S} UTC" if ended else f"attempt {n} on {agent} (token {token}): running since "
                 f"{began:%H:%M:%S} UTC")
        parts.append(f'<g><title>{escape(title)}</title><text x="0" y="{i * row + 15}">#{n} {escape(agent)}</text>'
                     f'<rect class="tone-{shade}" x="{x:.1f}" y="{i * row + 4}" width="{w:.1f}" height="14" '
                     'rx="3"/></g>')
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True)
class Node:
    name: str
    layer: int
    row: int


def layers(graph: Graph) -> list[Node]:
    """Each job at the depth of its longest upstream chain (roots at 0), in name order within a layer."""
    depth: dict[str, int] = {}

    def deep(job: str) -> int:
        # Iterative: a long chain must not exhaust the recursion limit (jetcron.core.lifecycle.dag does the same).
        stack = [job]
        while stack:
            top = stack[-1]
            ups = [u for u in graph.get(top, ()) if u not in depth]
            if ups:
                stack.extend(ups)
                continue
            stack.pop()
            depth[top] = 1 + max((depth[u] for u in graph.get(top, ())), default=-1)
        return depth[job]

    names = sorted(set(graph) | {u for ups in graph.values() for u in ups})
    for name in names:
        deep(name)
    rows: Counter[int] = Counter()
    nodes = []
    for name in sorted(names, key=lambda n: (depth[n], n)):
        nodes.append(Node(name, depth[name], rows[depth[name]]))
        rows[depth[name]] += 1
    return nodes


def dag_svg(graph: Graph, states: Mapping[str, str], links: Mapping[str, str]) -> Markup:
    """The flow as boxes left to right (upstreams first), each coloured and labelled by its run's state."""
    nodes = layers(graph)
    w, h, gap_x, gap_y = 170, 44, 60, 24
    at = {n.name: (20 + n.layer * (w + gap_x), 20 + n.row * (h + gap_y)) for n in nodes}
    width = max((x for x, _ in at.values()), default=0) + w + 20
    height = max((y for _, y in at.values()), default=0) + h + 20
    parts = [f'<svg class="dag" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
             'aria-label="flow graph"><defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
             'markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>']
    for job, ups in sorted(graph.items()):
        for up in ups:
            (x1, y1), (x2, y2) = at[up], at[job]
            parts.append(f'<line class="edge" x1="{x1 + w}" y1="{y1 + h / 2}" x2="{x2}" y2="{y2 + h / 2}" '
                         'marker-end="url(#arrow)"/>')
    for node in nodes:
        x, y = at[node.name]
        state = states.get(node.name, "not run")
        box = (f'<rect class="node tone-{tone(state)}" x="{x}" y="{y}" width="{w}" height="{h}" rx="6"/>'
               f'<text x="{x + 8}" y="{y + 18}" class="name">{escape(node.name)}</text>'
               f'<text x="{x + 8}" y="{y + 35}" class="state">{escape(state)}</text>')
        link = links.get(node.name)
        parts.append(f'<a href="{escape(link)}">{box}</a>' if link else box)
    parts.append("</svg>")
    return Markup("".join(parts))
