"""Every verb of the API, and the intake, fuzzed from its own checked-in JSON Schema (schemas/api, made from
libs/jetcron/wire/verbs.py) against the real nats-server, api and run tracker, with a tenant's credential and the
admin's.

hypothesis-jsonschema draws valid requests from each schema as it is, and from the same schema with the fields
that name things held to names that exist (a stored job, run, secret or token: so a valid request gets past the
lookup to the code behind it). A small strategy breaks them (a value of another type, a required field left out,
an unknown field, a number out of any range) or cuts them short, and a fixed list of byte-level garbage goes raw
to every subject. For every request: the reply is ok or a named error (libs/jetcron/core/errors.py), never `internal`,
never silence; a refused request stores nothing; the api is alive and answering after each verb. No agent runs:
nothing executes. The rows of docs/guarantees.md's fuzz table come from what this records (`make chaos`).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from harness import ServiceProcess, Services, mint, wait_for
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from nats.js import JetStreamContext

from jetcron.auth.authority import Authority
from jetcron.auth.roles import Role
from jetcron.bus.connect import Identity
from jetcron.core import errors
from jetcron.sdk.client import Client
from jetcron.wire import subjects as s
from jetcron.wire.verbs import VERBS

pytestmark = pytest.mark.fuzz

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "api"
TENANT = "acme"
REPLY_S = 10.0
"""Silence: no reply within this is a failure (the api answers a bad request in milliseconds)."""
EXAMPLES = 10
"""Requests hypothesis draws per verb and credential; the verbs with the largest schemas get more."""
MORE_EXAMPLES = {"jobs.create": 30, "jobs.update": 30, "tenants.set": 20, "runs.list": 16}
INTAKE_EXAMPLES = 30


NEVER = frozenset({errors.JetcronError.code, errors.Internal.code})
"""Codes no reply may carry: the root's `error` names nothing, and `internal` is what the api answers when its code
failed in a way it did not foresee (an exception turned into a reply), the very thing the fuzzing looks for."""


def _named_codes() -> frozenset[str]:
    """Every code of libs/jetcron/core/errors.py but NEVER: a reply's error must be one of them."""
    codes, todo = set(), [errors.JetcronError]
    while todo:
        kind = todo.pop()
        codes.add(kind.code)
        todo += kind.__subclasses__()
    return frozenset(codes - NEVER)


NAMED = _named_codes()
QUIET_BUCKETS = (s.BUCKET_JOBS, s.BUCKET_IDEMPOTENCY, s.BUCKET_TENANTS, s.BUCKET_SECRETS, s.BUCKET_TOKENS,
                 s.BUCKET_NOTIFY, s.BUCKET_SUBMISSIONS, s.BUCKET_CURSORS, s.BUCKET_CALENDARS)
"""Buckets nothing but an api request writes here (no trigger, placement, agent or notifier runs), so any write
at all after a refusal is the refused request's. The run tracker does write run records (it re-drives runs that
no placement takes), so for jc_runs a refusal must add no key."""


# --- the schemas -----------------------------------------------------------------------------------------------

def schema_of(verb: str) -> dict[str, Any]:
    """The request schema of `verb` as checked in, its $refs inlined (none is recursive)."""
    document = json.loads((SCHEMAS / f"{verb}.request.json").read_text())
    defs = document.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(x) for x in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = inline(defs[node["$ref"].rsplit("/", 1)[1]])
            return {**target, **{k: inline(v) for k, v in node.items() if k != "$ref"}}
        return {k: inline(v) for k, v in node.items() if k != "$defs"}

    inlined: dict[str, Any] = inline(document)
    return inlined


def _one_of(*values: Any) -> dict[str, Any]:
    return {"enum": list(values)}


def existing_names(run_id: str, token_id: str) -> dict[str, dict[str, Any]]:
    """Schemas for the properties that name something, by property name, drawing names that exist (and a few that
    do not): the job `nightly` of tenant acme, its run, its secret, the token issued to acme; and values the api
    takes for the rest of a job's spec, so that a drawn spec is often one it accepts."""
    return {
        "name": _one_of("nightly", f"{TENANT}.nightly", "fuzzed", "DB_PASSWORD"),
        "job": _one_of("nightly", f"{TENANT}.nightly", "fuzzed"),
        "tenant": _one_of(TENANT, "beta"),
        "run_id": _one_of(run_id, f"{TENANT}.nightly.20260101T030000000Z"),
        "request_id": _one_of("intake-1", "missing-1"),
        "token_id": _one_of(token_id, "0123456789abcdef"),
        "delivery_id": _one_of(f"{run_id}.dead-0-0"),
        "queue": _one_of("default", "batch"),
        "state": _one_of("scheduled", "running", "succeeded", "dead", "parked"),
        "cursor": _one_of("", f"{TENANT}.fuzzed"),
        "key": _one_of("k1", "k2"),
        "idempotency_key": _one_of("k1", "k2"),
        "from": _one_of("2026-01-01T00:00:00Z"),
        "to": _one_of("2026-01-02T00:00:00Z", "2026-01-01T06:00:00+02:00"),
        "value": _one_of("s3cret"),
        "command": {"type": "array", "items": _one_of("true", "echo"), "minItems": 1, "maxItems": 2},
        "env": _one_of({}, {"GREETING": "hi"}),
        "require": _one_of({}, {"zone": "eu"}),
        "depends_on": _one_of([], ["nightly"]),
        "secrets": _one_of([], ["DB_PASSWORD"]),
        "notify": _one_of([]),
        "cron": _one_of("0 3 * * *", "*/5 * * * *", None),
        "tz": _one_of("UTC", "Europe/Berlin"),
        "at": _one_of("2030-01-01T00:00:00Z", None),
        "anchor": _one_of(None),
        "every_seconds": _one_of(None, 60, 3600),
        "image": _one_of(None),
        "resources": _one_of({}, {"cpu": 1, "memory_mb": 256}),
        "retry": _one_of({}, {"max_attempts": 3}),
        "misfire": _one_of({}, {"kind": "skip"}),
        "jitter": _one_of({}),
        "history": _one_of(None, {"keep_seconds": 7200}),
        "queues": _one_of({}, {"batch": {"max_cpu": 2}}),
        "weight": _one_of(1, 2.5),
        "max_submits_per_second": _one_of(None, 100),
        "max_pending_runs": _one_of(None, 1000),
        **{f: _one_of(None, 60) for f in ("timeout_seconds", "start_deadline_seconds", "finish_deadline_seconds",
                                          "wait_timeout_seconds")},
    }


def held_to(schema: Any, names: dict[str, dict[str, Any]]) -> Any:
    """`schema` with every property that `names` knows drawn from there instead."""
    if isinstance(schema, list):
        return [held_to(x, names) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: held_to(v, names) for k, v in schema.items()}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {p: names.get(p, held_to(sub, names)) for p, sub in schema["properties"].items()}
    return out


# --- requests: valid, broken, garbage ---------------------------------------------------------------------------

HUGE = "\ufdd0huge\ufdd0"
"""Stands for the number 1e400 (past any float) in a drawn request; json.dumps cannot write it."""
ODD: list[Any] = [None, True, 0, -1, 0.5, 2**64, 2**200, -(2**63) - 1, "", "x", "a\x00b", "ü" * 70, [], [None],
                  {}, {"\x00": None}, HUGE]
UNKNOWN_KEYS = ["colour", "", "\x00", "Name", "name\x00", "ü"]


def encode(value: Any) -> bytes:
    raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return raw.replace(json.dumps(HUGE, ensure_ascii=False).encode(), b"1e400")


def _as(kind: str, schema: Any) -> dict[str, Any]:
    """The branch of `schema` for a value of JSON type `kind` (an anyOf of it and null, say)."""
    if not isinstance(schema, dict):
        return {}
    if schema.get("type") == kind or kind in schema:
        return schema
    for branch in schema.get("anyOf", []):
        if isinstance(branch, dict) and (branch.get("type") == kind
                                         or (kind == "object" and "properties" in branch)):
            return branch
    return {}


def _containers(value: Any, schema: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Every object and array in `value`, with its schema, outermost first."""
    if isinstance(value, dict):
        here = _as("object", schema)
        yield value, here
        props, extra = here.get("properties", {}), here.get("additionalProperties")
        for key, item in value.items():
            yield from _containers(item, props.get(key, extra if isinstance(extra, dict) else {}))
    elif isinstance(value, list):
        here = _as("array", schema)
        yield value, here
        for item in value:
            yield from _containers(item, here.get("items", {}))


@st.composite
def broken(draw: st.DrawFn, valid: st.SearchStrategy[Any], schema: dict[str, Any]) -> Any:
    """A valid request made invalid in one place: a value of another type (or out of any range), a required field
    left out, or a field the schema does not have, at any depth."""
    value = copy.deepcopy(draw(valid))
    containers = list(_containers(value, schema))
    how = draw(st.sampled_from(["retype", "drop", "unknown"]))
    required = [(c, k) for c, sub in containers if isinstance(c, dict) for k in sub.get("required", []) if k in c]
    spots = [(c, k) for c, _ in containers for k in (list(c) if isinstance(c, dict) else range(len(c)))]
    if how == "drop" and required:
        container, key = required[draw(st.integers(0, len(required) - 1))]
        del container[key]
    elif how == "retype" and spots:
        container, key = spots[draw(st.integers(0, len(spots) - 1))]
        container[key] = copy.deepcopy(draw(st.sampled_from(ODD)))
    else:
        objects = [c for c, _ in containers if isinstance(c, dict)] or [value]
        target = objects[draw(st.integers(0, len(objects) - 1))]
        target.setdefault(draw(st.sampled_from(UNKNOWN_KEYS)), copy.deepcopy(draw(st.sampled_from(ODD))))
    return value


@st.composite
def cut_short(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> bytes:
    whole = encode(draw(valid))
    return whole[: draw(st.integers(0, max(0, len(whole) - 1)))]


def requests(schema: dict[str, Any], names: dict[str, dict[str, Any]]) -> st.SearchStrategy[bytes]:
    valid = st.one_of(from_schema(schema), from_schema(held_to(schema, names)))
    return st.one_of(valid.map(encode), broken(valid, schema).map(encode), broken(valid, schema).map(encode),
                     cut_short(valid))


def garbage(schema: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Byte-level garbage, each aimed at the verb's first required field (or its first field)."""
    body = _as("object", schema)
    first = (body.get("required") or list(body.get("properties", {})) or ["name"])[0]
    k = json.dumps(first).encode()
    return [
        ("empty body", b""),
        ("truncated JSON", b"{" + k + b': "ab'),
        ("an opening brace", b"{"),
        ("invalid UTF-8 in a string", b"{" + k + b': "\xff\xfe"}'),
        ("invalid UTF-8 outside a string", b"\xc3\x28"),
        ("1e400", b"{" + k + b": 1e400}"),
        ("-1e400", b"{" + k + b": -1e400}"),
        ("2**200", b"{" + k + b": " + str(2**200).encode() + b"}"),
        ("NaN", b"{" + k + b": NaN}"),
        ("5000 nested arrays", b"{" + k + b": " + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("5000 nested objects", b'{"a": ' * 5000 + b"1" + b"}" * 5000),
        ("NUL escaped in a string", b"{" + k + b': "a\\u0000b"}'),
        ("NUL byte in a string", b"{" + k + b': "a\x00b"}'),
        ("NUL in a key", b'{"\\u0000": 1}'),
        ("lone surrogate", b"{" + k + b': "\\ud800"}'),
        ("a JSON array", b"[{" + k + b': "a"}]'),
        ("a JSON string", b'"{}"'),
        ("null", b"null"),
        ("duplicate keys", b"{" + k + b': "a", ' + k + b': "a"}'),
        ("over the size limit", b"{" + k + b': "' + b"x" * 70_000 + b'"}'),
    ]


# --- the probe --------------------------------------------------------------------------------------------------

class Found(AssertionError):
    """What the fuzzing found: a reply that is not ok or a named error, silence, a refusal that stored something."""


def _shown(body: bytes) -> str:
    return repr(body[:300]) + (f" ... ({len(body)} bytes)" if len(body) > 300 else "")


async def fingerprint(js: JetStreamContext, buckets: tuple[str, ...]) -> dict[str, object]:
    """The last sequence of each quiet bucket, and the keys of jc_runs."""
    infos = await asyncio.gather(*(js.stream_info(s.kv_stream(b)) for b in buckets),
                                 js.stream_info(s.kv_stream(s.BUCKET_RUNS), subjects_filter=s.RUN_CHANGES))
    seen: dict[str, object] = {b: info.state.last_seq for b, info in zip(buckets, infos, strict=False)}
    seen["jc_runs keys"] = frozenset(infos[-1].state.subjects or {})
    return seen


def stored_by(before: dict[str, object], after: dict[str, object]) -> list[str]:
    changed = [f"{b}: last sequence {before[b]} -> {after[b]}" for b in before if b != "jc_runs keys"
               and before[b] != after[b]]
    added = sorted(after["jc_runs keys"] - before["jc_runs keys"])  # type: ignore[operator]
    return changed + ([f"jc_runs: new keys {added[:3]}"] if added else [])


def check_reply(data: bytes) -> dict[str, Any]:
    """The reply decoded; Found unless it is ok or an error with a named code (an invalid one naming its field)."""
    try:
        reply = json.loads(data)
    except ValueError:
        raise Found(f"the reply is not JSON: {data[:300]!r}") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise Found(f"the reply is not a reply: {data[:300]!r}")
    if reply["ok"]:
        return reply
    error = reply.get("error") or {}
    if error.get("code") in NEVER:
        raise Found(f"the reply's error is `{error['code']}`, never a fuzzed request's: {error}")
    if error.get("code") not in NAMED:
        raise Found(f"the reply's error is not a named one: {error}")
    if error["code"] == "invalid" and not error.get("field"):
        raise Found(f"an `invalid` reply names no field: {error}")
    return reply


class Fuzz:
    """Sends requests on the test's loop, from hypothesis' thread too, and keeps what came back per subject."""

    def __init__(self, loop: asyncio.AbstractEventLoop, js: JetStreamContext, buckets: tuple[str, ...]) -> None:
        self.loop = loop
        self.js = js
        self.buckets = buckets
        self.state: dict[str, object] | None = None
        self.rows: dict[str, dict[str, Any]] = {}

    def row(self, subject: str) -> dict[str, Any]:
        return self.rows.setdefault(subject, {"tenant": 0, "admin": 0, "replies": Counter(), "failure": ""})

    async def refused_stores_nothing(self, body: bytes, reply: dict[str, Any]) -> None:
        """After a refusal, nothing written; after a success, the state it left is the next request's baseline."""
        assert self.state is not None
        after = await fingerprint(self.js, self.buckets)
        before, self.state = self.state, after
        if not reply["ok"]:
            stored = stored_by(before, after)
            if stored:
                raise Found(f"a refused request stored something ({'; '.join(stored)}): {_shown(body)} -> "
                            f"{reply['error']}")

    async def ask(self, row: str, who: str, nc: Any, subject: str, body: bytes, api: ServiceProcess) -> None:
        if not api.alive:
            raise Found(f"the api is not running (exit {api.proc and api.proc.returncode})")
        if self.state is None:
            self.state = await fingerprint(self.js, self.buckets)
        try:
            msg = await nc.request(subject, body, timeout=REPLY_S)
        except nats.errors.TimeoutError:
            raise Found(f"no reply within {REPLY_S:g} s on {subject}: {_shown(body)}") from None
        except nats.errors.NoRespondersError:
            raise Found(f"no api answers {subject} (alive: {api.alive}): {_shown(body)}") from None
        try:
            reply = check_reply(msg.data)
            await self.refused_stores_nothing(body, reply)
        except Found as found:
            raise Found(f"{subject} {_shown(body)}: {found}") from None
        entry = self.row(row)
        entry[who] += 1
        entry["replies"][reply["error"]["code"] if not reply["ok"] else "ok"] += 1

    def from_thread(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=6 * REPLY_S)

    async def verb(self, verb: str, who: str, nc: Any, subject: str, api: ServiceProcess,
                   strategy: st.SearchStrategy[bytes], raw: list[tuple[str, bytes]]) -> None:
        """The drawn requests (hypothesis runs in a thread of its own, each request on this loop), then the
        garbage."""

        def each(body: bytes) -> None:
            self.from_thread(self.ask(verb, who, nc, subject, body, api))

        await asyncio.to_thread(drawn(strategy, MORE_EXAMPLES.get(verb, EXAMPLES), each))
        for what, body in raw:
            try:
                await self.ask(verb, who, nc, subject, body, api)
            except Found as found:
                raise Found(f"{what}: {found}") from None


def drawn(strategy: st.SearchStrategy[Any], examples: int, each: Callable[[Any], None]) -> Callable[[], None]:
    """`each` over `examples` draws, the same ones every run; the first Found is raised once they are all sent. No
    shrinking, and no replay of the failing draw: the api keeps state between requests, so a request sent again
    meets another state (a create that failed once is a duplicate the second time), which hypothesis would report
    as a flaky test instead of the finding. The failing request is reported as it was sent."""
    found: list[Found] = []

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None, print_blob=False,
              suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate),
              report_multiple_bugs=False)
    @given(strategy)
    def run(value: Any) -> None:
        if not found:
            try:
                each(value)
            except Found as exc:
                found.append(exc)

    def sent() -> None:
        run()
        if found:
            raise found[0]

    return sent


def _failure(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:600]


async def answering(admin: Client, api: ServiceProcess) -> None:
    """The api process is alive and answers a plain request."""
    if not api.alive:
        raise Found(f"the api died (exit {api.proc and api.proc.returncode}):\n{api.output()[-2000:]}")
    try:
        reply = check_reply((await admin.nc.request(s.api_subject("jobs.list"), b'{"limit": 1}', timeout=REPLY_S)).data)
    except nats.errors.TimeoutError:
        raise Found("the api is alive but no longer answers") from None
    if not reply["ok"]:
        raise Found(f"the api no longer lists jobs: {reply['error']}")


# --- the system ---------------------------------------------------------------------------------------------------

async def connect(services: Services, authority: Authority, tmp_path: Path) -> tuple[Client, Client]:
    """Tenant acme's client and the admin's, on the system's api and run tracker (the tracker answers the
    non-terminal runs.list; nothing else is needed to answer a verb)."""
    await services.start_system(agents=0, core=("api", "run_tracker"))
    url = services.server.url
    tenant = await Client.connect(url, timeout=REPLY_S, identity=Identity(
        creds=mint(authority, tmp_path / "acme.creds", Role.TENANT, tenant=TENANT)))
    admin = await Client.connect(url, timeout=REPLY_S, identity=Identity(
        creds=mint(authority, tmp_path / "admin.creds", Role.ADMIN)))
    await tenant.call("jobs.create", {"spec": {"name": "nightly", "command": ["true"],
                                               "schedule": {"kind": "cron", "cron": "0 3 * * *"}}})
    return tenant, admin


def subjects_of(verb: str) -> dict[str, str]:
    return {"tenant": s.api_subject(verb, TENANT), "admin": s.api_subject(verb)}


@pytest.mark.timeout(400)
def test_a_reply_passes_only_as_ok_or_a_named_error_never_internal() -> None:
    # the verbs' replies and the intake's settled outcomes both go through check_reply
    assert check_reply(b'{"ok": true, "job": {}}') == {"ok": True, "job": {}}
    refused = {"ok": False, "error": {"code": "not_found", "message": "no job acme.x"}}
    assert check_reply(json.dumps(refused).encode()) == refused
    assert "internal" not in NAMED and {"invalid", "not_found", "conflict", "forbidden", "storage_full"} <= NAMED
    internal = {"code": "internal", "message": "KeyError: 'spec'"}
    with pytest.raises(Found, match=r"^the reply's error is `internal`, never a fuzzed request's: "
                                    r"\{'code': 'internal', 'message': \"KeyError: 'spec'\"\}$"):
        check_reply(json.dumps({"ok": False, "error": internal}).encode())
    with pytest.raises(Found, match=r"^the reply's error is `error`, never a fuzzed request's"):
        check_reply(b'{"ok": false, "error": {"code": "error", "message": "?"}}')
    with pytest.raises(Found, match=r"^the reply's error is not a named one: \{'code': 'oops'\}$"):
        check_reply(b'{"ok": false, "error": {"code": "oops"}}')
    with pytest.raises(Found, match=r"^an `invalid` reply names no field"):
        check_reply(b'{"ok": false, "error": {"code": "invalid", "message": "bad"}}')


async def test_every_verb_fuzzed_from_its_schema(secure_services: Services, authority: Authority, tmp_path: Path,
                                                 record_property: Callable[[str, object], None]) -> None:
    tenant, admin = await connect(secure_services, authority, tmp_path)
    try:
        run = await tenant.call("jobs.trigger", {"name": "nightly", "key": "seed"})
        await tenant.call("secrets.set", {"name": "DB_PASSWORD", "value": "seed"})
        token = await admin.call("tokens.create", {"tenant": TENANT, "name": "seed"})
        names = existing_names(run["run_id"], token["token_id"])
        fuzz = Fuzz(asyncio.get_running_loop(), admin.nc.jetstream(), QUIET_BUCKETS)
        clients = {"tenant": tenant, "admin": admin}
        api = secure_services["api"]
        restarts = itertools.count(2)

        for verb in sorted(VERBS):
            schema = schema_of(verb)
            strategy = requests(schema, names)
            entry = fuzz.row(verb)
            try:
                for who, subject in subjects_of(verb).items():
                    await fuzz.verb(verb, who, clients[who].nc, subject, api, strategy, garbage(schema))
                await answering(admin, api)
            except Exception as exc:  # one verb's finding is its row's; the others are still fuzzed
                entry["failure"] = _failure(exc)
                fuzz.state = None
                if not api.alive:  # the next verb gets an api of its own, or every row after would fail
                    api = secure_services.start(f"api-{next(restarts)}", "api")
                    await api.wait_logged("api ready", 30)

        record_property("fuzzed", {verb: {**row, "replies": dict(row["replies"])} for verb, row in fuzz.rows.items()})
        failures = {verb: row["failure"] for verb, row in fuzz.rows.items() if row["failure"]}
        assert not failures, "\n\n".join(f"{verb}: {failure}" for verb, failure in failures.items())
    finally:
        await tenant.close()
        await admin.close()


# --- the intake ---------------------------------------------------------------------------------------------------

INTAKE = s.submit_subject("<tenant>")


@pytest.mark.timeout(400)
async def test_the_intake_fuzzed_from_its_schema(secure_services: Services, authority: Authority, tmp_path: Path,
                                                 record_property: Callable[[str, object], None]) -> None:
    """Requests drawn from jobs.create's schema published to `jc.submit.acme` (by tenant acme and by the admin),
    each with a Nats-Msg-Id of its own (now and then one that is not a valid request id): every one is settled,
    `created` or `rejected` with a named error; one that jobs.create finds invalid is rejected naming the same field
    (docs/intake.md: validated as jobs.create); a rejected one stores nothing but its outcome."""
    tenant, admin = await connect(secure_services, authority, tmp_path)
    ids = itertools.count(1)
    buckets = tuple(b for b in QUIET_BUCKETS if b != s.BUCKET_SUBMISSIONS)
    fuzz = Fuzz(asyncio.get_running_loop(), admin.nc.jetstream(), buckets)
    clients = {"tenant": tenant, "admin": admin}
    api = secure_services["api"]

    async def outcome(who: str, request_id: str) -> dict[str, Any]:
        subject, ask = s.api_subject("submissions.get", None if who == "admin" else TENANT), {"request_id": request_id}
        if who == "admin":
            ask["tenant"] = TENANT

        async def settled() -> dict[str, Any] | None:
            reply = check_reply((await clients[who].nc.request(subject, json.dumps(ask).encode(),
                                                                timeout=REPLY_S)).data)
            if reply["ok"]:
                return reply  # type: ignore[no-any-return]
            if reply["error"]["code"] != "not_found":
                raise Found(f"submissions.get answered {reply['error']}")
            return None

        try:
            found: dict[str, Any] = await wait_for(settled, 20, interval=0.02, what=f"request {request_id} settled")
        except AssertionError as exc:
            raise Found(f"never settled: {exc}") from None
        return found["result"]  # type: ignore[no-any-return]

    async def submit(who: str, body: bytes, id_kind: str) -> None:
        n = next(ids)
        request_id = {"valid": f"fz-{n}", "spaces": f"not an id {n}", "too long": "x" * 100 + str(n),
                      "none": ""}[id_kind]
        if not api.alive:
            raise Found("the api is not running")
        # What jobs.create answers the same body (the intake promises to validate as it does): the intake must
        # refuse what the verb finds invalid, naming the same field.
        as_verb = check_reply((await tenant.nc.request(s.api_subject("jobs.create", TENANT), body,
                                                       timeout=REPLY_S)).data)
        fuzz.state = await fingerprint(fuzz.js, buckets)
        headers = {"Nats-Msg-Id": request_id} if request_id else None
        ack = await clients[who].nc.jetstream().publish(s.submit_subject(TENANT), body, headers=headers, timeout=5)
        key = request_id if id_kind == "valid" else f"seq-{ack.seq}"
        try:
            settled = await outcome(who, key)
            if settled["outcome"] not in ("created", "rejected"):
                raise Found(f"settled as {settled['outcome']!r}")
            reply = ({"ok": True} if settled["outcome"] == "created"
                     else check_reply(json.dumps({"ok": False, "error": settled.get("error")}).encode()))
            await fuzz.refused_stores_nothing(body, reply)
            if id_kind != "valid" and request_id:
                if reply["ok"] or reply["error"]["field"] != "Nats-Msg-Id":
                    raise Found(f"a request id that is not one was not rejected naming Nats-Msg-Id: {settled}")
            elif not as_verb["ok"] and as_verb["error"]["code"] == "invalid" and (
                    reply["ok"] or (reply["error"]["code"], reply["error"]["field"]) != ("invalid",
                                                                                          as_verb["error"]["field"])):
                raise Found(f"jobs.create refuses it ({as_verb['error']}), the intake settled it as {settled}")
        except Found as found:
            raise Found(f"{who}, Nats-Msg-Id {request_id!r}, {_shown(body)}: {found}") from None
        entry = fuzz.row(INTAKE)
        entry[who] += 1
        entry["replies"]["created" if reply["ok"] else f"rejected {reply['error']['code']}"] += 1

    schema = schema_of("jobs.create")
    names = existing_names(f"{TENANT}.nightly.20260101T030000000Z", "0123456789abcdef")
    strategy = st.tuples(requests(schema, names), st.sampled_from(["valid"] * 5 + ["spaces", "too long", "none"]))
    entry = fuzz.row(INTAKE)
    try:
        for who in ("tenant", "admin"):
            def each(drawn_request: tuple[bytes, str], who: str = who) -> None:
                fuzz.from_thread(submit(who, *drawn_request))

            await asyncio.to_thread(drawn(strategy, INTAKE_EXAMPLES, each))
            for what, body in garbage(schema):
                try:
                    await submit(who, body, "valid")
                except Found as found:
                    raise Found(f"{what}: {found}") from None
        await answering(admin, api)
        info = await admin.nc.jetstream().consumer_info(s.STREAM_SUBMIT, s.CONSUMER_INTAKE)
        if (info.num_pending, info.num_ack_pending) != (0, 0):
            raise Found(f"requests left unsettled: {info.num_pending} pending, {info.num_ack_pending} unacked")
    except Exception as exc:
        entry["failure"] = _failure(exc)
    finally:
        await tenant.close()
        await admin.close()
    record_property("fuzzed", {INTAKE: {**entry, "replies": dict(entry["replies"])}})
    assert not entry["failure"], entry["failure"]
