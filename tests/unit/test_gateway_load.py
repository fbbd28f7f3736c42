"""What one token can make the gateway and the API do: a log follower reads each byte of output once, a token has a
bounded number of followers open at once, and the dashboard's overview is a fixed handful of API calls however
many jobs the viewer has."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from harness import wait_for
from litestar import Litestar
from litestar.testing import TestClient
from twin_support import twin_context

from jetcron.auth.tokens import TokenRecord, issue
from jetcron.bus.memory import MemoryMessage, MemoryRpc, MemoryStreams
from jetcron.core.ids import job_key, run_id
from jetcron.core.models import JobRecord, JobSpec, Run, RunState
from jetcron.sdk import client as sdk_client
from jetcron.sdk.client import Client
from jetcron.sdk.errors import api_error
from jetcron.wire import subjects as s
from jetcron.wire.api import ErrorBody, Page
from jetcron.wire.verbs import FinishedRuns
from jetcron_services.api.call import Call
from jetcron_services.api.runs import Runs
from jetcron_services.gateway.app import build_app
from jetcron_services.gateway.gate import Followers, Gate
from jetcron_services.gateway.ui.session import Sessions
from jetcron_services.runtime import Context

T0 = datetime(2026, 12, 1, tzinfo=UTC)
RUN = run_id(job_key("acme", "nightly"), T0)


def _run(state: RunState = RunState.RUNNING, n: int = 0, job: str = "nightly") -> Run:
    at = T0 + timedelta(minutes=n)
    key = job_key("acme", job)
    return Run(run_id=run_id(key, at), job=key, tenant="acme", state=state, scheduled_at=at, due_at=at,
               created_at=at, started_at=at + timedelta(seconds=n % 7),
               spec=JobSpec(name=job, command=["true"], tenant="acme"))


# -- a follower reads only what is new ---------------------------------------------------------------------------


class CountedStreams(MemoryStreams):
    """The streams' twin, counting the bytes of output a reader is given."""

    def __init__(self) -> None:
        super().__init__()
        self.given = 0

    async def read(self, subject: str, *, idle: float,
                   after: int = 0) -> AsyncGenerator[tuple[MemoryMessage, int] | None, None]:
        async for item in super().read(subject, idle=idle, after=after):
            if item is not None:
                self.given += len(item[0].data)
            yield item


class InProcess(Client):
    """A tenant's SDK client answered by the api's Runs verbs in this process."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(rpc=MemoryRpc(), tenant="acme")
        self.runs_noun = Runs(ctx)

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        handler = getattr(self.runs_noun, verb.split(".", 1)[1])
        return msgspec.to_builtins(await handler(Call(msgspec.json.encode(payload or {}), "acme")))


async def test_a_log_follower_reads_each_byte_of_output_once_however_many_polls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_client, "LOG_POLL_SECONDS", 0.01)
    ctx = twin_context()
    streams = CountedStreams()
    streams.add(s.STREAM_LOGS, [s.LOGS_ALL])
    ctx.streams = streams
    await ctx.runs.put(RUN, _run())
    chunks = [bytes([65 + i]) * 20_000 + b"\n" for i in range(5)]
    follower = InProcess(ctx).follow_logs(RUN, through_api=True)
    got: list[bytes] = []
    for chunk in chunks:  # a chunk written, then followed: five polls or more, each finding the new one
        streams.store(s.logs_subject(RUN, "agent-1"), chunk, {s.HDR_LOG_STREAM: "stdout"})
        got.append(await anext(follower))
    await ctx.runs.put(RUN, _run(RunState.SUCCEEDED))
    got += [chunk async for chunk in follower]
    assert b"".join(got) == b"".join(chunks)
    # Each byte was read from the stream once: not the whole output again on every poll (5 + 4 + 3 + 2 + 1 times)
    assert streams.given == sum(map(len, chunks)), streams.given


async def test_a_read_resumes_after_the_position_it_was_given_and_says_where_it_stopped() -> None:
    ctx = twin_context()
    ctx.streams.add(s.STREAM_LOGS, [s.LOGS_ALL])  # type: ignore[attr-defined]
    await ctx.runs.put(RUN, _run())
    store = ctx.streams.store  # type: ignore[attr-defined]
    seqs = [store(s.logs_subject(RUN, "a1"), f"line {i}\n".encode(), None) for i in range(4)]
    runs = Runs(ctx)

    async def logs(**request: Any) -> dict[str, Any]:
        reply = await runs.logs(Call(msgspec.json.encode({"run_id": RUN, **request}), "acme"))
        return msgspec.to_builtins(reply)  # type: ignore[no-any-return]

    first = await logs(limit_bytes=14)  # two whole lines fit
    assert (first["output"], first["position"], first["complete"]) == ("line 0\nline 1\n", seqs[1], False)
    rest = await logs(after=first["position"])
    assert (rest["output"], rest["position"]) == ("line 2\nline 3\n", seqs[3])
    assert (await logs(after=rest["position"]))["output"] == "" and (await logs(after=seqs[3]))["position"] == seqs[3]
    assert (await logs(limit_bytes=1))["output"] == "line 0\n"  # at least one whole chunk
    end = store(s.logs_subject(RUN, "a1"), b"", {s.HDR_LOG_END: "1"})
    done = await logs(after=seqs[3])
    assert (done["output"], done["position"], done["complete"]) == ("", end, True)


# -- at most so many followers per token --------------------------------------------------------------------------


class Endless(Client):
    """An API whose run is running for ever, its output one line and then nothing more."""

    def __init__(self, tenant: str | None) -> None:
        super().__init__(rpc=MemoryRpc(), tenant=tenant)

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        if verb == "runs.get":
            return msgspec.to_builtins(_run())
        raise api_error(ErrorBody(code="not_found", message=f"{verb}: not here"))

    async def follow_logs(self, run_id: str, *, through_api: bool = False) -> AsyncIterator[bytes]:
        yield b"started\n"
        await asyncio.Event().wait()


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def _serving(app: Litestar) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    server = _Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_for(lambda: server.started, 10, what="the gateway to listen")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@pytest.mark.timeout(60)
async def test_a_token_has_at_most_so_many_log_followers_open_and_one_more_is_refused_naming_the_limit() -> None:
    token, record = issue("acme", "test", T0)
    other_token, other = issue("acme", "other", T0)
    tokens: dict[str, TokenRecord] = {record.token_id: record, other.token_id: other}
    gate = Gate(lookup=tokens.get, client=Endless, ready=lambda: None, followers=Followers(limit=3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(gate)
    url = f"/api/v1/runs/{RUN}/logs"
    async with _serving(app) as base, contextlib.AsyncExitStack() as held:
        http = await held.enter_async_context(httpx.AsyncClient(base_url=base, timeout=10,
                                                                headers={"Authorization": f"Bearer {token}"}))
        opened = [await held.enter_async_context(http.stream("GET", url, params={"follow": "true"}))
                  for _ in range(2)]
        browser = await held.enter_async_context(httpx.AsyncClient(base_url=base, timeout=10))
        login = await browser.post("/ui/login", data={"token": token}, follow_redirects=False)
        assert login.status_code == 303
        live = await held.enter_async_context(browser.stream("GET", f"/ui/runs/{RUN}/log"))  # the dashboard's
        assert [r.status_code for r in (*opened, live)] == [200, 200, 200]

        refused = await http.get(url, params={"follow": "true"})
        assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
        problem = refused.json()
        assert (problem["code"], problem["field"], problem["value"]) == ("rate_limited", "follow", "true")
        assert "at most 3 log streams may be open at once per token (JETCRON_HTTP_LOG_FOLLOWERS)" in problem["detail"]
        assert (await browser.get(f"/ui/runs/{RUN}/log")).status_code == 429
        # Reading the output without following is not a stream; another token has its own
        assert (await http.get(url)).status_code != 429
        async with httpx.AsyncClient(base_url=base, timeout=10,
                                     headers={"Authorization": f"Bearer {other_token}"}) as another, \
                another.stream("GET", url, params={"follow": "true"}) as theirs:
            assert theirs.status_code == 200

        await opened[0].aclose()  # a follower that goes gives its place back

        async def place() -> bool:
            async with http.stream("GET", url, params={"follow": "true"}) as again:
                return again.status_code == 200

        await wait_for(place, 10, what="the closed follower's place")
        assert gate.followers.open == {record.token_id: 3}
        for response in (*opened[1:], live):
            await response.aclose()
        await wait_for(lambda: not gate.followers.open, 10, what="every follower given back")


# -- the overview -------------------------------------------------------------------------------------------------


class Counted(Client):
    """An API with `jobs` jobs of 30 runs each, counting the calls a page makes."""

    def __init__(self, tenant: str | None, jobs: int, calls: list[str]) -> None:
        super().__init__(rpc=MemoryRpc(), tenant=tenant)
        self.jobs_count, self.calls = jobs, calls

    async def call(self, verb: str, payload: dict[str, Any] | None = None) -> Any:
        self.calls.append(verb)
        payload = payload or {}
        if verb == "jobs.list":
            names = [f"job{i:04d}" for i in range(min(self.jobs_count, payload.get("limit", 100)))]
            records = [JobRecord(spec=JobSpec(name=n, command=["true"], tenant="acme"), created_at=T0,
                                 updated_at=T0) for n in names]
            return msgspec.to_builtins(Page(items=records, next_cursor="x" if self.jobs_count > len(names) else None))
        if verb == "runs.list":
            if payload.get("job"):
                return msgspec.to_builtins(Page(items=[_run(RunState.SUCCEEDED, n, payload["job"])
                                                       for n in range(30)]))
            state = RunState(payload["state"])
            return msgspec.to_builtins(Page(items=[_run(state, n) for n in range(5)]))
        if verb == "dlq.list":
            return msgspec.to_builtins(Page[Run](items=[]))
        if verb == "runs.finished":
            return msgspec.to_builtins(FinishedRuns(since=T0, items=[]))
        raise api_error(ErrorBody(code="forbidden", message=f"{verb}: the admin's"))


@pytest.mark.parametrize("jobs", [1, 200, 5000])
def test_the_overview_is_a_fixed_handful_of_api_calls_however_many_jobs(jobs: int) -> None:
    token, record = issue("acme", "test", T0)
    calls: list[str] = []
    gate = Gate(lookup={record.token_id: record}.get, client=lambda tenant: Counted(tenant, jobs, calls),
                ready=lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(gate, sessions=Sessions(secure="never"))  # the test client is no loopback peer
    with TestClient(app) as http:
        assert http.post("/ui/login", data={"token": token}, follow_redirects=False).status_code == 303
        page = http.get("/ui")
    assert page.status_code == 200, page.text
    # one page of jobs, the five active states, the dead letters, the finished runs per minute
    assert sorted(calls) == sorted(["jobs.list", "dlq.list", "runs.finished", *["runs.list"] * 5]), calls
    assert ("200+" if jobs > 200 else str(min(jobs, 200))) in page.text
    assert "of the 5 runs running now" in page.text
