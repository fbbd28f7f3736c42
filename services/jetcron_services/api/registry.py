"""Which handler answers each API verb. A noun's class (Jobs, Runs, Dlq, ...) marks its verbs' methods with
`@verb`: the verb `<noun>.<method>` is answered by that method, so a verb cannot hang off another noun's class.
`served()` collects them from the nouns the api serves and checks them against the contract (jetcron.wire.verbs): the
api refuses to start when the two differ. An admin verb (its row's `admin`) is refused to a tenant here, before its
handler reads the body."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar, TypeVar

from jetcron.core.errors import Misconfigured
from jetcron.wire.verbs import VERBS
from jetcron_services.api.call import Call, admin_only

Handler = Callable[[Call], Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
_MARK = "_jetcron_api_verb"


def verb(method: F) -> F:
    """The method answers the verb `<its class's noun>.<its name>`."""
    setattr(method, _MARK, True)
    return method


class Noun:
    """The verbs on one kind of thing: `noun` is the first part of their names (`jobs` for jobs.create)."""

    noun: ClassVar[str]


def verbs_of(kind: type[Noun]) -> dict[str, str]:
    """The verbs a noun's class answers: verb name -> method name."""
    return {f"{kind.noun}.{name}": name for name, member in inspect.getmembers(kind, inspect.isfunction)
            if getattr(member, _MARK, False)}


def _admin(name: str, handler: Handler) -> Handler:
    async def guarded(call: Call) -> Any:
        admin_only(call, name)
        return await handler(call)

    return guarded


def served(nouns: Iterable[Noun]) -> dict[str, Handler]:
    """Every verb's handler, from the nouns' marked methods, in the contract's order; exactly the contract's verbs,
    or Misconfigured."""
    handlers: dict[str, Handler] = {}
    for noun in nouns:
        for name, method in verbs_of(type(noun)).items():
            if name in handlers:
                raise Misconfigured(f"verb {name} is answered by two handlers")
            handlers[name] = getattr(noun, method)
    if set(handlers) != set(VERBS):
        raise Misconfigured(f"verbs served and the contract differ: {sorted(set(handlers) ^ set(VERBS))}")
    return {name: _admin(name, handlers[name]) if row.admin else handlers[name] for name, row in VERBS.items()}
