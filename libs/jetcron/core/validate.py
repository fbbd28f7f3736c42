"""Validation at the edge: every user-controlled field, with an error naming the field and the value."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from jetcron.core.errors import InvalidSpec
from jetcron.core.host import env_names
from jetcron.core.ids import JOB_NAME_RE, QUEUE_RE, TENANT_RE
from jetcron.core.lifecycle import dag, notify
from jetcron.core.models import JobSpec
from jetcron.core.timing import cron
from jetcron.core.timing.calendars import check_job_calendar_names

MAX_BODY = 64 * 1024
MAX_DEPTH = 8
MAX_ARGS = 1024
MAX_ARG = 8192
MAX_ENV = 256
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
LABEL_RE = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
MAX_SECRETS = 64
MAX_MEMORY_MB = 16 * 1024 * 1024
"""The most memory a run may ask for (16 TiB), in MiB."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise InvalidSpec(key, value, "duplicate key in the JSON object")
        seen[key] = value
    return seen


def _depth(value: Any) -> int:
    """Nesting depth, counted without recursion (a body nested thousands deep must not overflow the stack)."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, (dict, list)):
            level += 1
            deepest = max(deepest, level)
            if deepest > MAX_DEPTH:
                return deepest  # deep enough to refuse: no need to walk the rest
            todo.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json_object(body: bytes, field: str = "body") -> dict[str, Any]:
    """Strict JSON: size, encoding, duplicate keys and depth checked before any typed decode."""
    if len(body) > MAX_BODY:
        raise InvalidSpec(field, f"{len(body)} bytes", f"larger than {MAX_BODY} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSpec(field, body[max(0, exc.start - 5) : exc.start + 5], "not valid UTF-8") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InvalidSpec(field, text[max(0, exc.pos - 10) : exc.pos + 10], f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InvalidSpec(field, f"{len(body)} bytes", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts (thousands): no sane number
        raise InvalidSpec(field, f"{len(body)} bytes", f"holds a number out of any range ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidSpec(field, type(data).__name__, "must be a JSON object")
    if _depth(data) > MAX_DEPTH:
        raise InvalidSpec(field, f"depth > {MAX_DEPTH}", f"nested deeper than {MAX_DEPTH} levels")
    bad = _unencodable(data)
    if bad is not None:
        raise InvalidSpec(bad or field, "(a lone surrogate)", "is not valid Unicode: a \\u escape names half a "
                          "character (an unpaired surrogate)")
    return data


def _unencodable(value: Any, path: str = "") -> str | None:
    """The path of the first string (or key) that is not valid Unicode, or None: JSON allows \\ud800 escapes,
    nothing downstream can store or even answer them."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if _unencodable(key) is not None:
                return path or "body"
            found = _unencodable(item, inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _unencodable(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _reject_constant(name: str) -> float:
    raise InvalidSpec("body", name, "NaN and infinities are not valid numbers")


_UNKNOWN = re.compile(r"unknown field `([^`]*)`")


S = TypeVar("S", bound=msgspec.Struct)


def decode_spec(data: Mapping[str, Any], field: str = "spec") -> JobSpec:
    """Typed decode; the error names the offending field by its path, e.g. `spec.resources.cpux`."""
    return decode_as(data, JobSpec, field)


def decode_as(data: Mapping[str, Any], kind: type[S], field: str) -> S:
    """A spec struct (a job's, or one of its parts) from JSON-shaped data, or InvalidSpec naming the field."""
    try:
        return msgspec.convert(data, kind, strict=False)
    except msgspec.ValidationError as exc:
        problem, _, where = str(exc).partition(" - at `$")
        where = where.rstrip("`").lstrip(".")
        unknown = _UNKNOWN.search(problem)
        if unknown:
            name = unknown.group(1)
            path = ".".join(p for p in (field, where, name) if p)
            raise InvalidSpec(path, _value_at(data, f"{where}.{name}".lstrip(".")), "unknown field") from None
        path = ".".join(p for p in (field, where) if p)
        raise InvalidSpec(path, _value_at(data, where), problem.strip()) from None


def _value_at(data: Mapping[str, Any], path: str) -> object:
    current: Any = data
    for part in re.split(r"\.|\[(\d+)\]", path):
        if not part:
            continue
        try:
            current = current[int(part)] if part.isdigit() else current[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return current


def _finite(
    field: str, value: float | None, lo: float, hi: float, *, allow_none: bool = False, lo_inclusive: bool = True
) -> None:
    if value is None:
        if allow_none:
            return
        raise InvalidSpec(field, value, "is required")
    if isinstance(value, bool) or not math.isfinite(value):
        raise InvalidSpec(field, value, "must be a finite number")
    if value < lo or (not lo_inclusive and value == lo) or value > hi:
        bound = f"> {lo}" if not lo_inclusive else f">= {lo}"
        raise InvalidSpec(field, value, f"must be {bound} and <= {hi}")


def _strings(field: str, values: Sequence[str], limit: int) -> None:
    for i, v in enumerate(values):
        if "\x00" in v:
            raise InvalidSpec(f"{field}[{i}]", v, "contains a NUL character")
        if len(v) > limit:
            raise InvalidSpec(f"{field}[{i}]", v, f"longer than {limit} characters")


def validate_env(env: Mapping[str, str], *, image: bool = False) -> None:
    """The job's variables (`image`: an image run's, which reach its container through the container CLI's own
    environment): names that something other than the job's own program reads are refused
    (jetcron.core.host.env_names)."""
    if len(env) > MAX_ENV:
        raise InvalidSpec("env", f"{len(env)} entries", f"more than {MAX_ENV} variables")
    for name, value in env.items():
        if not ENV_NAME_RE.fullmatch(name):
            raise InvalidSpec(f"env.{name}", name, "is not a valid variable name")
        if (why := env_names.refusal(name, image=image)) is not None:
            raise InvalidSpec(f"env.{name}", name, why)
        _strings(f"env.{name}", [value], 32768)


def validate_secrets(names: Sequence[str], env: Mapping[str, str], *, image: bool = False) -> None:
    """Secret names become the child's variables: the same rules as env names, each once, none also in env."""
    if len(names) > MAX_SECRETS:
        raise InvalidSpec("secrets", f"{len(names)} names", f"more than {MAX_SECRETS} secrets")
    seen: set[str] = set()
    for i, name in enumerate(names):
        where = f"secrets[{i}]"
        if not ENV_NAME_RE.fullmatch(name):
            raise InvalidSpec(where, name, "is not a valid variable name")
        if (why := env_names.refusal(name, image=image)) is not None:
            raise InvalidSpec(where, name, why)
        if name in seen:
            raise InvalidSpec(where, name, "is listed more than once")
        if name in env:
            raise InvalidSpec(where, name, "is also set in env: a variable comes from one place")
        seen.add(name)


def validate_spec(
    spec: JobSpec,
    *,
    now: datetime,
    created_at: datetime | None = None,
    jobs: Mapping[str, tuple[str, Sequence[str]]] | None = None,
    min_interval_seconds: float = 1.0,
    allow_private_targets: bool = False,
    email_enabled: bool = False,
) -> None:
    """Raise InvalidSpec for the first bad field; `jobs` (name -> (tenant, depends_on)) checks the DAG;
    `allow_private_targets` and `email_enabled` are the deployment's notification settings."""
    if not JOB_NAME_RE.fullmatch(spec.name):
        raise InvalidSpec(
            "name", spec.name, "must be 1-63 letters, digits, '-' or '_', starting with a letter or digit"
        )
    if not TENANT_RE.fullmatch(spec.tenant):
        raise InvalidSpec("tenant", spec.tenant, "must be 1-63 letters, digits, '-' or '_'")
    if not QUEUE_RE.fullmatch(spec.queue):
        raise InvalidSpec("queue", spec.queue, "must be 1-63 letters, digits, '-' or '_'")
    if not spec.command:
        raise InvalidSpec("command", spec.command, "must name a program (argv list, no shell)")
    if len(spec.command) > MAX_ARGS:
        raise InvalidSpec("command", f"{len(spec.command)} arguments", f"more than {MAX_ARGS} arguments")
    if not spec.command[0]:
        raise InvalidSpec("command[0]", spec.command[0], "program name is empty")
    _strings("command", spec.command, MAX_ARG)
    validate_env(spec.env, image=spec.image is not None)
    validate_secrets(spec.secrets, spec.env, image=spec.image is not None)
    if spec.image is not None and not IMAGE_RE.fullmatch(spec.image):
        raise InvalidSpec("image", spec.image, "is not a valid image reference")
    r = spec.resources
    _finite("resources.cpu", r.cpu, 0, 1024, lo_inclusive=False)
    _finite("resources.memory_mb", r.memory_mb, 1, MAX_MEMORY_MB)
    _finite("resources.gpus", r.gpus, 0, 64)
    _finite("resources.hosts", r.hosts, 1, 1024)
    if r.hosts > 1 and r.gpus == 0:
        raise InvalidSpec("resources.hosts", r.hosts, "multi-host gangs are for GPU jobs: set resources.gpus too")
    p = spec.retry
    _finite("retry.max_attempts", p.max_attempts, 1, 100)
    _finite("retry.initial_seconds", p.initial_seconds, 0, 86400, lo_inclusive=False)
    _finite("retry.multiplier", p.multiplier, 1, 10)
    _finite("retry.max_delay_seconds", p.max_delay_seconds, p.initial_seconds, 7 * 86400)
    _finite("retry.jitter", p.jitter, 0, 1)
    for i, code in enumerate(p.non_retryable_exit_codes):
        _finite(f"retry.non_retryable_exit_codes[{i}]", code, 0, 255)
    _finite("timeout_seconds", spec.timeout_seconds, 0, 30 * 86400, allow_none=True, lo_inclusive=False)
    m = spec.misfire
    _finite("misfire.catchup_window_seconds", m.catchup_window_seconds, 0, 30 * 86400)
    _finite("misfire.max_catchup", m.max_catchup, 1, 1000)
    _finite("misfire.grace_seconds", m.grace_seconds, 0, 86400)
    _finite("jitter.window_seconds", spec.jitter.window_seconds, 0, 86400)
    _finite("jitter.random_seconds", spec.jitter.random_seconds, 0, 86400)
    for key, value in spec.require.items():
        if not LABEL_RE.fullmatch(key) or not LABEL_RE.fullmatch(value):
            raise InvalidSpec(f"require.{key}", value, "labels are 1-63 of letters, digits, '.', '-', '_'")
    cron.validate_schedule(spec.schedule, created_at=created_at or now, min_interval_seconds=min_interval_seconds)
    notify.check_rules(spec.notify, allow_private=allow_private_targets, email_enabled=email_enabled)
    notify.check_deadlines(spec)
    dag.check_join(spec)
    check_job_calendar_names(spec.exclude_calendars, spec.only_calendars)
    if spec.depends_on or jobs is not None:
        dag.validate_dependencies(spec.name, spec.tenant, spec.depends_on, jobs or {})
