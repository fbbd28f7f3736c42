"""Retry decisions: pure functions of the policy, the run's history and a random draw."""

from __future__ import annotations

import enum
import random

import msgspec

from jetcron.core.models import RetryPolicy, Run

# Outcomes that spend an attempt from the retry budget. A hand-back (agent drain) or a
# dispatch that never started spends nothing: the job did not fail.
FAILURE_OUTCOMES = frozenset({"failed", "timed_out", "lost", "start_failed"})


class RetryAction(enum.StrEnum):
    RETRY = "retry"
    """Run another attempt after `delay_seconds`."""
    FAIL = "fail"
    """Stop: the exit code is non-retryable."""
    DEAD = "dead"
    """Stop: every attempt is spent; dead-letter the run."""


class RetryDecision(msgspec.Struct, frozen=True, kw_only=True):
    action: RetryAction
    delay_seconds: float = 0.0
    reason: str = ""


OUTAGE_TRIES = 6
"""Tries of one idempotent write (a message id makes a copy a no-op) that its stream did not answer."""


def outage_wait(tries: int) -> float:
    """Seconds to wait after the `tries`-th failed try: 0.25 s doubling up to 2 s, about 6 s over OUTAGE_TRIES
    tries, the length of a stream leader election after a NATS node is lost."""
    return min(2.0, 0.25 * 2.0 ** (tries - 1))


OUTLASTING_WAIT = 5.0
"""Seconds between tries of something that must outlast any outage (a watch: a service's view of a bucket) once
OUTAGE_TRIES have gone unanswered: a stream leader election is over by then, so this is an outage, waited out."""


def outlasting_wait(tries: int) -> float:
    """Seconds to wait after the `tries`-th unanswered try of what is tried for ever: outage_wait's steps for the
    length of an election, then OUTLASTING_WAIT."""
    return outage_wait(tries) if tries < OUTAGE_TRIES else OUTLASTING_WAIT


def failures_so_far(run: Run) -> int:
    return sum(1 for a in run.history if a.outcome in FAILURE_OUTCOMES)


def backoff_delay(policy: RetryPolicy, failures: int, rng: random.Random) -> float:
    """Exponential backoff after the `failures`-th failure (1-based), capped, with additive jitter."""
    base = policy.initial_seconds * policy.multiplier ** max(0, failures - 1)
    capped = min(base, policy.max_delay_seconds)
    return capped + capped * policy.jitter * rng.random()


def decide(run: Run, outcome: str, exit_code: int | None, rng: random.Random, detail: str = "") -> RetryDecision:
    """What to do after the current attempt ended with `outcome` (not yet in `run.history`).

    `detail` is the agent's own account ("memory limit 64 MB exceeded"): the reason then says it, not a code.
    """
    policy = run.spec.retry if run.spec is not None else RetryPolicy()
    what = f"exit code {exit_code}" if outcome == "failed" and exit_code is not None else outcome.replace("_", " ")
    what = detail or what
    if outcome == "failed" and exit_code is not None and exit_code in policy.non_retryable_exit_codes:
        return RetryDecision(action=RetryAction.FAIL, reason=f"{what} is non-retryable")
    failures = failures_so_far(run) + (1 if outcome in FAILURE_OUTCOMES else 0)
    if failures >= policy.max_attempts:
        return RetryDecision(
            action=RetryAction.DEAD,
            reason=f"{what} on attempt {run.attempt}; {failures}/{policy.max_attempts} attempts failed",
        )
    if outcome == "lost":
        # The agent vanished; the job itself did not fail, so re-dispatch without waiting.
        return RetryDecision(action=RetryAction.RETRY, delay_seconds=0.0, reason=f"{what}; re-dispatched")
    delay = backoff_delay(policy, failures, rng)
    return RetryDecision(action=RetryAction.RETRY, delay_seconds=delay, reason=f"{what}; retry in {delay:.1f}s")
