"""JSON Schema export: `python -m jetcron.wire.schema DIR` writes one file per public type."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from jetcron.core.models import AgentInfo, JobRecord, JobSpec, Run, TenantPolicy
from jetcron.wire.api import Reply
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


def render() -> dict[str, str]:
    """File name -> JSON text, deterministic so a test can compare it with what is checked in."""
    out: dict[str, str] = {}
    for kind in PUBLIC:
        schema = msgspec.json.schema(kind)
        out[f"{kind.__name__}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return out


def main(argv: list[str]) -> int:
    target = Path(argv[1] if len(argv) > 1 else "schemas")
    target.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (target / name).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
