"""A job's status and a run's state in the REST API's words: what a job view shows, and what each word of a
`status=` (jobs) or `state=` (runs) filter finds. Pure; the one home of the mapping (docs/rest-api.md, "Status
words").

jetcron's run states are finer than the design's four words. Each state is accepted by its own name, and each of
the design's words stands for the states it covers:

- `queued`: no process runs yet: `waiting` (held by the overlap policy or upstream jobs), `scheduled` (waiting for
  placement), `assigned` (an agent was chosen but has not started it; a lost agent hands it back to placement),
  `retry_wait` (an attempt failed, the next one waits out its backoff); and a job with no run yet.
- `running`: `running` (its process runs on an agent).
- `completed`: `succeeded`.
- `failed`: `failed` (an attempt failed in a way that is not retried) and `dead` (every attempt failed; the run is
  in the dead-letter queue). Where a design word is also a state's name (`running`, `failed`), the design's
  meaning holds.

`cancelled`, `skipped` and `blocked` are none of the four (no attempt ran to its end: a user or a policy stopped
it, or an upstream job's failure held it back); they are shown and found by their own names. `paused` is a job's,
read from its record before any run's state: a paused job is `paused` whatever its latest run did (the view's
`run_state` still says). A deleted job is never shown, so `deleted` is no filter.

A job view's `status` is the design's word (one of STATUSES); its `state` is jetcron's exact state (one of STATES:
`paused`, or the latest run's state; none before the first run).
"""

from __future__ import annotations

from dataclasses import dataclass

from jetcron.core.models import JobRecord, JobStatus, Run, RunState
from jetcron_services.gateway.problems import Problem, problem

DESIGN: dict[str, frozenset[RunState]] = {
    "queued": frozenset({RunState.WAITING, RunState.SCHEDULED, RunState.ASSIGNED, RunState.RETRY_WAIT}),
    "running": frozenset({RunState.RUNNING}),
    "completed": frozenset({RunState.SUCCEEDED}),
    "failed": frozenset({RunState.FAILED, RunState.DEAD}),
}
PAUSED = "paused"
NOT_RUN = "queued"
"""What a job with no run yet shows: the design's word for a job waiting to run."""
WORD_OF: dict[RunState, str] = {state: next((word for word, states in DESIGN.items() if state in states),
                                            state.value) for state in RunState}
"""The word a job view's `status` shows for its latest run's state: the design's where it has one, else the
state's own name (where the design is silent)."""
STATUSES: tuple[str, ...] = (*DESIGN, PAUSED, *dict.fromkeys(w for w in WORD_OF.values() if w not in DESIGN))
"""Every word a job view's `status` shows: the design's four, `paused`, then the states the design is silent on."""
STATES: tuple[str, ...] = (PAUSED, *(state.value for state in RunState))
"""Every value of a job view's `state`: jetcron's exact state (`paused`, or its latest run's)."""

RUN_WORDS: tuple[str, ...] = (*DESIGN, *(state.value for state in RunState if state.value not in DESIGN))
"""What a runs listing's `state=` takes: the design's four, then jetcron's other states."""
JOB_WORDS: tuple[str, ...] = (*DESIGN, PAUSED, *RUN_WORDS[len(DESIGN):])
"""What a jobs listing's `status=` takes: the runs' words and `paused`."""


@dataclass(frozen=True)
class Wanted:
    """What a jobs listing's `status=` word finds: jobs whose latest run is in `states`, jobs with no run yet
    (`not_run`), paused jobs (`paused`)."""

    states: frozenset[RunState]
    not_run: bool = False
    paused: bool = False

    def by_record(self, job: JobRecord) -> bool | None:
        """The answer from the job record alone (a paused job, or a word only paused jobs have); None: it takes
        the job's latest run."""
        if job.status is JobStatus.PAUSED:
            return self.paused
        return False if not self.states and not self.not_run else None

    def finds(self, job: JobRecord, run: Run | None) -> bool:
        decided = self.by_record(job)
        if decided is not None:
            return decided
        return self.not_run if run is None else run.state in self.states


def run_states(word: str) -> frozenset[RunState] | None:
    """The run states a `state=` word covers; None for an unknown word."""
    if word in DESIGN:
        return DESIGN[word]
    return frozenset({RunState(word)}) if word in RUN_WORDS else None


def job_filter(word: str) -> Wanted | None:
    """What a `status=` word finds; None for an unknown word."""
    if word == PAUSED:
        return Wanted(states=frozenset(), paused=True)
    states = run_states(word)
    return None if states is None else Wanted(states=states, not_run=word == NOT_RUN)


def shown(job: JobRecord, run: Run | None) -> str:
    """A job's `status` in its view, the design's word: `paused` from its record, else its latest run's state's
    word (WORD_OF), else `queued`. Every value is a filter word that finds the job (a test keeps it so)."""
    if job.status is JobStatus.PAUSED:
        return PAUSED
    if run is None:
        return NOT_RUN
    return WORD_OF[run.state]


def state_of(job: JobRecord, run: Run | None) -> str | None:
    """A job's `state` in its view, jetcron's exact one: `paused` from its record, else its latest run's state;
    None before its first run. Every value is a filter word that finds the job (a test keeps it so)."""
    if job.status is JobStatus.PAUSED:
        return PAUSED
    return None if run is None else run.state.value


def unknown(field: str, value: str, words: tuple[str, ...]) -> Problem:
    """A filter word outside the set: 400, naming the field, the value and every word it takes."""
    return problem(400, f"{field} must be one of {', '.join(words)}", code="invalid", field=field,
                   value=value[:64])
