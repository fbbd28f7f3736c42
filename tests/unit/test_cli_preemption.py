"""`jetcron tenants set --preemptible / --preemption / --queue-preemption`: read into TenantPolicy.preemption and
the queues' own, a bad one refused naming the flag and the value before anything is sent."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from jetcron.cli.main import app
from jetcron.cli.tenants import _rows, preemption, queue_preemptions
from jetcron.core.errors import InvalidSpec
from jetcron.core.models import Preemption, QueueQuota


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("max=2,min-runtime=10m,grace=30s",
                 Preemption(max_preemptions=2, min_runtime_seconds=600, grace_seconds=30), id="every_guard"),
    pytest.param("grace=90", Preemption(grace_seconds=90), id="one_guard"),
    pytest.param("on", Preemption(), id="on"),
    pytest.param("off", Preemption(enabled=False), id="off"),
])
def test_preemption_flag(text: str, expected: Preemption) -> None:
    assert preemption(text) == expected


@pytest.mark.parametrize(("text", "match"), [
    pytest.param("max=two", r"--preemption: max=two: not a whole number \(got 'max=two'\)", id="not_a_number"),
    pytest.param("grace=soon", r"--preemption: grace=soon: .* \(got 'grace=soon'\)", id="not_a_duration"),
    pytest.param("after=5", r"after=5 is not max=N, min-runtime=DURATION or grace=DURATION", id="unknown_key"),
])
def test_bad_preemption_flags_name_the_flag_and_value(text: str, match: str) -> None:
    with pytest.raises(InvalidSpec, match=match):
        preemption(text)


def test_a_queues_own_setting_sits_beside_its_quota() -> None:
    queues = queue_preemptions(["batch:max=1", "interactive:off"], {"batch": QueueQuota(max_gpus=4)})
    assert queues == {"batch": QueueQuota(max_gpus=4, preemption=Preemption(max_preemptions=1)),
                      "interactive": QueueQuota(preemption=Preemption(enabled=False))}
    with pytest.raises(InvalidSpec, match=r"queue batch is given twice"):
        queue_preemptions(["batch:on", "batch:off"], {})


def test_the_command_refuses_a_guard_out_of_bounds_before_connecting() -> None:
    result = CliRunner().invoke(app, ["--nats", "nats://127.0.0.1:9", "tenants", "set", "acme",
                                      "--queue-preemption", "batch:max=5000"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "queues.batch.preemption.max_preemptions: must be >= 0 and <= 1000 (got 5000)" in said


def test_the_table_writes_preemption_as_the_flags_take_it() -> None:
    rows = _rows([{"tenant": "acme", "preemption": {"enabled": True, "max_preemptions": 2, "grace_seconds": 30.0},
                   "queues": {"batch": {"max_cpu": 8.0, "preemption": {"enabled": False}}}}])
    assert rows[0]["preemption"] == "max=2,grace=30 batch:off"
    assert _rows([{"tenant": "plain"}])[0]["preemption"] == ""
