"""One SDK connection per CLI invocation, with errors printed the same way everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from jetcron.cli.output import fail
from jetcron.core.errors import JetcronError
from jetcron.sdk.client import SyncClient


@contextmanager
def client(ctx: typer.Context) -> Iterator[SyncClient]:
    url = (ctx.find_root().obj or {}).get("nats")
    try:
        c = SyncClient(url)
    except Exception as exc:
        fail(RuntimeError(f"cannot connect to NATS at {url or 'nats://127.0.0.1:4222'}: {exc}"))
    try:
        yield c
    except JetcronError as exc:
        fail(exc)
    finally:
        c.close()
