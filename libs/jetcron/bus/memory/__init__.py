"""In-memory twins of the bus's ports, for tests that need no server: they keep the contract that
tests/contract checks against both them and a real nats-server (revisions, conflicts, delete markers, watch
order, redelivery), and nothing more. Never used by a running service."""

from __future__ import annotations

from jetcron.bus.memory._leases import MemoryLeaseLog
from jetcron.bus.memory._match import subject_matches
from jetcron.bus.memory._publisher import MemoryPublisher, Published
from jetcron.bus.memory._queue import MemoryConsumers, MemoryDelivery, MemoryMessage, MemoryPosition, MemoryQueue
from jetcron.bus.memory._records import BeforeWrite, MemoryBuckets, MemoryRecords
from jetcron.bus.memory._rpc import MemoryRpc
from jetcron.bus.memory._streams import MemoryStreams

__all__ = [
    "BeforeWrite", "MemoryBuckets", "MemoryConsumers", "MemoryDelivery", "MemoryLeaseLog", "MemoryMessage",
    "MemoryPosition", "MemoryPublisher", "MemoryQueue", "MemoryRecords", "MemoryRpc", "MemoryStreams", "Published",
    "subject_matches",
]
