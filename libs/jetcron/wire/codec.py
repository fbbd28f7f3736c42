"""Encoding: msgspec JSON everywhere, with decoders cached per type."""

from __future__ import annotations

import types
import typing
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    return _encoder.encode(value)


@cache
def _decoder(kind: type[Any]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind)


def decode(data: bytes, kind: type[T]) -> T:
    result: T = _decoder(kind).decode(data)  # type: ignore[arg-type]
    return result


def with_defaults(value: Any) -> Any:
    """`value` with every field of each record or message in it, those at their defaults too, ready to encode (a
    record becomes its twin, a struct of the same fields that writes each of them; other structs become dicts).

    Records and messages are encoded without the fields at their defaults (jetcron.core.models.stored_format, a class
    with `stored_compact` set). What people read shows each of them: the API's replies, the CLI, REST, the dashboard.
    And a spec's body hash is taken over every field, so that it stays what it was when specs were stored whole. A
    struct that leaves its defaults out at the doors too (an API reply's envelope, a secret's reference) still
    does."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if isinstance(value, msgspec.Struct):
        if getattr(kind, "stored_compact", False):
            # Its twin encodes every field: converted in msgspec's C code, about 4 µs for a job record against 15
            # walking its fields here (every API reply carries one).
            return msgspec.convert(value, _twin(kind), from_attributes=True)
        out = {}
        for name, key, default in _fields(kind):
            field = getattr(value, name)
            if default is _KEEP or field != default:
                out[key] = with_defaults(field)
        return out
    if kind is list or kind is tuple:
        return [with_defaults(v) for v in value]
    if kind is dict:
        return {k: with_defaults(v) for k, v in value.items()}
    return value


def plain(value: Any) -> Any:
    """`with_defaults(value)` as JSON-ready builtins (datetimes as text): what the CLI prints and REST answers."""
    return msgspec.to_builtins(with_defaults(value))


_LEAVES = frozenset({str, int, float, bool, type(None), datetime})
_KEEP = object()


def _fields(kind: type[msgspec.Struct]) -> tuple[tuple[str, str, Any], ...]:
    """(attribute, encoded name, the default it is left out at, or _KEEP) of each field of a struct type that is
    not of the stored format: left out where its class leaves defaults out (at the doors too)."""
    if (known := _FIELDS.get(kind)) is not None:
        return known
    leaves_out = kind.__struct_config__.omit_defaults
    fields = []
    for f in msgspec.structs.fields(kind):
        default: Any = _KEEP
        if leaves_out and f.default is not msgspec.NODEFAULT:
            default = f.default
        elif leaves_out and f.default_factory is not msgspec.NODEFAULT:
            default = f.default_factory()
        fields.append((f.name, f.encode_name, default))
    _FIELDS[kind] = known = tuple(fields)
    return known


_FIELDS: dict[type[msgspec.Struct], tuple[tuple[str, str, Any], ...]] = {}


def _twin(kind: type[msgspec.Struct]) -> type[msgspec.Struct]:
    """A struct type with `kind`'s fields, names, types and defaults that encodes every field; a field whose type
    names a type of the stored format names its twin."""
    if (known := _TWINS.get(kind)) is not None:
        return known
    hints = typing.get_type_hints(kind)  # without constraints: the value was checked when it was made
    fields: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(kind):
        if f.default is not msgspec.NODEFAULT:
            spec = msgspec.field(default=f.default, name=f.encode_name)
        elif f.default_factory is not msgspec.NODEFAULT:
            spec = msgspec.field(default_factory=f.default_factory, name=f.encode_name)
        else:
            spec = msgspec.field(name=f.encode_name)
        fields.append((f.name, _twin_type(hints[f.name]), spec))
    _TWINS[kind] = known = msgspec.defstruct(f"Whole{kind.__name__}", fields, kw_only=True, frozen=True, gc=False)
    return known


_TWINS: dict[type[msgspec.Struct], type[msgspec.Struct]] = {}


def _twin_type(hint: Any) -> Any:
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct) and getattr(hint, "stored_compact", False):
        return _twin(hint)
    origin = typing.get_origin(hint)
    if origin is None or origin is typing.Literal:
        return hint
    args = tuple(_twin_type(a) for a in typing.get_args(hint))
    if origin is types.UnionType or origin is typing.Union:
        return typing.Union[args]  # noqa: UP007 (the types are only known here)
    return origin[args]
