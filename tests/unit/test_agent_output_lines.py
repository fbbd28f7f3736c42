"""A job's stdout and stderr reach one log: the agent hands each on in whole lines where it can
(services/jetcron_services/agent/host/executor.py), so a line written in pieces is not cut by a line of the other
stream."""

from __future__ import annotations

import asyncio

import pytest
from harness import wait_for

from jetcron_services.agent.host import executor
from jetcron_services.agent.host.executor import Execution, LineGather


def test_bytes_are_handed_on_up_to_the_last_newline_and_the_rest_waits() -> None:
    lines = LineGather(limit=16)
    assert lines.add(b"cat: ") == b"" and lines.held
    assert lines.add(b"denied\nnext ") == b"cat: denied\n"
    assert lines.add(b"one\ntwo\nthr") == b"next one\ntwo\n"
    assert lines.flush() == b"thr" and not lines.held
    assert lines.flush() == b""


def test_a_line_longer_than_the_limit_is_handed_on_without_its_newline() -> None:
    lines = LineGather(limit=8)
    assert lines.add(b"a\n" + b"x" * 7) == b"a\n"
    assert lines.add(b"y") == b"x" * 7 + b"y" and not lines.held


async def run(script: str, flush_seconds: float, monkeypatch: pytest.MonkeyPatch,
              chunks: list[tuple[str, bytes]]) -> Execution:
    monkeypatch.setattr(executor, "FLUSH_SECONDS", flush_seconds)

    async def keep(stream: str, data: bytes) -> None:
        chunks.append((stream, data))

    execution = Execution(["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"}, limits=None, timeout=30,
                          kill_grace=1, on_output=keep)
    assert await execution.start() is None
    return execution


async def test_an_error_line_written_in_pieces_is_not_cut_by_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a program that begins an error line, writes a whole output line, then ends its error line
    chunks: list[tuple[str, bytes]] = []
    script = "printf 'cat: ' >&2; sleep 0.1; echo tried; sleep 0.1; echo denied >&2"
    execution = await run(script, 10.0, monkeypatch, chunks)
    # When it has run
    assert (await execution.wait()).outcome == "succeeded"
    # Then each stream was handed on in whole lines: the error line in one piece (the two streams' order is the
    # event loop's)
    assert sorted(chunks) == [("stderr", b"cat: denied\n"), ("stdout", b"tried\n")]


async def test_a_partial_line_is_handed_on_while_the_program_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a program that writes a prompt without a newline and then waits
    chunks: list[tuple[str, bytes]] = []
    execution = await run("printf 'waiting...'; sleep 30", 0.05, monkeypatch, chunks)
    ended = asyncio.ensure_future(execution.wait())
    # Then the prompt reaches the log while it waits
    await wait_for(lambda: chunks == [("stdout", b"waiting...")], 10, what="the partial line")
    assert not ended.done()
    execution.stop("test over", grace=0.1)
    assert (await ended).reason == "test over"
    assert chunks == [("stdout", b"waiting...")]
