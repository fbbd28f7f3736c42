"""The fire marks of the shards this replica holds (jetcron.core.timing.fire_marks), kept in the cursors bucket:
moved on to what has fired, and noted as any replica writes them."""

from __future__ import annotations

import msgspec

from jetcron.core.errors import JetcronError, NotFound, WriteConflict
from jetcron.core.timing.fire_marks import covers, mark_key
from jetcron.core.timing.herds import Herds
from jetcron.wire.messages import Cursor
from jetcron_services.trigger.ports import MarkKeeperPorts
from jetcron_services.trigger.shards import ShardOwner
from jetcron_services.trigger.warm import Warm


class MarkKeeper:
    """Writes the marks of the shards `owner` holds, and lets go of the jobs a mark covers (they have fired)."""

    def __init__(self, ctx: MarkKeeperPorts, warm: Warm, owner: ShardOwner, herds: Herds) -> None:
        self.ctx = ctx
        self.warm = warm
        self.owner = owner
        self.herds = herds

    def noted(self, shard: int, mark: int) -> None:
        """A shard's mark read or written: the jobs it covers leave the warm state and their herds."""
        for name in self.warm.mark_noted(shard, mark):
            self.herds.leave(name)

    async def write(self) -> None:
        """Move the fire mark of each shard we hold on to what has fired (jetcron.core.timing.fire_marks)."""
        for shard in sorted(self.owner.owned):
            mark = self.warm.marks.advance(shard)
            if mark is None:
                continue
            try:
                await self._raise(shard, mark)
            except JetcronError as exc:
                self.ctx.log.warning("fire mark not written; trying again", shard=shard, error=str(exc))

    async def _raise(self, shard: int, mark: int) -> None:
        """Raise the shard's mark to `mark`, revision-checked; never lower it (a replica that held the shard
        before may have written a higher one: each is true of what it saw)."""
        key = mark_key(shard)

        def decide(current: Cursor) -> Cursor | None:
            return None if covers(current.fired_through, mark) else msgspec.structs.replace(current, fired_through=mark)

        try:
            await self.ctx.cursors.change(key, decide)
        except NotFound:
            try:
                await self.ctx.cursors.create(key, Cursor(job=key, fired_through=mark))
            except WriteConflict:
                return  # written meanwhile by another replica: the next round raises it
        self.noted(shard, mark)
