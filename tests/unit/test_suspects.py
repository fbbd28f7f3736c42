"""Suspect GPU hosts: lost with GPUs, cleared only by a health check that passed after the loss."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jetcron.core.models import AgentInfo
from jetcron.core.placing.suspects import Suspects

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def info(gpus: int = 8, *, beat: float = 0, ok: bool | None = None, checked: float | None = None,
         detail: str = "") -> AgentInfo:
    return AgentInfo(agent_id="g1", cpu=8, memory_mb=1024, gpus=gpus, heartbeat_at=T0 + timedelta(seconds=beat),
                     started_at=T0, gpu_health_ok=ok,
                     gpu_health_at=None if checked is None else T0 + timedelta(seconds=checked),
                     gpu_health_detail=detail)


def test_a_healthy_host_that_never_went_missing_is_not_suspect() -> None:
    assert Suspects().check(info(ok=True, checked=0)) is None
    assert Suspects().check(info()) is None  # no check configured to have run yet: nothing against it


def test_a_lost_gpu_host_stays_suspect_until_a_check_passes_after_its_last_heartbeat() -> None:
    book = Suspects()
    # Given a GPU host whose last heartbeat was at t=10 goes missing
    assert book.lost(info(beat=10)) is True
    # When it comes back with a pass from before the loss, or a failure after it
    assert book.check(info(beat=60, ok=True, checked=5)) is not None
    assert "failing: xid 79" in (book.check(info(beat=61, ok=False, checked=50, detail="xid 79")) or "")
    # Then it stays suspect; a pass after the loss clears it, for good
    assert book.check(info(beat=62, ok=True, checked=61)) is None
    assert "g1" not in book
    assert book.check(info(beat=63, ok=True, checked=5)) is None


def test_a_lost_host_without_gpus_is_never_suspect() -> None:
    book = Suspects()
    assert book.lost(info(gpus=0)) is False
    assert book.check(info(gpus=0)) is None


def test_a_failing_check_keeps_gpu_work_off_even_without_a_loss() -> None:
    assert Suspects().check(info(ok=False, checked=1, detail="nvidia-smi exited 9")) == (
        "GPU health check failing: nvidia-smi exited 9")


def test_a_loss_recorded_by_an_earlier_placement_is_restored() -> None:
    book = Suspects()
    book.restore("g1", T0 + timedelta(seconds=10))
    assert book.check(info(beat=20, ok=True, checked=9)) is not None
    assert book.items() == [("g1", T0 + timedelta(seconds=10))]
    assert book.check(info(beat=21, ok=True, checked=11)) is None


def test_two_losses_keep_the_earlier_mark() -> None:
    book = Suspects()
    book.lost(info(beat=10))
    book.lost(info(beat=30))
    assert book.lost_after("g1") == T0 + timedelta(seconds=10)
