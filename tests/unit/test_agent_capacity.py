"""The agent's capacity inside a container or slice: the host's cut to its cgroups' limits (v1 and v2 trees)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jetcron_services.agent.host.capacity import cpu_quota, effective, memory_limit, own_paths, probe

GiB = 2**30
HOST_MIB = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
HOST_CPUS = float(len(os.sched_getaffinity(0)))


@pytest.mark.parametrize(("texts", "cores"), [
    (("max 100000", None, None), None),
    (("150000 100000", None, None), 1.5),
    ((None, "-1", "100000"), None),
    ((None, "50000", "100000"), 0.5),
    ((None, None, None), None),
])
def test_cpu_quota(texts: tuple[str | None, str | None, str | None], cores: float | None) -> None:
    assert cpu_quota(*texts) == cores


@pytest.mark.parametrize(("texts", "limit"), [
    (("max", None), None), ((str(4 * GiB), None), 4 * GiB),
    ((None, "9223372036854771712"), None), ((None, str(GiB)), GiB), ((None, None), None),
])
def test_memory_limit(texts: tuple[str | None, str | None], limit: int | None) -> None:
    assert memory_limit(*texts) == limit


def test_the_smaller_of_host_and_cgroup_wins_and_cpu_is_never_zero() -> None:
    assert effective(64.0, 256 * GiB, 2.0, 4 * GiB) == (2.0, 4 * GiB)
    assert effective(2.0, 8 * GiB, 16.0, None) == (2.0, 8 * GiB)
    assert effective(8.0, 8 * GiB, 0.001, None)[0] == 0.01


def test_own_paths() -> None:
    assert own_paths("0::/system.slice/jetcron.service\n") == {"": "/system.slice/jetcron.service"}
    v1 = own_paths("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n")
    assert v1["cpu"] == v1["memory"] == "/docker/abc"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_v2_a_limit_on_a_parent_slice_applies(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    _write(root / "cgroup.controllers", "cpu memory")
    _write(root / "jetcron.slice" / "cpu.max", "200000 100000")  # the slice: 2 cores
    _write(root / "jetcron.slice" / "agent.scope" / "cpu.max", "max 100000")
    _write(root / "jetcron.slice" / "agent.scope" / "memory.max", str(GiB))
    _write(tmp_path / "self", "0::/jetcron.slice/agent.scope\n")
    cpus, mib = probe(root, tmp_path / "self")
    assert (cpus, mib) == (min(2.0, HOST_CPUS), min(1024, HOST_MIB))


def test_v1_in_a_container_with_its_own_namespace(tmp_path: Path) -> None:
    # docker/podman on cgroup v1: the container's own cgroup is mounted at each hierarchy's root, path "/"
    root = tmp_path / "cgroup"
    _write(root / "cpu" / "cpu.cfs_quota_us", "150000")
    _write(root / "cpu" / "cpu.cfs_period_us", "100000")
    _write(root / "memory" / "memory.limit_in_bytes", str(512 * 2**20))
    _write(tmp_path / "self", "4:memory:/\n3:cpu,cpuacct:/\n")
    assert probe(root, tmp_path / "self") == (min(1.5, HOST_CPUS), min(512, HOST_MIB))


def test_no_limits_is_the_host(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    _write(root / "cpu" / "cpu.cfs_quota_us", "-1")
    _write(root / "cpu" / "cpu.cfs_period_us", "100000")
    _write(root / "memory" / "memory.limit_in_bytes", "9223372036854771712")
    assert probe(root, tmp_path / "missing") == (HOST_CPUS, HOST_MIB)
