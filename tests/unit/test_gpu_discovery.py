"""GPU discovery through NVML, against a fake pynvml: hosts without GPUs, broken drivers, names as bytes or str."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from jetcron_services.agent.host.offer import discover_gpus


class NVMLError(Exception):
    pass


def fake_pynvml(count: int = 0, name: Any = b"NVIDIA H100 80GB HBM3", *, fail_init: bool = False,
                fail_count: bool = False) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if fail_init:
            raise NVMLError("NVML Shared Library Not Found")

    def get_count() -> int:
        if fail_count:
            raise NVMLError("Unknown Error")
        return count

    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = get_count  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda handle: name  # type: ignore[attr-defined]
    mod.calls = calls  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[[types.ModuleType | None], None]:
    monkeypatch.delenv("JETCRON_AGENT_FAKE_GPUS", raising=False)

    def install(module: types.ModuleType | None) -> None:
        # None in sys.modules makes `import pynvml` raise ImportError, as on a host without nvidia-ml-py.
        monkeypatch.setitem(sys.modules, "pynvml", module)  # type: ignore[arg-type]

    return install


@pytest.mark.parametrize(("module", "expected"), [
    pytest.param(None, (0, None, []), id="no_pynvml"),
    pytest.param(fake_pynvml(fail_init=True), (0, None, []), id="nvml_error_on_init"),
    pytest.param(fake_pynvml(0), (0, None, []), id="zero_gpus"),
    pytest.param(fake_pynvml(8, b"NVIDIA H100 80GB HBM3"), (8, "NVIDIA H100 80GB HBM3", list(range(8))),
                 id="eight_gpus_name_as_bytes"),
    pytest.param(fake_pynvml(8, "NVIDIA A100-SXM4-80GB"), (8, "NVIDIA A100-SXM4-80GB", list(range(8))),
                 id="eight_gpus_name_as_str"),
    pytest.param(fake_pynvml(8, fail_count=True), (0, None, []), id="nvml_error_on_query"),
])
def test_discover_gpus(nvml: Callable[[types.ModuleType | None], None], module: types.ModuleType | None,
                       expected: tuple[int, str | None, list[int]]) -> None:
    nvml(module)
    assert discover_gpus() == expected


def test_nvml_is_shut_down_after_a_successful_init(nvml: Callable[[types.ModuleType | None], None]) -> None:
    module = fake_pynvml(2)
    nvml(module)
    discover_gpus()
    assert module.calls == ["init", "shutdown"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("8:H100", (8, "H100", list(range(8))), id="count_and_model"),
    pytest.param("2", (2, "fake", [0, 1]), id="count_only"),
    pytest.param("0:H100", (0, None, []), id="none"),
])
def test_fake_gpus_for_tests_bypass_nvml(monkeypatch: pytest.MonkeyPatch, text: str,
                                         expected: tuple[int, str | None, list[int]]) -> None:
    monkeypatch.setenv("JETCRON_AGENT_FAKE_GPUS", text)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    assert discover_gpus() == expected
