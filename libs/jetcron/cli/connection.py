"""One SDK connection per CLI invocation, with errors printed the same way everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from jetcron.bus.caller import is_loopback
from jetcron.cli.identity import Target, resolve
from jetcron.cli.output import fail
from jetcron.core.errors import JetcronError, Unavailable
from jetcron.sdk.client import SyncClient


def target(ctx: typer.Context) -> Target:
    obj = ctx.find_root().obj or {}
    found = obj.get("target")
    return found if isinstance(found, Target) else resolve(obj.get("nats"), None, None)


def unreachable(exc: Exception, url: str) -> Exception:
    """A failed connect as the CLI says it: on this machine the likely cause is that no `jetcron up` runs."""
    if not is_loopback(url):
        return exc
    if isinstance(exc, Unavailable):
        return Unavailable(f"{exc}; is `jetcron up` running?")
    return RuntimeError(f"{exc}; is `jetcron up` running?")


@contextmanager
def client(ctx: typer.Context) -> Iterator[SyncClient]:
    where = target(ctx)
    try:
        c = SyncClient(where.url, identity=where.identity)
    except Unavailable as exc:
        fail(unreachable(exc, where.url))
    except JetcronError as exc:
        fail(exc)
    except Exception as exc:
        fail(unreachable(RuntimeError(f"cannot connect to NATS at {where.url}: {exc}"), where.url))
    try:
        yield c
    except JetcronError as exc:
        fail(exc)
    finally:
        c.close()
