"""One error hierarchy: every exception class jetcron defines is jetcron.core.errors' or a documented subclass of one of
its classes, each code is declared once, and the API's replies, the SDK's classes and the HTTP statuses follow from
it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import pytest

import jetcron
import jetcron_services
from jetcron.core import errors
from jetcron.core.errors import (
    CODES,
    Conflict,
    Forbidden,
    IllegalTransition,
    Internal,
    InvalidSpec,
    JetcronError,
    NotFound,
    RateLimited,
    Unauthorized,
    Unavailable,
    WriteConflict,
)
from jetcron.sdk import errors as sdk
from jetcron.wire.api import ErrorBody, error_reply
from jetcron_services.gateway.problems import status_of

ALLOWED: dict[str, str] = {
    "jetcron_services.agent.host.scratch.NoRoom":
        "the agent's own start failure (its attempt ends start_failed); it needs no foreign base and is to extend a "
        "core class, then this entry goes",
}
"""Exception classes of jetcron's that are not JetcronErrors, each with the reason (a foreign base it must have)."""


def _modules() -> Iterator[str]:
    for package in (jetcron, jetcron_services):
        for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if found.name.rsplit(".", 1)[-1] != "__main__":  # a service's __main__ serves as it is imported
                yield found.name


def _classes_in(owner: object, module: str) -> Iterator[type[BaseException]]:
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module and value is not owner:
            if issubclass(value, BaseException):
                yield value
            yield from _classes_in(value, module)


def _exception_classes() -> list[type[BaseException]]:
    found: dict[type[BaseException], None] = {}
    for name in _modules():
        for cls in _classes_in(importlib.import_module(name), name):
            found[cls] = None
    return list(found)


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def outsiders(classes: list[type[BaseException]]) -> list[str]:
    """The classes that are neither in the hierarchy nor allowed out of it."""
    return sorted(_name(c) for c in classes if not issubclass(c, JetcronError) and _name(c) not in ALLOWED)


CLASSES = _exception_classes()
ELSEWHERE = [c for c in CLASSES if issubclass(c, JetcronError) and c.__module__ != errors.__name__]


def test_the_walk_finds_the_classes_of_every_layer() -> None:
    names = {_name(c) for c in CLASSES}
    assert {"jetcron.core.errors.NotFound", "jetcron.bus.consume.ConsumerGone", "jetcron.sdk.errors.NotFoundError",
            "jetcron_services.gateway.gate.HttpProblem", "jetcron_services.gateway.ui.session.CsrfRefused",
            "jetcron_services.notifier.targets.Unsafe"} <= names


def test_every_exception_class_is_in_the_hierarchy() -> None:
    assert outsiders(CLASSES) == [], "derive it from a class of jetcron.core.errors (or allow it here, saying why)"


def test_the_check_sees_an_exception_outside_the_hierarchy() -> None:
    class Stray(Exception):
        pass

    class Kept(Conflict):
        pass

    assert outsiders([Stray, Kept]) == [_name(Stray)]


def test_an_allowed_class_is_still_outside_the_hierarchy() -> None:
    stale = [_name(c) for c in CLASSES if _name(c) in ALLOWED and issubclass(c, JetcronError)]
    assert stale == [], "in the hierarchy now: take it off ALLOWED"


@pytest.mark.parametrize("cls", ELSEWHERE, ids=_name)
def test_a_class_outside_core_errors_says_what_it_is_and_keeps_a_code_of_core(cls: type[JetcronError]) -> None:
    assert (cls.__doc__ or "").strip(), f"{_name(cls)}: say what it is and why it lives there"
    # Every code is core's: the API's replies, the SDK's classes and the HTTP statuses are looked up from CODES.
    assert "code" not in vars(cls), (f"{_name(cls)} declares code {vars(cls)['code']!r}: declare it in "
                                     "jetcron.core.errors")
    assert "http_status" not in vars(cls), f"{_name(cls)}: its status is its core class's"


def test_each_code_is_declared_by_one_class_of_core() -> None:
    declaring = [c for c in vars(errors).values() if inspect.isclass(c) and issubclass(c, JetcronError)
                 and "code" in vars(c)]
    assert sorted(c.code for c in declaring) == sorted(CODES)
    assert all(CODES[c.code] is c for c in declaring)
    assert errors.by_code("not_found") is NotFound and errors.by_code("no such code") is JetcronError


@pytest.mark.parametrize(("code", "retryable", "status"), [
    ("invalid", False, 422), ("not_found", False, 404), ("conflict", False, 409), ("conflict", True, 409),
    ("write_conflict", False, 409), ("illegal_transition", False, 409), ("stale", False, 409),
    ("forbidden", False, 403), ("unauthorized", False, 401), ("unavailable", True, 503),
    ("idempotency_full", True, 503), ("storage_full", True, 503), ("rate_limited", True, 429),
    ("internal", True, 503), ("internal", False, 500), ("lease_lost", False, 500), ("misconfigured", False, 500),
    ("unsafe_server", False, 500), ("untrusted", False, 500), ("error", False, 500), ("no such code", True, 503)])
def test_each_code_has_the_http_status_of_its_class(code: str, retryable: bool, status: int) -> None:
    assert status_of(code, retryable) == status


@pytest.mark.parametrize(("public", "core"), [
    (sdk.InvalidError, InvalidSpec), (sdk.NotFoundError, NotFound), (sdk.ConflictError, Conflict),
    (sdk.ForbiddenError, Forbidden), (sdk.UnauthorizedError, Unauthorized), (sdk.UnavailableError, Unavailable),
    (sdk.RateLimitedError, RateLimited), (sdk.IllegalTransitionError, IllegalTransition),
    (sdk.InternalError, Internal)], ids=lambda c: c.__name__)
def test_the_sdk_classes_extend_the_core_class_of_their_code(public: type[sdk.ApiError], core: type) -> None:
    assert issubclass(public, sdk.ApiError) and issubclass(public, core)


RAISED_AS: dict[str, type[sdk.ApiError]] = {
    "invalid": sdk.InvalidError, "not_found": sdk.NotFoundError, "conflict": sdk.ConflictError,
    "write_conflict": sdk.ConflictError, "forbidden": sdk.ForbiddenError, "unauthorized": sdk.UnauthorizedError,
    "unavailable": sdk.UnavailableError, "idempotency_full": sdk.UnavailableError, "storage_full": sdk.UnavailableError,
    "illegal_transition": sdk.IllegalTransitionError, "stale": sdk.IllegalTransitionError,
    "internal": sdk.InternalError, "rate_limited": sdk.RateLimitedError, "error": sdk.ApiError,
    "lease_lost": sdk.ApiError, "misconfigured": sdk.ApiError, "unsafe_server": sdk.ApiError, "untrusted": sdk.ApiError,
}
"""A code is raised as the SDK class made for its core class, or for that class's nearest parent with one."""


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_reply_code_is_raised_as_the_sdk_class_of_its_core_class(code: str) -> None:
    raised = sdk.api_error(ErrorBody(code=code, message=f"{code}: as the api said it", retryable=True))
    assert type(raised) is RAISED_AS[code]
    assert isinstance(raised, CODES[code]) or CODES[code] not in sdk._MADE_FOR
    assert (str(raised), raised.code, raised.retryable) == (f"{code}: as the api said it", code, True)


def test_a_reply_keeps_what_the_sdk_error_carries() -> None:
    """An SDK error is its code's class: `except Conflict` catches a write_conflict, and its fields are the reply's."""
    raised = sdk.api_error(ErrorBody(code="write_conflict", message="job 'j' changed", field="version", value="3"))
    assert type(raised) is sdk.ConflictError and not isinstance(raised, WriteConflict)
    with pytest.raises(Conflict, match=r"^job 'j' changed$"):
        raise raised
    invalid = sdk.api_error(ErrorBody(code="invalid", message="cpu: must be positive (got -1)", field="cpu",
                                      value="-1"))
    assert (invalid.field, invalid.value) == ("cpu", "-1")
    reply = error_reply(invalid).error
    assert reply is not None
    assert (reply.code, reply.message, reply.field, reply.value) == ("invalid", "cpu: must be positive (got -1)",
                                                                     "cpu", "-1")
    assert sdk.api_error(ErrorBody(code="a code of a newer api", message="m")).__class__ is sdk.ApiError
