"""What follows a change of a run's record, one concern per module: `Records` calls each hook, in order, after
every write it makes. A write can be made again (a redelivered event, a new leader), so each hook is idempotent
(message ids, create-only records, counters read as rates).

The notifier is no hook: it reads the committed changes from the runs bucket's own stream (a service of its own,
docs/notifications.md), so a notice owed is never lost between a write and a hook."""

from __future__ import annotations

from typing import Protocol

from jetcron.core.models import Run


def ended(old: Run, new: Run) -> bool:
    """This write ended the run (terminal now, not before)."""
    return new.state.terminal and not old.state.terminal


class RunHook(Protocol):
    async def changed(self, old: Run, new: Run) -> None:
        """`old` became `new` in the runs bucket (already written)."""
