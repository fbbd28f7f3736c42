"""JSON Schema export: `python -m jetcron.wire.schema DIR` writes one file per public type."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from jetcron.core.models import AgentInfo, JobRecord, JobSpec, Run, TenantPolicy
from jetcron.wire.api import Reply
from jetcron.wire.contract import document
from jetcron.wire.messages import (
    AssignRun,
    CancelRun,
    Cursor,
    DeadLettered,
    PlaceRun,
    RunFinished,
    RunHandedBack,
    RunStarted,
    ServiceInstance,
)
from jetcron.wire.verbs import VERBS

PUBLIC: tuple[type[Any], ...] = (
    JobSpec,
    JobRecord,
    Run,
    AgentInfo,
    TenantPolicy,
    PlaceRun,
    AssignRun,
    CancelRun,
    RunStarted,
    RunFinished,
    RunHandedBack,
    DeadLettered,
    Cursor,
    ServiceInstance,
    Reply,
)


def _text(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def render() -> dict[str, str]:
    """File name -> JSON text, deterministic so a test can compare it with what is checked in: the models, one
    schema per API verb's request and reply (api/), and the AsyncAPI document of every subject."""
    out: dict[str, str] = {}
    for kind in PUBLIC:
        out[f"{kind.__name__}.json"] = _text(msgspec.json.schema(kind))
    for name, verb in VERBS.items():
        out[f"api/{name}.request.json"] = _text(msgspec.json.schema(verb.request))
        out[f"api/{name}.reply.json"] = _text(msgspec.json.schema(verb.reply))
    out["asyncapi.json"] = _text(document())
    return out


def main(argv: list[str]) -> int:
    target = Path(argv[1] if len(argv) > 1 else "schemas")
    for name, text in render().items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
