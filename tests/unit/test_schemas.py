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
