"""The api's verbs are wired from its nouns' `@verb` methods (services/jetcron_services/api/registry.py), checked
against the contract (libs/jetcron/wire/verbs.py): every verb is answered by its own noun's module, with its row's reply
type, reading its row's request; an admin verb is refused to a tenant from its row; a difference between what is served
and the contract stops the api."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest
from twin_support import twin_context

from jetcron.core.errors import Forbidden, InvalidSpec, Misconfigured
from jetcron.wire.verbs import VERBS
from jetcron_services.api import service
from jetcron_services.api.admission import Admission
from jetcron_services.api.call import Call
from jetcron_services.api.jobs import Jobs
from jetcron_services.api.registry import Handler, Noun, served, verb, verbs_of


def _nouns() -> list[Noun]:
    ctx = twin_context()
    return service.nouns(ctx, Jobs(ctx, Admission(ctx)))


def _methods() -> dict[str, Any]:
    """Each verb's own method (before the registry guards an admin verb)."""
    return {name: getattr(noun, method) for noun in _nouns() for name, method in verbs_of(type(noun)).items()}


def test_the_api_serves_exactly_the_contracts_verbs_in_its_order() -> None:
    assert list(served(_nouns())) == list(VERBS)


@pytest.mark.parametrize("noun", _nouns(), ids=lambda n: n.noun)
def test_each_noun_has_its_own_module_and_its_verbs_are_named_by_it(noun: Noun) -> None:
    assert type(noun).__module__ == f"jetcron_services.api.{noun.noun}"
    assert verbs_of(type(noun)) and all(name.startswith(f"{noun.noun}.") for name in verbs_of(type(noun)))


@pytest.mark.parametrize("name", list(VERBS))
def test_a_verbs_handler_answers_its_rows_reply_type(name: str) -> None:
    assert typing.get_type_hints(_methods()[name])["return"] == VERBS[name].reply


def _fields(kind: type[msgspec.Struct]) -> str:
    return ", ".join(sorted(f.encode_name for f in msgspec.structs.fields(kind)))


@pytest.mark.parametrize("name", list(VERBS))
async def test_a_verbs_handler_reads_its_rows_request(name: str) -> None:
    # An unknown field is refused before anything is read or stored, naming the fields the handler reads.
    handler: Handler = served(_nouns())[name]
    with pytest.raises(InvalidSpec) as refused:
        await handler(Call(b'{"probe": 1}', None))
    assert (refused.value.field, refused.value.problem) == (
        "probe", f"unknown field (expected one of {_fields(VERBS[name].request)})" if _fields(VERBS[name].request)
        else "unknown field (this request takes none)")


@pytest.mark.parametrize("name", list(VERBS))
async def test_an_admin_verb_is_refused_to_a_tenant_before_its_body_is_read(name: str) -> None:
    handler: Handler = served(_nouns())[name]
    if VERBS[name].admin:
        with pytest.raises(Forbidden, match=rf"^{name} is an admin verb: tenant 'acme' may not use it$"):
            await handler(Call(b'{"probe": 1}', "acme"))
    else:
        with pytest.raises(InvalidSpec, match=r"^probe: unknown field"):
            await handler(Call(b'{"probe": 1}', "acme"))


class Extra(Noun):
    noun = "jobs"

    @verb
    async def archive(self, call: Call) -> None:
        pass


def test_a_verb_missing_from_the_served_nouns_stops_the_api_naming_it() -> None:
    without = [n for n in _nouns() if n.noun != "dlq"]
    with pytest.raises(Misconfigured, match=r"differ: \['dlq.list', 'dlq.replay'\]"):
        served(without)


def test_a_verb_the_contract_lacks_stops_the_api_naming_it() -> None:
    with pytest.raises(Misconfigured, match=r"differ: \['jobs.archive'\]"):
        served([*_nouns(), Extra()])


def test_a_verb_answered_twice_stops_the_api() -> None:
    nouns = _nouns()
    with pytest.raises(Misconfigured, match=r"^verb runs\.cancel is answered by two handlers$"):
        served([*nouns, next(n for n in nouns if n.noun == "runs")])
