"""The checked-in JSON Schemas match the models; `make schemas` regenerates them."""

from __future__ import annotations

from pathlib import Path

from jetcron.wire.schema import render

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def test_checked_in_schemas_are_current() -> None:
    expected = render()
    stale = [name for name, text in expected.items()
             if not (SCHEMAS / name).exists() or (SCHEMAS / name).read_text() != text]
    assert not stale, f"schemas out of date: {stale}; run `make schemas` and commit"


def test_jobspec_schema_forbids_unknown_fields() -> None:
    import json

    schema = json.loads(render()["JobSpec.json"])
    assert schema["$defs"]["JobSpec"]["additionalProperties"] is False
    assert set(schema["$defs"]["JobSpec"]["required"]) == {"name", "command"}


def test_no_stale_schema_file_is_left_behind() -> None:
    expected = set(render())
    present = {str(p.relative_to(SCHEMAS)) for p in SCHEMAS.rglob("*.json")}
    assert present == expected, f"remove {sorted(present - expected)}; add {sorted(expected - present)}"


def test_every_verb_the_api_serves_has_a_request_and_a_reply_schema() -> None:
    import json

    from jetcron.wire.verbs import VERBS

    rendered = render()
    document = json.loads(rendered["asyncapi.json"])
    for verb, spec in VERBS.items():
        request = json.loads(rendered[f"api/{verb}.request.json"])
        assert request["$defs"][spec.request.__name__]["additionalProperties"] is False
        cid = verb.replace(".", "_")
        address = document["channels"][f"admin_{cid}"]["address"]
        assert address == f"jc.admin.{verb}"
        if not spec.admin:
            assert document["channels"][cid]["address"] == f"jc.api.{{tenant}}.{verb}"
    assert document["asyncapi"] == "3.0.0"
    assert document["channels"]["submit"]["address"] == "jc.submit.{tenant}"
    assert {"RunStarted", "RunFinished", "RunHandedBack"} <= set(document["channels"]["event"]["messages"])
    # every $ref resolves inside the document
    text = rendered["asyncapi.json"]
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/')[1:]}:
        node = document
        for key in ref.split("/"):
            assert key in node, ref
            node = node[key]
