"""jetcron_services.runtime: on Python 3.11 the agent's loop hears its children's exits through pidfds, not a thread
each."""

from __future__ import annotations

import asyncio
import sys
import threading
import warnings

import pytest

from jetcron_services.runtime import _watch_children_by_pidfd


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 uses pidfds by default and deprecates watchers")
async def test_children_are_reaped_by_the_loop_through_pidfds_with_no_thread_per_child() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        before = asyncio.get_child_watcher()
    try:
        # When the service's loop chooses its watcher
        _watch_children_by_pidfd(asyncio.get_running_loop())
        watcher = asyncio.get_child_watcher()
        assert isinstance(watcher, asyncio.PidfdChildWatcher)

        # Then children still end with their exit codes, and no waiting thread is started for them
        threads = threading.active_count()
        procs = [await asyncio.create_subprocess_exec("sh", "-c", f"exit {code}") for code in (0, 3, 7)]
        assert threading.active_count() == threads
        assert [await asyncio.wait_for(p.wait(), 10) for p in procs] == [0, 3, 7]
    finally:
        asyncio.set_child_watcher(before)
