"""Run an async context manager from plain synchronous code, on a private event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def in_private_loop(manager: AbstractAsyncContextManager[T]) -> Iterator[tuple[T, asyncio.AbstractEventLoop]]:
    """Enter `manager` on a new loop, yield its value and the loop, and exit it the way `async with` would."""
    loop = asyncio.new_event_loop()
    try:
        value = loop.run_until_complete(manager.__aenter__())
        try:
            yield value, loop
        except BaseException as exc:
            loop.run_until_complete(manager.__aexit__(type(exc), exc, exc.__traceback__))
            raise
        loop.run_until_complete(manager.__aexit__(None, None, None))
    finally:
        loop.close()
