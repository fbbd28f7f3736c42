"""The api's admission figures are read once per second however many submits ask at once."""

from __future__ import annotations

import asyncio

from jetcron_services.api.admission import _Cached


async def test_submits_that_ask_while_a_figure_is_read_share_that_read() -> None:
    cache, reads, release = _Cached(), [], asyncio.Event()

    async def read() -> int:
        reads.append(1)
        await release.wait()
        return 42

    # Given a read in flight, when five more submits ask for the same figure
    asking = [asyncio.create_task(cache.get("depths", read, 0)) for _ in range(6)]
    await asyncio.sleep(0)
    release.set()
    # Then there was one read and every submit got its value; the next ask within the second reads nothing
    assert await asyncio.gather(*asking) == [42] * 6
    assert len(reads) == 1
    assert await cache.get("depths", read, 0) == 42 and len(reads) == 1


async def test_a_failed_read_gives_everyone_waiting_the_last_figure() -> None:
    cache, fail = _Cached(), asyncio.Event()
    assert await cache.get("policy", lambda: _value(7), None) == 7
    cache.values["policy"] = (0.0, 7)  # expired

    async def broken() -> int:
        await fail.wait()
        raise OSError("no leader yet")

    asking = [asyncio.create_task(cache.get("policy", broken, None)) for _ in range(3)]
    await asyncio.sleep(0)
    fail.set()
    assert await asyncio.gather(*asking) == [7, 7, 7]
    assert not cache.reading


async def _value(v: int) -> int:
    return v
