"""One SDK connection per CLI invocation, with errors printed the same way everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from jetcron.cli.identity import Target, resolve
from jetcron.cli.output import fail
from jetcron.core.errors import JetcronError
from jetcron.sdk.client import SyncClient


def target(ctx: typer.Context) -> Target:
    obj = ctx.find_root().obj or {}
    found = obj.get("target")
    return found if isinstance(found, Target) else resolve(obj.get("nats"), None, None)


@contextmanager
def client(ctx: typer.Context) -> Iterator[SyncClient]:
    where = target(ctx)
    try:
        c = SyncClient(where.url, identity=where.identity)
    except JetcronError as exc:
        fail(exc)
    except Exception as exc:
        fail(RuntimeError(f"cannot connect to NATS at {where.url}: {exc}"))
    try:
        yield c
    except JetcronError as exc:
        fail(exc)
    finally:
        c.close()
