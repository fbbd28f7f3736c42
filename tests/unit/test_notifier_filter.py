"""What the notifier reads of a run record change before trying anything: deletes and records without rules
are passed over, a record with rules (its own spec's, or its job's when it keeps none) goes on to its notices."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest
from twin_support import twin_context

from jetcron.bus.consume import Drop
from jetcron.bus.kv import value_of
from jetcron.bus.memory import MemoryMessage
from jetcron.core.lifecycle.notify import Notice
from jetcron.core.models import JobRecord, JobSpec, Run, RunState
from jetcron.core.validate import decode_spec
from jetcron.wire.codec import encode
from jetcron_services.notifier.service import Notifier

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
RULE = {"on": ["succeeded"], "webhook": "https://hooks.example.com/x"}


def _spec(notify: list[dict[str, Any]]) -> JobSpec:
    return decode_spec({"name": "nightly", "command": ["true"], "tenant": "acme", "schedule": {"kind": "now"},
                        "notify": notify})


def _run(spec: JobSpec | None) -> Run:
    return Run(run_id="acme.nightly.20261203T100000000Z", job="acme.nightly", tenant="acme",
               state=RunState.SUCCEEDED, scheduled_at=T0, due_at=T0, created_at=T0, finished_at=T0, spec=spec)


def _notifier(job_rules: list[dict[str, Any]] | None) -> tuple[Notifier, list[str]]:
    notifier = Notifier(twin_context("notifier"), log=cast(Any, None), targets=cast(Any, None))
    if job_rules is not None:
        notifier.jobs["acme.nightly"] = JobRecord(spec=_spec(job_rules), created_at=T0, updated_at=T0)
    tried: list[str] = []

    async def advance(notice: Notice, index: int, rule: Any) -> None:
        tried.append(f"{notice.event.value}/{index}")

    notifier.advance = advance  # type: ignore[method-assign]
    return notifier, tried


@pytest.mark.parametrize(("data", "headers", "value"), [
    (b"", None, None),
    (None, None, None),
    (b"{}", None, b"{}"),
    (b"{}", {"KV-Operation": "DEL"}, None),
    (b"{}", {"KV-Operation": "PURGE"}, None),
    (b"{}", {"Nats-Msg-Id": "x"}, b"{}"),
])
def test_a_kv_message_gives_no_value_when_empty_or_a_delete_or_purge_marker(
        data: bytes | None, headers: dict[str, str] | None, value: bytes | None) -> None:
    assert value_of(data, headers) == value


@pytest.mark.parametrize(("spec_rules", "job_rules", "tried"), [
    pytest.param([], [RULE], [], id="the_spec_snapshot_has_none"),
    pytest.param([RULE], None, ["succeeded/0"], id="the_spec_snapshot_has_one"),
    pytest.param(None, [RULE], ["succeeded/0"], id="no_snapshot_the_job_has_one"),
    pytest.param(None, [], [], id="no_snapshot_the_job_has_none"),
    pytest.param(None, None, [], id="no_snapshot_no_job"),
])
async def test_only_a_record_with_rules_goes_on_to_its_notices(
        spec_rules: list[dict[str, Any]] | None, job_rules: list[dict[str, Any]] | None, tried: list[str]) -> None:
    notifier, seen = _notifier(job_rules)
    await notifier.on_run(cast(Any, MemoryMessage("$KV.jc_runs.x", encode(_run(
        None if spec_rules is None else _spec(spec_rules))))))
    assert seen == tried


async def test_a_delete_is_passed_over_and_an_undecodable_record_dropped() -> None:
    notifier, seen = _notifier([RULE])
    await notifier.on_run(cast(Any, MemoryMessage("$KV.jc_runs.x", b"not json", {"KV-Operation": "DEL"})))
    with pytest.raises(Drop, match="undecodable run record"):
        await notifier.on_run(cast(Any, MemoryMessage("$KV.jc_runs.x", b"not json")))
    with pytest.raises(Drop, match="undecodable run record"):
        await notifier.on_run(cast(Any, MemoryMessage("$KV.jc_runs.x", b'{"job": 3}')))
    assert seen == []
