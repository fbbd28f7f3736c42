"""Records and messages are encoded without the fields at their defaults (jetcron.core.models.stored_format), so a
default is part of the stored format: a record written with `attempt` at 1 says nothing of its attempt, and a later
version whose default is 2 would read every such record as a second attempt. These tests hold every default of every
stored structure to `stored_defaults.json`, and check that what people read still shows every field.

A default changed on purpose needs a migration of what is stored (or a new field); then
`python -m tests.unit.test_stored_defaults` writes the file again."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from jetcron.core.ids import body_hash
from jetcron.core.models import AgentInfo, AttemptRecord, JobRecord, JobSpec, Run, RunState, stored_format
from jetcron.wire import codec, messages
from jetcron.wire.api import Reply
from jetcron.wire.codec import decode, encode, plain, with_defaults
from jetcron.wire.messages import AssignRun
from jetcron.wire.verbs import SecretRef

PINNED = Path(__file__).with_name("stored_defaults.json")


def _kinds() -> list[type[msgspec.Struct]]:
    """Every structure that inherits the stored format (stored_format's Spec and Record, messages' _Msg)."""
    found: list[type[msgspec.Struct]] = []
    todo: list[type[msgspec.Struct]] = [stored_format.Spec, stored_format.Record, messages._Msg]
    while todo:
        kind = todo.pop()
        for sub in kind.__subclasses__():
            found.append(sub)
            todo.append(sub)
    return sorted(set(found), key=lambda k: f"{k.__module__}.{k.__qualname__}")


def defaults() -> dict[str, dict[str, str]]:
    """Structure -> field -> its default as repr() shows it (a factory's value: `[]`, `{}`)."""
    table: dict[str, dict[str, str]] = {}
    for kind in _kinds():
        fields: dict[str, str] = {}
        for f in msgspec.structs.fields(kind):
            if f.default is not msgspec.NODEFAULT:
                fields[f.encode_name] = repr(f.default)
            elif f.default_factory is not msgspec.NODEFAULT:
                fields[f.encode_name] = repr(f.default_factory())
        table[kind.__qualname__] = fields
    return table


def test_every_default_of_the_stored_format_is_the_pinned_one() -> None:
    pinned = json.loads(PINNED.read_text())
    now = defaults()
    changed = [f"{kind}.{name}: {pinned[kind][name]} -> {value}" for kind, fields in now.items()
               for name, value in fields.items() if kind in pinned and name in pinned[kind]
               and pinned[kind][name] != value]
    assert not changed, ("a default of the stored format changed; every record stored before now reads "
                         f"differently: {changed} (see this module's docstring)")
    gone = [f"{kind}.{name}" for kind, fields in pinned.items() for name in fields
            if name not in now.get(kind, {})]
    assert not gone, f"a pinned default is gone (a field dropped or made required): {gone}"
    added = [f"{kind}.{name}" for kind, fields in now.items() for name in fields
             if name not in pinned.get(kind, {})]
    assert not added, f"new defaults to pin: {added} (python -m tests.unit.test_stored_defaults)"


def _spec(**fields: Any) -> JobSpec:
    return decode(encode({"name": "nightly", "command": ["true"]} | fields), JobSpec)


def test_a_field_at_its_default_is_left_out_and_read_back_as_it() -> None:
    spec = _spec()
    assert json.loads(encode(spec)) == {"name": "nightly", "command": ["true"], "schedule": {}, "resources": {},
                                        "retry": {}, "misfire": {}, "jitter": {}}
    assert decode(encode(spec), JobSpec) == spec
    given = _spec(priority="high", retry={"max_attempts": 5}, env={"A": "1"})
    shown = json.loads(encode(given))
    assert shown["priority"] == "high" and shown["retry"] == {"max_attempts": 5} and shown["env"] == {"A": "1"}
    assert decode(encode(given), JobSpec) == given


def test_a_record_stored_whole_reads_as_the_same_record() -> None:
    """Records written before defaults were left out carry every field: they decode to the same values."""
    at = datetime(2026, 12, 7, tzinfo=UTC)
    run = Run(run_id="nightly.1", job="nightly", tenant="default", state=RunState.SCHEDULED, scheduled_at=at, due_at=at,
              created_at=at,
              spec=_spec())
    whole = encode(plain(run))
    assert len(whole) > 2 * len(encode(run))
    assert decode(whole, Run) == run == decode(encode(run), Run)


def test_what_people_read_shows_every_field() -> None:
    at = datetime(2026, 12, 7, tzinfo=UTC)
    job = JobRecord(spec=_spec(), created_at=at, updated_at=at)
    shown = plain(job)
    assert set(shown) == set(JobRecord.__struct_encode_fields__)
    assert set(shown["spec"]) == set(JobSpec.__struct_encode_fields__)
    assert shown["version"] == job.version and shown["spec"]["retry"]["max_attempts"] == 3
    assert shown["created_at"] == "2026-12-07T00:00:00Z"  # builtins, ready for JSON
    assignment = plain([AssignRun(run_id="r", attempt=1, job="nightly", agent="a", spec=job.spec,
                                  scheduled_at=at, due_at=at)])
    assert assignment[0]["gpu_indices"] == [] and assignment[0]["spec"]["queue"] == "default"


def test_a_struct_that_leaves_its_defaults_out_at_the_doors_still_does() -> None:
    """The API's reply envelope has no `error` when it is ok, and a secret's reference no `deleted` unless it was
    deleted: they chose that for the door. A record inside one still shows every field."""
    at = datetime(2026, 12, 7, tzinfo=UTC)
    assert plain(Reply(ok=True, result=SecretRef(tenant="acme", name="DB"))) == {
        "ok": True, "result": {"tenant": "acme", "name": "DB"}}
    reply = plain(Reply(ok=True, result=JobRecord(spec=_spec(), created_at=at, updated_at=at)))
    assert set(reply) == {"ok", "result"} and reply["result"]["fired_by_mark"] is False


def _walked(value: Any) -> Any:
    """Every field, by walking them here: what the twins (wire.codec) must encode to."""
    if isinstance(value, msgspec.Struct):
        return {f.encode_name: _walked(getattr(value, f.name)) for f in msgspec.structs.fields(value)}
    if isinstance(value, list | tuple):
        return [_walked(v) for v in value]
    if isinstance(value, dict):
        return {k: _walked(v) for k, v in value.items()}
    return value


def test_each_struct_of_the_stored_format_encodes_whole_as_its_fields_walked() -> None:
    at = datetime(2026, 12, 7, tzinfo=UTC)
    spec = _spec(retry={"max_attempts": 5}, notify=[{"on": ["failed"], "webhook": "https://example.com/hook"}])
    attempt = AttemptRecord(attempt=1, agent="a1", token=7, outcome="failed", exit_code=3, started_at=at,
                            finished_at=at)
    samples: list[msgspec.Struct] = [
        JobRecord(spec=spec, created_at=at, updated_at=at),
        Run(run_id="r", job="nightly", tenant="default", state=RunState.FAILED, scheduled_at=at, due_at=at,
            created_at=at, spec=spec, history=[attempt], gpu_indices={"a1": [0, 1]}),
        AssignRun(run_id="r", attempt=2, job="nightly", agent="a1", spec=spec, scheduled_at=at, due_at=at,
                  gpu_indices=[0], gang=["a1", "a2"]),
        AgentInfo(agent_id="a1", cpu=8, memory_mb=1024, labels={"zone": "z"}, slots=4, heartbeat_at=at,
                  started_at=at),
    ]
    for sample in samples:
        assert plain(sample) == msgspec.to_builtins(_walked(sample)), type(sample).__name__
    for kind in _kinds():
        whole = codec._twin(kind)
        assert whole.__struct_encode_fields__ == kind.__struct_encode_fields__, kind.__name__
        assert not whole.__struct_config__.omit_defaults


def test_a_spec_hashes_as_it_did_when_specs_were_stored_whole() -> None:
    """The api's body hash (jobs.create's idempotency and same-body checks) is taken over every field: a job
    stored before defaults were left out is still the same body. The digest was taken from the whole encoding."""
    spec = _spec(name="n", schedule={"kind": "cron", "cron": "0 * * * *", "tz": "Europe/Paris"}, env={"A": "1"},
                 retry={"max_attempts": 5})
    assert body_hash(encode(with_defaults(spec))) == "9aaea668bef58112a18b6dc85bd9cd8f27634a164d31598b62e544edb4f25347"


if __name__ == "__main__":
    PINNED.write_text(json.dumps(defaults(), indent=1, sort_keys=True) + "\n")
    sys.stdout.write(f"wrote {PINNED}\n")
