"""The limits of a stream that exists, brought up to the ones asked for in place, never below what it holds."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import APIError, BadRequestError

_NO_STORAGE = 10047  # "insufficient storage resources available": max_bytes beyond the server's store

_LIMITS = ("max_bytes", "max_msgs", "max_age", "max_msg_size", "max_msgs_per_subject", "allow_msg_ttl",
           "description", "discard", "duplicate_window", "max_consumers")
"""What ensure_topology keeps current on a stream that exists: its limits and what they mean. Retention and
storage cannot change in place; subjects and replicas are the operator's."""
BUCKET_LIMITS = ("max_bytes", "max_age", "max_msg_size", "max_msgs_per_subject", "allow_msg_ttl", "description",
                 "subject_delete_marker_ttl", "allow_direct")
"""The same for a bucket's stream (the rest of it is nats-py's)."""
_SIZES = (("max_bytes", "bytes"), ("max_msgs", "messages"))


@dataclass(frozen=True)
class Note:
    """A limit ensure_topology changed in place, or left as it was (`refused`) and why."""

    text: str
    refused: bool = False


def upgrade(current: StreamConfig, desired: StreamConfig, held_bytes: int, held_msgs: int,
            fields: tuple[str, ...] = _LIMITS) -> tuple[StreamConfig | None, list[Note]]:
    """The config to update an existing stream to (None: nothing to change) and a line per change or refusal.

    A size limit is never set below what the stream holds: the server would make room by removing its oldest
    messages, which for a queue or a bucket of live records is data jetcron still needs. Such a limit stays as it
    is, and the line says so; shed history first (the run tracker does, near a limit) and start again.
    """
    changes: dict[str, Any] = {}
    notes: list[Note] = []
    held = {"bytes": held_bytes, "messages": held_msgs}
    for field in fields:
        want, have = getattr(desired, field), getattr(current, field)
        if field in ("max_age", "duplicate_window"):
            want, have = float(want or 0), float(have or 0)
        if want is None or want == have:
            continue
        unit = dict(_SIZES).get(field)
        if unit is not None and 0 < want < held[unit]:
            notes.append(Note(f"{current.name}: {field} stays {have}: it holds {held[unit]} {unit}, more than the "
                              f"{want} asked (never shrunk below what it holds)", refused=True))
            continue
        changes[field] = want
        if field != "description":
            notes.append(Note(f"{current.name}: {field} {have} -> {want}"))
    if not changes:
        return None, notes
    return replace(current, **changes), notes


async def update_limits(js: JetStreamContext, desired: StreamConfig, notes: list[Note],
                  fields: tuple[str, ...] = _LIMITS) -> None:
    info = await js.stream_info(desired.name or "")
    config, lines = upgrade(info.config, desired, int(info.state.bytes or 0), int(info.state.messages or 0), fields)
    if config is not None:
        try:
            await js.update_stream(config)
        except BadRequestError as exc:
            # A cluster refuses a few changes in place (a replica count it cannot place): the stream stays usable.
            notes.append(Note(f"{desired.name}: limits not changed ({exc.description})", refused=True))
            return
        except APIError as exc:
            if exc.err_code != _NO_STORAGE:
                raise
            notes.append(Note(f"{desired.name}: limits not changed: the server's JetStream store cannot reserve "
                              f"them ({exc.description}); raise max_file_store or lower the JETCRON_*_MAX_BYTES "
                              "settings", refused=True))
            return
    notes.extend(lines)
