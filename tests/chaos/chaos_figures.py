"""What a chaos test measured (the `figures` fixture of conftest.py): a module of its own, so that test modules
can import the type whatever other conftest.py the session loaded."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

FIGURES = Path(__file__).resolve().parents[2] / "build" / "chaos-figures.jsonl"


class Figures:
    """What a chaos test measured: printed past output capture, and appended to build/chaos-figures.jsonl."""

    def __init__(self, request: pytest.FixtureRequest, seed: int) -> None:
        self.request = request
        self.values: dict[str, Any] = {"test": request.node.name, "seed": seed}

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = round(value, 3) if isinstance(value, float) else value

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def emit(self) -> None:
        self.request.node.user_properties.append(("figures", dict(self.values)))  # the guarantees report
        line = " ".join(f"{k}={v}" for k, v in self.values.items())
        capture = self.request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            print(f"\nCHAOS {line}", flush=True)
        FIGURES.parent.mkdir(parents=True, exist_ok=True)
        with FIGURES.open("a") as f:
            f.write(json.dumps(self.values) + "\n")
