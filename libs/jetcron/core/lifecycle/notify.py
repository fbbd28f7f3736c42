"""Notifications, the pure part: which events a run record holds, what a target may be, how a body is signed,
and which deadlines an occurrence missed. The notifier service (services/jetcron_services/notifier) does the I/O."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import random
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.ids import RUN_ID_RE
from jetcron.core.lifecycle.retry import FAILURE_OUTCOMES, backoff_delay
from jetcron.core.models import (
    JobSpec,
    NotifyEvent,
    NotifyRule,
    RetryPolicy,
    Run,
    RunState,
    Schedule,
    ScheduleKind,
)
from jetcron.core.timing.schedule_text import CALENDAR

MAX_RULES = 10
MAX_URL = 2048
SUBJECT_RE = re.compile(r"^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63}){0,7}$")
EMAIL_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+$")
SECRET_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SIGNATURE_HEADER = "Jetcron-Signature"
"""`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>`: Stripe's scheme, so receivers can reuse its
verifiers; the timestamp inside the MAC lets a receiver refuse replays older than its tolerance."""
EVENT_HEADER = "Jetcron-Event"
DELIVERY_HEADER = "Jetcron-Delivery"
START, FINISH = "start", "finish"
_ENDED_FOR_GOOD = frozenset({RunState.DEAD, RunState.FAILED})


class Notice(msgspec.Struct, frozen=True, kw_only=True):
    """One event of one run, as every target receives it: facts of the record, never its command, env or
    secrets."""

    id: str
    """Stable across redeliveries and replicas: receivers deduplicate by it."""
    event: NotifyEvent
    tenant: str
    job: str
    run_id: str
    attempt: int
    state: str
    reason: str = ""
    outcome: str = ""
    exit_code: int | None = None
    scheduled_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    trace_id: str = ""


class DeliveryAttempt(msgspec.Struct, frozen=True, kw_only=True):
    at: datetime
    ok: bool
    status: int | None = None
    """The webhook's HTTP status (none for a subject or an email)."""
    error: str = ""
    seconds: float = 0.0


DELIVERY_ID_RE = re.compile(rf"^{RUN_ID_RE.pattern[1:-1]}\.[a-z_]{{1,32}}-[0-9]{{1,4}}-[0-9]{{1,4}}$")
"""A delivery's id (delivery_key): its notice's id (`<run id>.<event>-<attempt>`) and its rule's index. Exactly
these, as the KV key it is: a looser pattern let ids through that the store refuses as keys (`.01-2`)."""


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """One notice to one rule's target, and every try at it (jc_notify, by delivery id)."""

    delivery_id: str
    notice: Notice
    rule: int
    """The index of the rule in the job's `notify` list."""
    target: str
    """What was addressed, without a webhook's path or query (they may hold a receiver's token)."""
    state: str
    """pending (tries left), delivered, or parked (every try failed; `notifications redeliver` tries again)."""
    attempts: list[DeliveryAttempt] = msgspec.field(default_factory=list)
    budget_from: int = 0
    """Tries before this index were spent before the last redelivery: they do not count against the limit."""
    next_at: datetime | None = None
    created_at: datetime
    updated_at: datetime


PENDING, DELIVERED, PARKED = "pending", "delivered", "parked"


def after_try(delivery: Delivery, tried: DeliveryAttempt, *, max_attempts: int, policy: RetryPolicy,
              rng: random.Random) -> Delivery:
    """The record after one try: delivered, parked once `max_attempts` tries since the last redelivery failed,
    or pending with the next try after an exponential backoff with jitter."""
    attempts = [*delivery.attempts, tried]
    spent = len(attempts) - delivery.budget_from
    if tried.ok:
        return msgspec.structs.replace(delivery, attempts=attempts, state=DELIVERED, next_at=None,
                                       updated_at=tried.at)
    if spent >= max_attempts:
        return msgspec.structs.replace(delivery, attempts=attempts, state=PARKED, next_at=None, updated_at=tried.at)
    wait = backoff_delay(policy, spent, rng)
    return msgspec.structs.replace(delivery, attempts=attempts, state=PENDING,
                                   next_at=tried.at + timedelta(seconds=wait), updated_at=tried.at)


def redelivered(delivery: Delivery, now: datetime) -> Delivery:
    """A parked delivery given a fresh budget of tries, its log kept."""
    return msgspec.structs.replace(delivery, state=PENDING, next_at=None, budget_from=len(delivery.attempts),
                                   updated_at=now)


def _notice(run: Run, event: NotifyEvent, attempt: int = 0, **facts: object) -> Notice:
    name = run.job.rsplit(".", 1)[-1] if run.tenant != "default" else run.job
    base: dict[str, object] = dict(
        id=f"{run.run_id}.{event.value}-{attempt}", event=event, tenant=run.tenant, job=name, run_id=run.run_id,
        attempt=attempt or run.attempt, state=run.state.value, reason=run.reason, outcome=run.outcome,
        exit_code=run.exit_code, scheduled_at=run.scheduled_at, started_at=run.started_at,
        finished_at=run.finished_at, trace_id=run.trace_id)
    base.update(facts)
    return Notice(**base)  # type: ignore[arg-type]


def notices(run: Run) -> list[Notice]:
    """Every event the record holds so far. A record only grows (attempts close into history, a terminal
    state stays, a missed deadline stays), so the newest revision holds every event of the older ones: a reader
    that skipped revisions loses nothing, and the ids make a repeat a no-op."""
    out: list[Notice] = []
    for h in run.history:
        if h.outcome in FAILURE_OUTCOMES:
            facts = dict(outcome=h.outcome, exit_code=h.exit_code, reason=h.reason, started_at=h.started_at,
                         finished_at=h.finished_at)
            out.append(_notice(run, NotifyEvent.FAILED, h.attempt, **facts))
            if h.outcome == "timed_out":
                out.append(_notice(run, NotifyEvent.TIMED_OUT, h.attempt, **facts))
    if run.state in _ENDED_FOR_GOOD:
        out.append(_notice(run, NotifyEvent.DEAD))
    elif run.state is RunState.SUCCEEDED:
        out.append(_notice(run, NotifyEvent.SUCCEEDED))
    elif run.state is RunState.BLOCKED:
        out.append(_notice(run, NotifyEvent.BLOCKED))
    elif run.state is RunState.SKIPPED:
        out.append(_notice(run, NotifyEvent.SKIPPED))
    if START in run.missed:
        out.append(_notice(run, NotifyEvent.START_MISSED))
    if FINISH in run.missed:
        out.append(_notice(run, NotifyEvent.FINISH_MISSED))
    return out


def delivery_key(notice_id: str, rule: int) -> str:
    """The delivery record of one notice to one rule's target: the run id, then one more token, so a job's
    deliveries are listed by `<job key>.*.*` (run ids are `<job key>.<stamp>`)."""
    return f"{notice_id}-{rule}"


def job_deliveries(job_key: str) -> str:
    return f"{job_key}.*.*"


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: bytes, header: str, body: bytes, *, now: int, tolerance: int = 300) -> bool:
    """What a receiver does (and the tests): the MAC matches and the timestamp is recent."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), f"t={timestamp},v1={parts.get('v1', '')}")


# --- targets -----------------------------------------------------------------------------------------------

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
"""RFC 6052's well-known NAT64 prefix: a translator on the path connects to the IPv4 address in its last 32 bits."""
_NAT64_OTHER = ipaddress.IPv6Network("64:ff9b::/32")
"""The rest of 64:ff9b::/32, RFC 8215's local-use 64:ff9b:1::/48 among it: a site's own translator may embed the
IPv4 address at any of RFC 6052's offsets, so which address it reaches cannot be told: refused."""
_TEREDO = ipaddress.IPv6Network("2001::/32")
"""Teredo: a relay tunnels to the client's (obfuscated) IPv4 address behind its NAT, wherever that is: no webhook
receiver lives there, so refused rather than judged."""
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
"""Deprecated IPv4-compatible addresses (::a.b.c.d): a stack that still honours them reaches a.b.c.d."""
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
"""SIIT's IPv4-translated addresses (::ffff:0:a.b.c.d): a stateless translator reaches a.b.c.d."""


def reached_address(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a connection to `address` ends up at, which is what a target is judged by: the IPv4 address
    inside an IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64 or 6to4 address (the host or translator on the
    path connects to that one, and is_global passes most of these forms whatever they embed), else the address
    itself; None where it cannot be told (Teredo, NAT64 prefixes other than the well-known /96).

    Raises ValueError when `address` is not an IP address."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if int(ip) > 1 and (ip in _NAT64 or ip in _IPV4_COMPATIBLE or ip in _IPV4_TRANSLATED):  # :: and ::1 are v6's own
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64_OTHER or ip in _TEREDO:
        return None
    return ip


def address_allowed(address: str, *, allow_private: bool) -> bool:
    """A public unicast address, judged by the one it reaches (reached_address), or anything when the operator
    allows private targets. Loopback, private, link-local (cloud metadata at 169.254.169.254), carrier-grade NAT,
    multicast, unspecified and reserved ranges are the server-side request forgery targets."""
    if allow_private:
        return True
    ip = reached_address(address)
    return ip is not None and ip.is_global and not ip.is_multicast


def check_webhook(url: object, field: str, *, allow_private: bool) -> str:
    if not isinstance(url, str) or not url:
        raise InvalidSpec(field, url, "must be an http or https URL")
    if len(url) > MAX_URL:
        raise InvalidSpec(field, f"{len(url)} characters", f"longer than {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidSpec(field, url, f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidSpec(field, url, f"unsupported scheme {parts.scheme!r} (http or https)")
    host = parts.hostname
    if not host:
        raise InvalidSpec(field, url, "names no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidSpec(field, url, "carries credentials: sign with `secret` (a tenant secret) instead, so no "
                                      "record holds them")
    if port == 0:
        raise InvalidSpec(field, url, "port 0 is not a valid port")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise InvalidSpec(field, url, "contains whitespace or control characters")
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None and not address_allowed(str(literal), allow_private=allow_private):
        raise InvalidSpec(field, url, "is a loopback, private, link-local or reserved address, or a NAT64, 6to4 "
                                      "or IPv4-mapped form of one (the operator may allow those with "
                                      "JETCRON_NOTIFY_ALLOW_PRIVATE=true)")
    if literal is None and not allow_private and (host == "localhost" or host.endswith(".localhost")):
        raise InvalidSpec(field, url, "is this host (the operator may allow private targets with "
                                      "JETCRON_NOTIFY_ALLOW_PRIVATE=true)")
    return url


def check_rules(rules: Sequence[NotifyRule], *, allow_private: bool, email_enabled: bool) -> None:
    if len(rules) > MAX_RULES:
        raise InvalidSpec("notify", f"{len(rules)} rules", f"more than {MAX_RULES} rules")
    for i, rule in enumerate(rules):
        where = f"notify[{i}]"
        if not rule.on:
            raise InvalidSpec(f"{where}.on", rule.on, f"names no event (known: {', '.join(NotifyEvent)})")
        if len(set(rule.on)) != len(rule.on):
            raise InvalidSpec(f"{where}.on", [e.value for e in rule.on], "names an event twice")
        targets = [t for t in ("webhook", "subject", "email") if getattr(rule, t) is not None]
        if len(targets) != 1:
            raise InvalidSpec(where, targets, "needs exactly one target: webhook, subject or email")
        if rule.webhook is not None:
            check_webhook(rule.webhook, f"{where}.webhook", allow_private=allow_private)
        if rule.subject is not None and not SUBJECT_RE.fullmatch(rule.subject):
            raise InvalidSpec(f"{where}.subject", rule.subject,
                              "must be 1-8 dot-separated tokens of letters, digits, '-' or '_' (it is published "
                              "under jc.notify.<tenant>.)")
        if rule.email is not None:
            if len(rule.email) > 254 or not EMAIL_RE.fullmatch(rule.email):
                raise InvalidSpec(f"{where}.email", rule.email, "is not an email address")
            if not email_enabled:
                raise InvalidSpec(f"{where}.email", rule.email,
                                  "this deployment has no SMTP server (JETCRON_SMTP_HOST)")
        if rule.secret is not None:
            if rule.webhook is None:
                raise InvalidSpec(f"{where}.secret", rule.secret, "signs webhooks only")
            if not SECRET_NAME_RE.fullmatch(rule.secret):
                raise InvalidSpec(f"{where}.secret", rule.secret, "is not a secret name")


# --- deadlines -----------------------------------------------------------------------------------------------

def period_seconds(schedule: Schedule) -> float | None:
    """The shortest time between two fire times of a recurring schedule (None for a one-off)."""
    if schedule.kind is ScheduleKind.EVERY:
        return schedule.every_seconds
    if schedule.kind is ScheduleKind.CRON:
        # croniter on first use: the SDK imports this module for its Delivery struct, and the CLI starts without it
        from jetcron.core.timing import cron

        return float(cron.parse_cron(schedule.cron or "").shortest_gap_seconds)
    return None


def check_deadlines(spec: JobSpec) -> None:
    for name in ("start_deadline_seconds", "finish_deadline_seconds"):
        value = getattr(spec, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value == value or value <= 0:
            raise InvalidSpec(name, value, "must be a positive number of seconds")
        if value > 30 * 86400:
            raise InvalidSpec(name, value, "must be at most 30 days")
    period = period_seconds(spec.schedule)
    start = spec.start_deadline_seconds
    if start is not None and period is not None and start > period:
        # The next occurrence would be due before this one's deadline: "did it run?" would ask of two at once.
        raise InvalidSpec("start_deadline_seconds", start,
                          f"is longer than the schedule's period ({period:g} s)")


def _paused_skip(run: Run) -> bool:
    """Skipped on purpose: it came due while the job was paused, or on a day one of its calendars skips."""
    return run.state is RunState.SKIPPED and run.reason.startswith(("paused", CALENDAR))


def first_start(run: Run) -> datetime | None:
    starts = [h.started_at for h in run.history if h.started_at is not None]
    if run.started_at is not None:
        starts.append(run.started_at)
    return min(starts, default=None)


def missed_deadlines(run: Run, spec: JobSpec | None, now: datetime) -> list[str]:
    """The deadlines `run` has missed by `now` that its record does not hold yet. A run its owner cancelled or
    paused away, one its job's calendars skipped, and a blocked run (its own event says why), miss nothing."""
    if spec is None or run.state is RunState.CANCELLED or run.state is RunState.BLOCKED or _paused_skip(run):
        return []
    out: list[str] = []
    started = first_start(run)
    if spec.start_deadline_seconds is not None and START not in run.missed:
        limit = run.scheduled_at + timedelta(seconds=spec.start_deadline_seconds)
        if (started is None and (now >= limit or run.state.terminal)) or (started is not None and started > limit):
            out.append(START)
    if spec.finish_deadline_seconds is not None and FINISH not in run.missed and started is not None:
        end = run.finished_at if run.state.terminal and run.finished_at is not None else now
        if end - started > timedelta(seconds=spec.finish_deadline_seconds):
            out.append(FINISH)
    return out


def with_missed(run: Run, spec: JobSpec | None, now: datetime) -> Run:
    """The record with the deadlines it missed by `now` added (itself when none)."""
    new = missed_deadlines(run, spec, now)
    return msgspec.structs.replace(run, missed=[*run.missed, *new]) if new else run


NEVER_FIRED = "start deadline missed: the occurrence was never fired"
