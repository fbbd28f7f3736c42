"""The invariant checker catches what it is meant to catch (so a green chaos run means something)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chaos_checks import check, redispatch_delays

from jetcron.core.models import AttemptRecord, Run, RunState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(job: str, *attempts: tuple[str, int], state: RunState = RunState.SUCCEEDED, at: int = 0) -> Run:
    history = [AttemptRecord(attempt=i + 1, agent="a", token=token, outcome=outcome,
                             started_at=T0 + timedelta(seconds=10 * i + 1),
                             finished_at=T0 + timedelta(seconds=10 * i + 5))
               for i, (outcome, token) in enumerate(attempts)]
    return Run(run_id=f"{job}.{at}", job=job, state=state, attempt=len(history),
               scheduled_at=T0 + timedelta(seconds=at), due_at=T0, created_at=T0, history=history)


def logs(tmp: Path, attempts: list[str], effects: list[str]) -> Path:
    (tmp / "attempts.log").write_text("".join(f"{line}\n" for line in attempts))
    (tmp / "effects.log").write_text("".join(f"{line}\n" for line in effects))
    return tmp


def test_a_clean_history_passes(tmp_path: Path) -> None:
    r = run("j", ("lost", 5), ("succeeded", 9))
    out = logs(tmp_path, [f"{r.run_id} 1 5 100", f"{r.run_id} 2 9 101"], [f"{r.run_id} 2 9"])
    verdict = check({r.run_id: r}, out, jobs=["j"])
    verdict.assert_ok()


@pytest.mark.parametrize(("runs", "attempts", "effects", "broken"), [
    pytest.param([run("j", ("succeeded", 5))], ["j.0 1 5 1"], ["j.0 1 5", "j.0 1 5"], "duplicates",
                 id="effect_twice"),
    pytest.param([run("j", ("succeeded", 5))], ["j.0 1 5 1"], [], "lost", id="succeeded_without_effect"),
    pytest.param([], [], [], "lost", id="no_run_at_all"),
    pytest.param([run("j", ("failed", 5), state=RunState.DEAD)], ["j.0 1 5 1"], [], "lost", id="dead_not_succeeded"),
    pytest.param([run("j", ("succeeded", 5)), run("j", ("succeeded", 6), at=60)], ["j.0 1 5 1", "j.60 1 6 2"],
                 ["j.0 1 5", "j.60 1 6"], "terminal", id="two_runs_for_one_now_job"),
    pytest.param([run("j", ("succeeded", 5), ("succeeded", 9))], ["j.0 1 5 1"], ["j.0 1 5"], "terminal",
                 id="terminal_twice"),
    pytest.param([run("j", ("lost", 9), ("succeeded", 5))], ["j.0 1 9 1", "j.0 2 5 2"], ["j.0 2 5"], "tokens",
                 id="token_went_back"),
    pytest.param([run("j", ("succeeded", 5))], ["j.0 1 5 1", "j.0 1 7 2"], ["j.0 1 5"], "tokens",
                 id="one_attempt_two_tokens"),
])
def test_each_broken_invariant_is_reported(tmp_path: Path, runs: list[Run], attempts: list[str],
                                           effects: list[str], broken: str) -> None:
    verdict = check({r.run_id: r for r in runs}, logs(tmp_path, attempts, effects), jobs=["j"])
    assert getattr(verdict, broken), verdict
    with pytest.raises(AssertionError, match=broken):
        verdict.assert_ok()


def test_redispatch_delay_counts_from_the_fault_to_the_next_start() -> None:
    r = run("j", ("lost", 5), ("succeeded", 9))
    assert redispatch_delays({r.run_id: r}, T0 + timedelta(seconds=7)) == [4.0]
