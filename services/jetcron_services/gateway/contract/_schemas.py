"""The document's components: msgspec's schemas with the constraints stated, and merge patches of records."""

from __future__ import annotations

from typing import Any

from jetcron_services.gateway.contract._rules import CONSTRAINTS

REF = "#/components/schemas/"
_OF_PROPERTY = ("description", "readOnly")
"""Keywords that say what a property is, whichever branch its value takes: set on the property, not its types."""


def constrain(components: dict[str, Any]) -> None:
    """State CONSTRAINTS in the components: on a property, or on every branch its value may take."""
    for name, fields in CONSTRAINTS.items():
        props = components[name]["properties"]
        for prop, extra in fields.items():
            schema = props[prop]
            extra = dict(extra)
            for keyword in _OF_PROPERTY:
                if keyword in extra:
                    schema[keyword] = extra.pop(keyword)
            branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
            for branch in branches:
                branch.update(extra)


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    branches = schema.get("anyOf", [schema])
    return {"anyOf": branches if any(b.get("type") == "null" for b in branches) else [*branches, {"type": "null"}]}


def _patch_of(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """What a merge patch may hold where the record holds `schema`: a record's object patched in turn (its
    `<Name>Patch`), a map's values nullable (null removes the key), anything else as it is (an array is replaced
    whole). Defaults are the record's, not the patch's: dropped."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(REF)
        target = components[name]
        if target.get("type") == "object" and "properties" in target:
            return {"$ref": patched(components, name)}
        return {"$ref": schema["$ref"]}
    if "anyOf" in schema:
        return {"anyOf": [_patch_of(branch, components) for branch in schema["anyOf"]]}
    out = {k: v for k, v in schema.items() if k != "default"}
    if out.get("type") == "object" and isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _nullable(out["additionalProperties"])
    return out


def patched(components: dict[str, Any], name: str) -> str:
    """The component `<name>Patch` (made once): a merge patch of a `name`, every property optional and nullable
    but those a `name` must have (null would remove them), no other property."""
    patch = f"{name}Patch"
    if patch not in components:
        whole = components[name]
        components[patch] = {}  # taken before its properties are made: a record that holds itself ends here
        components[patch] = {
            "title": patch, "type": "object", "additionalProperties": False,
            "description": f"A JSON merge patch (RFC 7396) of a {name}: any of its properties, null removing one.",
            "properties": {prop: _patch_of(sub, components) if prop in whole.get("required", ())
                           else _nullable(_patch_of(sub, components)) for prop, sub in whole["properties"].items()}}
    return REF + patch
