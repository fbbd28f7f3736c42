"""The REST contract (services/jetcron_services/gateway/contract.py) covers exactly what the gateway serves, declares
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
