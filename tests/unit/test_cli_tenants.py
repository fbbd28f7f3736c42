"""`jetcron tenants set --queue-quota`: read into TenantPolicy.queues, a bad one refused before anything is sent."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from jetcron.cli.main import app
from jetcron.cli.tenants import queue_quotas
from jetcron.core.errors import InvalidSpec
from jetcron.core.models import QueueQuota


@pytest.mark.parametrize(("flags", "expected"), [
    pytest.param(["batch:cpu=8,memory=16384,gpus=2"],
                 {"batch": QueueQuota(max_cpu=8, max_memory_mb=16384, max_gpus=2)}, id="every_field"),
    pytest.param(["batch:cpu=0.5", "etl:gpus=0"],
                 {"batch": QueueQuota(max_cpu=0.5), "etl": QueueQuota(max_gpus=0)}, id="repeated_and_partial"),
    pytest.param(["batch: memory=512"], {"batch": QueueQuota(max_memory_mb=512)}, id="spaces_after_the_colon"),
    pytest.param([], {}, id="none"),
])
def test_queue_quota_flags(flags: list[str], expected: dict[str, QueueQuota]) -> None:
    assert queue_quotas(flags) == expected


@pytest.mark.parametrize(("flags", "match"), [
    pytest.param(["batch"], r"--queue-quota: must be NAME:cpu=N.* \(got 'batch'\)", id="no_colon"),
    pytest.param(["bad name:cpu=1"], r"queue name .* \(got 'bad name:cpu=1'\)", id="bad_queue_name"),
    pytest.param(["batch:"], r"nothing is not cpu=N.* \(got 'batch:'\)", id="no_quota"),
    pytest.param(["batch:disk=5"], r"disk=5 is not cpu=N, memory=MB or gpus=N \(got 'batch:disk=5'\)",
                 id="unknown_key"),
    pytest.param(["batch:cpu"], r"cpu is not cpu=N", id="no_value"),
    pytest.param(["batch:cpu=eight"], r"cpu=eight: not a number \(got 'batch:cpu=eight'\)", id="not_a_number"),
    pytest.param(["batch:memory=1.5"], r"memory=1.5: not a whole number", id="fractional_memory"),
    pytest.param(["batch:cpu=-1"], r"cpu=-1: must be a number >= 0", id="negative"),
    pytest.param(["batch:cpu=nan"], r"cpu=nan: must be a number >= 0", id="nan"),
    pytest.param(["batch:cpu=inf"], r"cpu=inf: must be a number >= 0", id="infinite"),
    pytest.param(["batch:cpu=1,cpu=2"], r"cpu is given twice", id="key_twice"),
    pytest.param(["batch:cpu=1", "batch:gpus=1"], r"queue batch is given twice \(got 'batch:gpus=1'\)",
                 id="queue_twice"),
    pytest.param(["batch:gpus=10000000000"], r"queues\.batch\.max_gpus: .* \(got 10000000000\)", id="absurd"),
])
def test_bad_queue_quota_flags_name_the_flag_and_value(flags: list[str], match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        queue_quotas(flags)


def test_the_command_refuses_a_bad_queue_quota_as_a_usage_error_before_connecting() -> None:
    # (no server is running: a refusal that reached for one would say it could not connect instead)
    result = CliRunner().invoke(app, ["--nats", "nats://127.0.0.1:9", "tenants", "set", "acme",
                                      "--queue-quota", "batch:cpu=8", "--queue-quota", "etl:disk=5"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "usage error: --queue-quota: disk=5 is not cpu=N, memory=MB or gpus=N (got 'etl:disk=5')" in said


def test_the_table_writes_queue_quotas_as_the_flag_takes_them() -> None:
    from jetcron.cli.tenants import _rows

    rows = _rows([{"tenant": "acme", "queues": {"batch": {"max_cpu": 8.0, "max_memory_mb": 1000000, "max_gpus": 0},
                                                "adhoc": {"max_cpu": 0.25}, "open": {}}},
                  {"tenant": "globex", "queues": {}}])
    assert [r["queues"] for r in rows] == ["batch:cpu=8,memory=1000000,gpus=0 adhoc:cpu=0.25 open:-", ""]
    assert queue_quotas(rows[0]["queues"].split()[:2]) == {
        "batch": QueueQuota(max_cpu=8, max_memory_mb=1000000, max_gpus=0), "adhoc": QueueQuota(max_cpu=0.25)}
