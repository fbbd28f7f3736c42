"""A create refused as written already whose read finds nothing yet (the read came from a replica behind the write
that refused it: a cluster just made, every replica creating the same key) is a WriteConflict, as any refused
create; and every nats-py error is translated, one it makes without a server code (key not found) included."""

from __future__ import annotations

from typing import Any, cast

import msgspec
import nats.js.errors as jse
import pytest

from jetcron.bus.kv import Store, translate
from jetcron.core.errors import NotFound, WriteConflict


class Layout(msgspec.Struct):
    shards: int


class _Behind:
    """A bucket whose writes say the key exists and whose reads (from a lagging replica) do not find it."""

    async def get(self, key: str) -> Any:
        raise jse.KeyNotFoundError()


async def test_a_create_refused_but_not_found_on_the_replica_read_is_a_write_conflict() -> None:
    store = cast(Store[Layout], Store.__new__(Store))
    store.kv, store.name, store.ttl_of = cast(Any, _Behind()), "jc_cluster", None

    async def refused(*_: object) -> int:
        raise jse.APIError(code=400, err_code=10071, description="wrong last sequence: 1")

    store._write = refused  # type: ignore[method-assign]
    with pytest.raises(WriteConflict, match="create jc_cluster/shards: written by someone else first"):
        await store.create("shards", Layout(shards=16))


def test_a_key_not_found_is_translated_to_not_found_not_a_crash() -> None:
    found = translate(jse.KeyNotFoundError(), "read jc_cluster/shards")
    assert isinstance(found, NotFound)
    assert "read jc_cluster/shards" in str(found)
