"""A stored secret is sealed for its tenant and name: its ciphertext copied or moved under another tenant's or
another name's key does not decrypt, and says so naming both; a value stored as a bare Fernet token (unbound) is
still read; a value under another key, or altered, is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from jetcron.auth.keyfile import ensure_key_file
from jetcron.bus.memory import MemoryPublisher, MemoryStreams
from jetcron.core.errors import Misconfigured
from jetcron.ops.secrets import SEALED, Secrets
from jetcron.wire import subjects as s

STREAM = s.kv_stream(s.BUCKET_SECRETS)


def store(key_file: Path) -> tuple[Secrets, MemoryStreams]:
    streams = MemoryStreams()
    streams.add(STREAM, [s.kv_subject(s.BUCKET_SECRETS, ">")], per_subject=1)
    return Secrets(MemoryPublisher(streams), streams, str(key_file)), streams


async def stored(streams: MemoryStreams, tenant: str, name: str) -> bytes:
    found = await streams.last(STREAM, s.kv_subject(s.BUCKET_SECRETS, f"{tenant}.{name}"))
    assert found is not None
    return found.data


def put_raw(streams: MemoryStreams, tenant: str, name: str, data: bytes) -> None:
    """What a writer of the bucket without the key can do: put any bytes under any key."""
    streams.store(s.kv_subject(s.BUCKET_SECRETS, f"{tenant}.{name}"), data)


async def test_a_ciphertext_moved_to_another_tenant_or_name_does_not_decrypt(tmp_path: Path) -> None:
    secrets, streams = store(ensure_key_file(tmp_path / "secrets.key"))
    await secrets.put("acme", "API_TOKEN", "acme-s3cret")
    sealed = await stored(streams, "acme", "API_TOKEN")
    assert sealed.startswith(SEALED) and b"acme-s3cret" not in sealed
    assert await secrets.get("acme", "API_TOKEN") == "acme-s3cret"
    # Copied under another tenant's key of the same name, and under another name of the same tenant
    put_raw(streams, "beta", "API_TOKEN", sealed)
    put_raw(streams, "acme", "DB_PASSWORD", sealed)
    with pytest.raises(Misconfigured, match=r"secret API_TOKEN of tenant beta does not decrypt: .*for another tenant"):
        await secrets.get("beta", "API_TOKEN")
    with pytest.raises(Misconfigured, match="secret DB_PASSWORD of tenant acme does not decrypt"):
        await secrets.get("acme", "DB_PASSWORD")
    # The original still opens where it was sealed
    assert await secrets.get("acme", "API_TOKEN") == "acme-s3cret"


async def test_a_value_stored_as_a_bare_fernet_token_is_still_read_and_sealed_when_set_again(tmp_path: Path) -> None:
    key_file = ensure_key_file(tmp_path / "secrets.key")
    secrets, streams = store(key_file)
    put_raw(streams, "acme", "API_TOKEN", Fernet(key_file.read_bytes().strip()).encrypt(b"from-before"))
    assert await secrets.get("acme", "API_TOKEN") == "from-before"
    await secrets.put("acme", "API_TOKEN", "from-before")
    assert (await stored(streams, "acme", "API_TOKEN")).startswith(SEALED)
    assert await secrets.get("acme", "API_TOKEN") == "from-before"


async def test_a_value_sealed_under_another_key_or_altered_is_refused(tmp_path: Path) -> None:
    mine, streams = store(ensure_key_file(tmp_path / "mine.key"))
    theirs, their_streams = store(ensure_key_file(tmp_path / "theirs.key"))
    await theirs.put("acme", "API_TOKEN", "v")
    put_raw(streams, "acme", "API_TOKEN", await stored(their_streams, "acme", "API_TOKEN"))
    with pytest.raises(Misconfigured, match="secret API_TOKEN of tenant acme does not decrypt: it was sealed under "
                                            "another key"):
        await mine.get("acme", "API_TOKEN")
    await mine.put("acme", "API_TOKEN", "v")
    sealed = await stored(streams, "acme", "API_TOKEN")
    put_raw(streams, "acme", "API_TOKEN", sealed[:-2] + (b"AA" if sealed[-2:] != b"AA" else b"BB"))
    with pytest.raises(Misconfigured, match="secret API_TOKEN of tenant acme does not decrypt"):
        await mine.get("acme", "API_TOKEN")
