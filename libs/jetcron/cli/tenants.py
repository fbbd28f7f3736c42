"""`jetcron tenants ...`: quotas and weights (API verbs), credentials (minted and revoked with the local keys)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import msgspec
import typer

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.accounts import push_account
from jetcron.bus.connect import Identity
from jetcron.cli.connection import client, target
from jetcron.cli.identity import auth_dir
from jetcron.cli.job_flags import history_flags
from jetcron.cli.output import emit, fail, output_option, usage
from jetcron.cli.parse import duration
from jetcron.core.errors import InvalidSpec, JetcronError
from jetcron.core.ids import QUEUE_RE, TENANT_RE
from jetcron.core.models import HistoryPolicy, Preemption, Priority, QueueQuota, TenantPolicy
from jetcron.core.placing.fairness import validate_queue_quotas
from jetcron.core.placing.preemption import validate_preemption

app = typer.Typer(no_args_is_help=True)
Output = output_option()
AuthDir = typer.Option(None, "--auth-dir", envvar="JETCRON_AUTH_DIR",
                       help="the keys of this system (default: the one `jetcron up` wrote)")
POLICY = ("tenant", "weight", "max_cpu", "max_memory_mb", "max_gpus", "max_submits_per_second", "max_pending_runs",
          "history", "queues", "max_priority", "preemption", "allow_run_as_root")
# --queue-quota's keys: the QueueQuota field each sets, and how its value is read.
_QUOTA_KEYS: dict[str, tuple[str, type[float] | type[int]]] = {
    "cpu": ("max_cpu", float), "memory": ("max_memory_mb", int), "gpus": ("max_gpus", int)}
QUEUE_QUOTA_HELP = "NAME:cpu=N,memory=MB,gpus=N (any of them): what one named queue's runs may hold; repeatable"
PREEMPTION_HELP = ("max=N,min-runtime=DURATION,grace=DURATION (any of them): the tenant's running runs may be "
                   "preempted by runs of higher priority, with these guards (docs/preemption.md); unset ones: the "
                   "cluster's")
QUEUE_PREEMPTION_HELP = ("NAME:on, NAME:off or NAME:max=N,min-runtime=DURATION,grace=DURATION: one named queue's own "
                         "preemption setting, in place of the tenant's; repeatable")


def preemption(text: str, flag: str = "--preemption") -> Preemption:
    """`max=2,min-runtime=10m,grace=30s` (any of them), `on` or `off`, as a Preemption."""
    if text.strip() in ("on", "off", ""):
        return Preemption(enabled=text.strip() != "off")
    fields: dict[str, Any] = {}
    for part in text.split(","):
        key, eq, value = part.strip().partition("=")
        if key not in ("max", "min-runtime", "grace") or not eq:
            raise InvalidSpec(flag, text, f"{part.strip() or 'nothing'} is not max=N, min-runtime=DURATION or "
                                          "grace=DURATION")
        if key == "max":
            try:
                fields["max_preemptions"] = int(value)
            except ValueError:
                raise InvalidSpec(flag, text, f"max={value}: not a whole number") from None
        else:
            field = "min_runtime_seconds" if key == "min-runtime" else "grace_seconds"
            try:
                fields[field] = duration(value, f"{flag} {key}")
            except InvalidSpec as exc:
                raise InvalidSpec(flag, text, f"{key}={value}: {exc.problem}") from None
    return Preemption(**fields)


def queue_preemptions(texts: list[str], queues: dict[str, QueueQuota]) -> dict[str, QueueQuota]:
    """`--queue-preemption batch:off`, once per queue, into the queues' settings (beside their quotas)."""
    out = dict(queues)
    seen: set[str] = set()
    for text in texts:
        name, sep, rest = text.partition(":")
        if not sep or not QUEUE_RE.fullmatch(name):
            raise InvalidSpec("--queue-preemption", text, "must be NAME:on, NAME:off or NAME:max=N,... with a queue "
                                                          "name of 1-63 letters, digits, '-' or '_'")
        if name in seen:
            raise InvalidSpec("--queue-preemption", text, f"queue {name} is given twice")
        seen.add(name)
        setting = preemption(rest, "--queue-preemption")
        out[name] = msgspec.structs.replace(out.get(name, QueueQuota()), preemption=setting)
    return out


def queue_quotas(texts: list[str]) -> dict[str, QueueQuota]:
    """`--queue-quota batch:cpu=8,memory=16384,gpus=2`, once per queue, as TenantPolicy.queues."""
    queues: dict[str, QueueQuota] = {}
    for text in texts:
        name, sep, rest = text.partition(":")
        if not sep or not QUEUE_RE.fullmatch(name):
            raise InvalidSpec("--queue-quota", text, "must be NAME:cpu=N,memory=MB,gpus=N with a queue name of "
                                                     "1-63 letters, digits, '-' or '_'")
        if name in queues:
            raise InvalidSpec("--queue-quota", text, f"queue {name} is given twice")
        fields: dict[str, Any] = {}
        for part in rest.split(","):
            key, eq, value = part.strip().partition("=")
            if key not in _QUOTA_KEYS or not eq:
                raise InvalidSpec("--queue-quota", text, f"{part.strip() or 'nothing'} is not cpu=N, memory=MB "
                                                         "or gpus=N")
            field, kind = _QUOTA_KEYS[key]
            if field in fields:
                raise InvalidSpec("--queue-quota", text, f"{key} is given twice")
            try:
                number = kind(value)
            except ValueError:
                what = "a number" if kind is float else "a whole number"
                raise InvalidSpec("--queue-quota", text, f"{key}={value}: not {what}") from None
            if not (math.isfinite(number) and number >= 0):
                raise InvalidSpec("--queue-quota", text, f"{key}={value}: must be a number >= 0")
            fields[field] = number
        queues[name] = QueueQuota(**fields)
    validate_queue_quotas(queues)
    return queues


def _rows(data: Any) -> list[dict[str, Any]]:
    """A tenant per row, its queue quotas written as --queue-quota takes them."""
    items = data if isinstance(data, list) else [data]
    return [{**item, "queues": " ".join(_quota_text(name, quota) for name, quota in (item.get("queues") or {}).items()),
             "preemption": _preemptions(item)}
            for item in items]


def _preemptions(item: dict[str, Any]) -> str:
    """The tenant's preemption setting as --preemption takes it, then each queue's own as NAME:..."""
    own = _preemption_text(item.get("preemption"))
    queues = [f"{name}:{_preemption_text(q['preemption'])}" for name, q in (item.get("queues") or {}).items()
              if q.get("preemption") is not None]
    return " ".join(([own] if own else []) + queues)


def _preemption_text(p: dict[str, Any] | None) -> str:
    if p is None:
        return ""
    if not p.get("enabled", True):
        return "off"
    keys = (("max", "max_preemptions"), ("min-runtime", "min_runtime_seconds"), ("grace", "grace_seconds"))
    return ",".join(f"{key}={p[field]:g}" for key, field in keys if p.get(field) is not None) or "on"


def _quota_text(name: str, quota: dict[str, Any]) -> str:
    parts = [f"{key}={quota[field]:.3f}".rstrip("0").rstrip(".") for key, (field, _) in _QUOTA_KEYS.items()
             if quota.get(field) is not None]
    return f"{name}:{','.join(parts) or '-'}"


@app.command("set")
def tenants_set(
    ctx: typer.Context,
    tenant: str,
    weight: float | None = typer.Option(None, "--weight"),
    max_cpu: float | None = typer.Option(None, "--max-cpu"),
    max_memory: int | None = typer.Option(None, "--max-memory"),
    max_gpus: int | None = typer.Option(None, "--max-gpus"),
    max_submit_rate: float | None = typer.Option(None, "--max-submit-rate",
                                                 help="creates, triggers, backfills, replays per second"),
    max_pending: int | None = typer.Option(None, "--max-pending", help="runs waiting for placement at most"),
    keep: str | None = typer.Option(None, "--keep", help="e.g. 7d: how long the tenant's finished runs are kept "
                                    "where a job says nothing (runs recorded from now on)"),
    keep_succeeded: int | None = typer.Option(None, "--keep-succeeded", help="keep at most N succeeded runs per job"),
    keep_failed: int | None = typer.Option(None, "--keep-failed", help="keep at most N failed runs per job"),
    queue_quota: list[str] = typer.Option([], "--queue-quota", help=QUEUE_QUOTA_HELP),
    preemptible: bool = typer.Option(False, "--preemptible", help="the tenant's running runs may be preempted by "
                                     "runs of higher priority, with the cluster's guards (docs/preemption.md)"),
    preemption_text: str | None = typer.Option(None, "--preemption", help=PREEMPTION_HELP),
    queue_preemption: list[str] = typer.Option([], "--queue-preemption", help=QUEUE_PREEMPTION_HELP),
    max_priority: str | None = typer.Option(None, "--max-priority", help="the highest priority the tenant's jobs "
                                            "and runs may ask for: critical, high, normal or low"),
    allow_run_as_root: bool = typer.Option(False, "--allow-run-as-root", help="the tenant's jobs may ask to run as "
                                           "root (run_as_root), on agents that allow it too: such a job reaches "
                                           "everything on its host"),
    output: str = Output,
) -> None:
    """Set a tenant's fair-share weight, quotas (its own and its named queues'), admission limits and history
    retention (admin). What is not given is unset: the whole policy is replaced."""
    if preemptible and preemption_text is not None:
        usage(f"--preemptible is --preemption on: give one of them (got --preemption {preemption_text})")
    try:
        fields = history_flags(keep, keep_succeeded, keep_failed)
        queues = queue_preemptions(queue_preemption, queue_quotas(queue_quota))
        preempt = preemption(preemption_text) if preemption_text is not None else (
            Preemption() if preemptible else None)
        if preempt is not None or queues:
            validate_preemption(TenantPolicy(tenant=tenant, queues=queues, preemption=preempt))
    except InvalidSpec as exc:
        usage(str(exc))
    history = HistoryPolicy(**fields) if fields else None
    if max_priority is not None and max_priority not in {p.value for p in Priority}:
        usage(f"--max-priority {max_priority!r}: must be one of critical, high, normal, low")
    with client(ctx) as c:
        policy = c.tenants.set(tenant, weight=weight, max_cpu=max_cpu, max_memory_mb=max_memory, max_gpus=max_gpus,
                               max_submits_per_second=max_submit_rate, max_pending_runs=max_pending, history=history,
                               queues=queues or None, max_priority=max_priority, preemption=preempt,
                               allow_run_as_root=allow_run_as_root)
    emit(policy, output, POLICY, rows=_rows)


@app.command("list")
def tenants_list(ctx: typer.Context, output: str = Output) -> None:
    """Tenants with a policy (admin)."""
    with client(ctx) as c:
        page = c.tenants.list()
    emit(page.items, output, POLICY, rows=_rows)


def _authority(path: Path | None) -> Authority:
    root = path or auth_dir()
    if root is None or not Authority.exists(root):
        usage(f"no keys found at {root or 'the default places'}: give --auth-dir (the auth/ folder of "
              "`jetcron up`'s data dir, or of `jetcron auth init`)")
    return Authority(root)


@app.command("create")
def create(
    tenant: str,
    creds_out: Path = typer.Option(..., "--creds-out", help="where to write the tenant's credentials (mode 0600)"),
    expires_in: float | None = typer.Option(None, "--expires-in", help="seconds the credential is valid"),
    auth: Path | None = AuthDir,
) -> None:
    """Issue a credential for TENANT: it may use its own tenant's API verbs and nothing else."""
    if not TENANT_RE.fullmatch(tenant):
        usage(f"tenant {tenant!r}: must be 1-63 letters, digits, '-' or '_'")
    if expires_in is not None and expires_in <= 0:
        usage(f"--expires-in {expires_in}: must be > 0")
    issued = _authority(auth).write_creds(creds_out, Role.TENANT, tenant=tenant, expires_in=expires_in)
    typer.echo(f"tenant {tenant}: credential {issued.public} written to {creds_out}")


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    tenant: str,
    key: list[str] = typer.Option([], "--key", help="revoke only this credential (its public key, U...)"),
    auth: Path | None = AuthDir,
) -> None:
    """Revoke every credential of TENANT (or those --key names): the servers drop them at once, no restart."""
    authority = _authority(auth)
    mine = [i.public for i in authority.issued() if i.role == Role.TENANT.value and i.subject == tenant]
    chosen = key or mine
    unknown = sorted(set(chosen) - set(mine))
    if not chosen or unknown:
        usage(f"tenant {tenant!r} has no credential {', '.join(unknown) or 'issued'}")
    token = authority.revoke(chosen)
    where = target(ctx)
    sys_identity = Identity(creds=str(authority.sys_creds()), tls_ca=where.identity.tls_ca)
    try:
        message = asyncio.run(push_account(where.url, token, sys_identity))
    except JetcronError as exc:
        fail(exc)
    typer.echo(f"tenant {tenant}: revoked {len(chosen)} credential(s); {message}")



