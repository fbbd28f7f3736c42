"""Encoding: msgspec JSON everywhere, with decoders cached per type."""

from __future__ import annotations

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
