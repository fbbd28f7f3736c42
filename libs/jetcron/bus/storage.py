"""How full each stream and the server's JetStream store are, and a finished run let go early (its record with every
revision of it, no marker, and its output)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from jetcron.bus.connect import live_jsz, monitor_urls
from jetcron.bus.ports import Streams
from jetcron.core.errors import NotFound
from jetcron.wire import subjects as s

SERVER = "server"
"""The usage line of the server's JetStream store as a whole (its max_file_store)."""


class Usage(msgspec.Struct, frozen=True):
    stream: str
    """A stream's name (a bucket's is KV_<bucket>), or SERVER."""
    used: int
    """Bytes it holds (the server's: what its streams hold plus what the others have reserved)."""
    limit: int
    """Its max_bytes (the server's max_file_store); 0: no limit of its own."""
    messages: int = 0
    first_seq: int = 0

    @property
    def ratio(self) -> float:
        """The used share of its limit; 0 without a limit."""
        return self.used / self.limit if self.limit > 0 else 0.0


async def stream_usages(streams: Streams, names: Sequence[str]) -> list[Usage]:
    """Each stream's bytes against its max_bytes; one that does not exist (being made again) is left out."""
    found: list[Usage] = []
    for name in names:
        try:
            state = await streams.state(name)
        except NotFound:
            continue
        found.append(Usage(stream=name, used=state.bytes, limit=state.max_bytes, messages=state.messages,
                           first_seq=state.first_seq))
    return found


async def server_usage(nats_url: str, monitor_url: str | None, streams: Sequence[Usage]) -> Usage | None:
    """The server's JetStream store from a monitor port's /jsz (None when none answers): a stream with its own
    max_bytes reserves all of it, so what is left to the others is the store less the reservations less what the
    streams without a limit hold."""
    live = await live_jsz(monitor_urls(nats_url, monitor_url))
    if live is None:
        return None
    jsz = live[1]
    limit = int(jsz.get("config", {}).get("max_storage") or 0)
    reserved = int(jsz.get("reserved_storage") or 0)
    in_reserved = sum(u.used for u in streams if u.limit > 0)
    used = reserved + max(0, int(jsz.get("storage") or 0) - in_reserved)
    return Usage(stream=SERVER, used=used, limit=limit)


async def remove_run(streams: Streams, run_id: str) -> None:
    """Let go of a finished run's record with every revision of it (no delete marker is left) and of its output."""
    await streams.purge(s.kv_stream(s.BUCKET_RUNS), subject=s.kv_subject(s.BUCKET_RUNS, run_id))
    await streams.purge(s.STREAM_LOGS, subject=s.logs_filter(run_id))
