"""One idempotent bootstrap of every stream, KV bucket and durable consumer, with explicit limits."""

from __future__ import annotations

from jetcron.bus.topology._check import missing_parts, stream_names_on_server
from jetcron.bus.topology._ensure import (
    FENCED_BUCKETS,
    SETUP_DEADLINE,
    bucket_stream,
    ensure_durable,
    ensure_topology,
    fenced_stream,
)
from jetcron.bus.topology._layout import agent_durable, bucket_configs, consumer_configs, stream_configs, stream_names
from jetcron.bus.topology._limits import DAY, DUPLICATE_WINDOW, HOUR, MAX_MSG, GiB, Limits, MiB
from jetcron.bus.topology._upgrade import Note, upgrade

__all__ = [
    "DAY", "DUPLICATE_WINDOW", "FENCED_BUCKETS", "HOUR", "MAX_MSG", "SETUP_DEADLINE", "GiB", "Limits", "MiB", "Note",
    "agent_durable", "bucket_configs", "bucket_stream", "consumer_configs", "ensure_durable", "ensure_topology",
    "fenced_stream", "missing_parts", "stream_configs", "stream_names", "stream_names_on_server", "upgrade",
]
