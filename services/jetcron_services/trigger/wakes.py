"""When each job in the trigger's due index wakes next: its occurrence's due time less the staging horizon, earlier
when that second is crowded (jetcron.core.timing.herds); a job of a shard another replica holds, when its holder's
cursor says."""

from __future__ import annotations

from datetime import datetime, timedelta

from jetcron.config import Settings
from jetcron.core.timing import triggers
from jetcron.core.timing.herds import Herds
from jetcron_services.trigger.shards import ShardOwner
from jetcron_services.trigger.warm import Warm


class Wakes:
    """Sets each job's wake in `warm`'s due index, and holds the herds its occurrences stand in."""

    def __init__(self, warm: Warm, owner: ShardOwner, settings: Settings) -> None:
        self.warm = warm
        self.owner = owner
        self.settings = settings
        self.herds = Herds(horizon=settings.trigger_horizon, rate=settings.trigger_herd_rate,
                           max_lead=settings.trigger_herd_max_lead)

    def park(self, name: str) -> None:
        """A job of a shard another replica holds waits in our index for its next work as its holder's cursor
        says: a takeover then wakes only the jobs that are due, not every job of the shard at once."""
        if name in self.warm.jobs and self.warm.index.shard(name) not in self.owner.owned:
            self.queue(name, self.warm.standby_wake(name, self.settings.trigger_horizon))

    def queue(self, name: str, wake: datetime | None) -> None:
        """Wake `name` for its next occurrence (`wake`: its due time less the staging horizon), earlier when
        that occurrence's second is crowded (jetcron.core.timing.herds)."""
        record = self.warm.jobs.get(name)
        if wake is None or record is None:
            self.herds.leave(name)
            self.warm.index.set(name, wake)
            return
        horizon = triggers.staging_horizon(record.spec, self.settings.trigger_horizon)
        extra = self.herds.enter(name, wake + timedelta(seconds=horizon)) if horizon > 0 else 0.0
        self.warm.index.set(name, wake - timedelta(seconds=extra))
