"""The REST contract (jetcron_services.gateway.contract) covers exactly what the gateway serves, declares
what each route reads and answers, is a valid OpenAPI 3.1 document, and docs/rest-api.md's table is made from it."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import schemathesis

from jetcron_services.gateway.app import build_app
from jetcron_services.gateway.contract import OPS, document, reference
from jetcron_services.gateway.gate import API, Gate

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rest-api.md"
OUTSIDE = {f"{API}/openapi.json", f"{API}/docs"}
"""Routes that are not the API itself (the document, its page)."""


def _served() -> set[tuple[str, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(Gate(lookup=lambda _: None, client=lambda _: None, ready=lambda: None))  # type: ignore[arg-type,return-value]
    served = set()
    for route in app.routes:
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        if not path.startswith(API) or path in OUTSIDE:
            continue
        for method in getattr(route, "methods", ()):
            if method not in ("HEAD", "OPTIONS"):
                served.add((method.lower(), path))
    return served


def test_every_route_served_has_its_row_and_every_row_a_route() -> None:
    assert _served() == {(op.method, op.path) for op in OPS}


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.operation_id)
def test_every_path_parameter_is_declared_and_every_route_answers_its_problems(op: Any) -> None:
    named = set(re.findall(r"\{(\w+)\}", op.path))
    assert named == {p.name for p in op.params if p.where == "path"}
    responses = document()["paths"][op.path][op.method]["responses"]
    assert {"401", "503", str(op.status)} <= set(responses)
    for status, response in responses.items():
        if int(status) >= 400:
            assert list(response["content"]) == ["application/problem+json"], status
    if op.path.count("{") and op.method != "put":
        assert "404" in responses


def test_the_document_is_valid_openapi_and_links_to_operations_it_has() -> None:
    doc = document()
    schema = schemathesis.openapi.from_dict(doc)
    assert len(list(schema.get_all_operations())) == len(OPS)
    ids = {op.operation_id for op in OPS}
    for path in doc["paths"].values():
        for operation in path.values():
            for status, response in operation["responses"].items():
                for link in response.get("links", {}).values():
                    assert link["operationId"] in ids, (operation["operationId"], status, link)
    patch = doc["paths"][f"{API}/jobs/{{job_id}}"]["patch"]
    assert "application/merge-patch+json" in patch["requestBody"]["content"]
    assert any(p["name"] == "If-Match" and p["required"] for p in patch["parameters"])
    assert doc["components"]["schemas"]["CreateJob"]["additionalProperties"] is False


def test_the_docs_table_is_made_from_the_contract() -> None:
    text = DOCS.read_text()
    stale = "docs/rest-api.md is stale: python -m jetcron_services.gateway.contract docs/rest-api.md"
    assert reference() in text, stale


def test_options_names_every_method_of_its_path() -> None:
    # (Litestar's own OPTIONS handler kept the methods of the path's first handler only: Allow: OPTIONS, POST on
    # /jobs, which GET also serves)
    from litestar.testing import TestClient

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = build_app(Gate(lookup=lambda _: None, client=lambda _: None, ready=lambda: None))  # type: ignore[arg-type,return-value]
    paths: dict[str, set[str]] = {}
    for op in OPS:
        paths.setdefault(op.path, set()).add(op.method.upper())
    with TestClient(app) as http:
        for path, methods in sorted(paths.items()):
            concrete = re.sub(r"\{\w+\}", "x", path)
            answer = http.options(concrete)
            assert answer.status_code == 204, (path, answer.status_code, answer.text)
            assert set(answer.headers["allow"].split(", ")) == methods | {"OPTIONS"}, path


def test_the_contract_tests_422_leeway_is_exactly_the_operations_with_rules_beyond_their_schema() -> None:
    import tomllib

    from jetcron_services.gateway.contract import SEMANTIC

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "integration" / "schemathesis.toml").read_text())
    [leeway] = [o for o in config["operations"] if "positive_data_acceptance" in o.get("checks", {})]
    assert sorted(leeway["include-operation-id"]) == sorted(SEMANTIC)


def test_the_422_leeway_names_the_fields_of_each_operations_rules_and_no_5xx_is_tolerated() -> None:
    import tomllib

    from jetcron_services.gateway.contract import SEMANTIC, SEMANTIC_FIELDS

    assert sorted(SEMANTIC_FIELDS) == sorted(SEMANTIC) and all(SEMANTIC_FIELDS.values())
    text = (Path(__file__).resolve().parents[1] / "integration" / "schemathesis.toml").read_text()
    config = tomllib.loads(text)

    def statuses(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [s for key, value in node.items() for s in
                    ([str(v) for v in value] if key == "expected-statuses" else statuses(value))]
        return [s for item in node for s in statuses(item)] if isinstance(node, list) else []

    allowed = statuses(config)
    assert allowed and not [s for s in allowed if s.startswith("5")], allowed
    # the defaults of the two checks that would take a 5xx are replaced
    for check in ("positive_data_acceptance", "negative_data_rejection"):
        assert "expected-statuses" in config["checks"][check], check


async def test_every_path_parameter_outside_its_pattern_is_refused_naming_it_before_any_api_call() -> None:
    from rest_twin import gateway, problem_of

    good = {"job_id": "nightly", "run_id": "acme.nightly.20261201T000000000Z", "name": "holidays", "tenant": "acme",
            "delivery_id": "acme.nightly.20261201T000000000Z.dead-0-0"}
    bad = [".01-2", "a..b", "a.b.c", "-x", "x" * 64, "nightly.", " x"]
    async with gateway() as gw:
        for op in OPS:
            for param in re.findall(r"\{(\w+)\}", op.path):
                for value in bad:
                    path = re.sub(r"\{(\w+)\}", lambda m, v=value, p=param: v if m.group(1) == p else good[m.group(1)],
                                  op.path)
                    gw.asked.calls.clear()
                    query = {"job": "nightly"} if op.operation_id == "previewCalendar" else {}
                    answer = await gw.http.request(op.method.upper(), path, json={}, params=query,
                                                   headers=gw.headers(None))
                    status = 422 if op.operation_id == "setTenant" else 404
                    assert answer.status_code == status, (op.operation_id, value, answer.text)
                    problem = problem_of(answer)
                    assert (problem["field"], problem["value"]) == (param, value[:200]), problem
                    assert param in problem["detail"] and repr(value) in problem["detail"], problem
                    assert gw.asked.calls == [], (op.operation_id, value, gw.asked.calls)
        # a token is asked for first: without one, 401 whatever the path
        assert (await gw.http.post("/api/v1/notifications/.01-2/redeliver")).status_code == 401


async def test_a_tenants_token_names_no_other_tenant_in_a_body_and_the_admins_names_any() -> None:
    from rest_twin import gateway, problem_of

    async with gateway() as gw:
        for path, body in (("/api/v1/jobs", {"name": "n", "command": "true"}),
                           ("/api/v1/calendars", {"name": "c", "rules": ["weekends"]})):
            gw.asked.calls.clear()
            refused = await gw.http.post(path, json={**body, "tenant": "globex"}, headers=gw.headers("acme"))
            assert refused.status_code == 403 and gw.asked.calls == [], refused.text
            problem = problem_of(refused)
            assert (problem["code"], problem["field"], problem["value"]) == ("forbidden", "tenant", "globex")
            assert "'acme'" in problem["detail"] and "'globex'" in problem["detail"], problem
            own = await gw.http.post(path, json={**body, "tenant": "acme"}, headers=gw.headers("acme"))
            assert own.status_code == 201, own.text
            theirs = await gw.http.post(path, json={**body, "tenant": "globex"}, headers=gw.headers(None))
            assert theirs.status_code == 201, theirs.text


async def test_a_preview_takes_exactly_one_of_cron_and_every_seconds_as_its_document_says() -> None:
    import jsonschema
    from rest_twin import gateway, problem_of

    (param,) = [p for p in document()["paths"][f"{API}/schedule/preview"]["get"]["parameters"]
                if p["name"] == "schedule"]
    assert (param["style"], param["explode"], param["required"]) == ("form", True, True)
    valid = jsonschema.Draft202012Validator(param["schema"]).is_valid
    async with gateway() as gw:
        for query, ok in (({"cron": "0 3 * * *"}, True), ({"every_seconds": "300"}, True), ({}, False),
                          ({"cron": "0 3 * * *", "every_seconds": "300"}, False)):
            answer = await gw.http.get(f"{API}/schedule/preview", params={"from": "2026-12-01T00:00:00Z", **query},
                                       headers=gw.headers("acme"))
            typed = {k: float(v) if k == "every_seconds" else v for k, v in query.items()}
            assert valid(typed) is ok and (answer.status_code == 200) is ok, (query, answer.text)
            if not ok:
                problem = problem_of(answer)
                assert problem["field"] == "cron" and "exactly one of cron and every_seconds" in problem["detail"]


def test_a_whole_number_written_with_a_fraction_is_an_integer_as_json_schema_says() -> None:
    # JSON Schema's integer is any number without a fraction: 2.0 is one, and the document promises it is taken
    from jetcron_services.gateway.admin import TenantPolicyBody
    from jetcron_services.gateway.gate import HttpProblem, strict_body
    from jetcron_services.gateway.jobs import Backfill

    body = strict_body({"max_gpus": 2.0, "queues": {"batch": {"max_memory_mb": 512.0}}, "weight": 3.0},
                       TenantPolicyBody)
    assert (body.max_gpus, body.queues["batch"].max_memory_mb, body.weight) == (2, 512, 3.0)  # type: ignore[index]
    assert strict_body({"from": "a", "to": "b", "limit": 5.0, "rate": 1.0}, Backfill).limit == 5
    with pytest.raises(HttpProblem) as refused:
        strict_body({"max_gpus": 2.5}, TenantPolicyBody)
    assert (refused.value.body.status, refused.value.body.field) == (422, "max_gpus")
