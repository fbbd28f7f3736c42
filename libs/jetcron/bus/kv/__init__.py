"""Typed KV stores: revision-checked writes, server error codes translated once into jetcron errors."""

from __future__ import annotations

from jetcron.bus.kv._errors import NO_MESSAGE, WRONG_LAST, translate
from jetcron.bus.kv._store import ServerBuckets, Store
from jetcron.bus.kv._stream import DROP_TIMEOUT, bind, drop_subscription, read_value, scan_keys, stored_size, value_of
from jetcron.bus.kv._watch import WATCH_BATCH, WatchPosition

__all__ = [
    "DROP_TIMEOUT", "NO_MESSAGE", "WATCH_BATCH", "WRONG_LAST", "ServerBuckets", "Store", "WatchPosition", "bind",
    "drop_subscription", "read_value", "scan_keys", "stored_size", "translate", "value_of",
]
