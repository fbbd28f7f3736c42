"""jetcron.checkpoint: progress saved under the run id, resumed by the next attempt, removed after retention."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import nats
import pytest
from harness import Services, wait_for
from nats.js import JetStreamContext
from test_runs import now_job, state_is, the_run

from jetcron.bus.checkpoints import Checkpoints
from jetcron.core.errors import Unavailable
from jetcron.sdk import checkpoint
from jetcron.sdk.client import Client


@pytest.fixture
def store(topology_js: JetStreamContext) -> Checkpoints:
    return Checkpoints(topology_js)


async def test_the_latest_save_is_what_loads(store: Checkpoints) -> None:
    assert await store.load("job.1") is None
    await store.save("job.1", 1, attempt=1, state={"loss": 0.9})
    await store.save("job.1", 2, attempt=1, state={"loss": 0.5})
    saved = await store.load("job.1")
    assert saved is not None and (saved.step, saved.attempt, saved.state) == (2, 1, {"loss": 0.5})


async def test_an_older_attempt_cannot_overwrite_a_newer_attempts_checkpoint(store: Checkpoints) -> None:
    from jetcron.bus.checkpoints import StaleCheckpoint

    # Given attempt 2 has saved (attempt 1 was fenced off: its lease was lost)
    await store.save("job.2", 7, attempt=2)

    # When the paused attempt 1 wakes and tries to save its older progress
    with pytest.raises(StaleCheckpoint, match="attempt 1 is older"):
        await store.save("job.2", 3, attempt=1)

    # Then attempt 2's checkpoint stands
    saved = await store.load("job.2")
    assert saved is not None and (saved.step, saved.attempt) == (7, 2)


async def test_a_file_checkpoint_round_trips_and_replaces_the_previous_file(store: Checkpoints) -> None:
    weights = bytes(range(256)) * 2000  # 512 KB: several object-store chunks
    await store.save("job.3", 1, attempt=1, file=b"old weights")
    await store.save("job.3", 2, attempt=1, state={"epoch": 2}, file=weights)
    saved = await store.load("job.3")
    assert saved is not None and saved.file and saved.file_size == len(weights)
    out = io.BytesIO()
    await store.read_file(saved, out)
    assert out.getvalue() == weights
    names = sorted([n async for n in store.names()])
    assert names == ["job.3", "job.3/file/2"], "the step-1 file went once step 2 was recorded"
    assert await store.remove_run("job.3") == 2
    assert [n async for n in store.names()] == []


# A training loop: resumes from the checkpoint, saves after every step; attempt 1 crashes after step 3.
TRAIN = '''
import os, sys
from jetcron import checkpoint
log = open(sys.argv[1], "a")
with checkpoint.open() as ckpt:
    last = ckpt.load()
    if last is not None and last.file:
        ckpt.restore_file(last, sys.argv[2])
    start = last.step + 1 if last else 0
    log.write(f"attempt {ckpt.attempt} starts at step {start}\\n"); log.flush()
    for step in range(start, 6):
        with open(sys.argv[2], "a") as weights:
            weights.write(f"w{step};")
        ckpt.save_file(step, sys.argv[2], {"loss": 1.0 / (step + 1)})
        log.write(f"step {step}\\n"); log.flush()
        if os.environ["JETCRON_ATTEMPT"] == "1" and step == 3:
            sys.exit(1)
'''


async def test_the_next_attempt_resumes_from_the_last_checkpoint_and_it_is_removed_after_retention(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a tracker that keeps finished runs' checkpoints for 2 s
    services.env["JETCRON_CHECKPOINT_RETENTION"] = "2"
    await services.start_system(agents=1)
    script, log, weights = tmp_path / "train.py", tmp_path / "train.log", tmp_path / "work" / "model.bin"
    script.write_text(TRAIN)
    weights.parent.mkdir()

    # When a training job crashes on attempt 1 after step 3 and is retried
    await client.call("jobs.create", now_job(
        "train", sys.executable, str(script), str(log), str(weights), resources={"memory_mb": 256},
        retry={"max_attempts": 2, "initial_seconds": 0.2, "jitter": 0}))
    run = await the_run(client, "train", when=state_is("succeeded", "dead", "failed"), timeout=40,
                        what="training to end")

    # Then attempt 2 started at step 4, with the weights of step 3, not from zero
    assert run["state"] == "succeeded", run
    lines = log.read_text().splitlines()
    assert lines == ["attempt 1 starts at step 0", "step 0", "step 1", "step 2", "step 3",
                     "attempt 2 starts at step 4", "step 4", "step 5"]
    assert weights.read_text() == "w0;w1;w2;w3;w4;w5;"

    # And once the run has been finished for its retention period, its checkpoint is gone
    nc = await nats.connect(services.server.url)
    try:
        store = Checkpoints(nc.jetstream())
        saved = await store.load(run["run_id"])
        assert saved is None or saved.step == 5
        # (a listing that races the tracker's removal may stall: Unavailable, and asked again)
        await wait_for(lambda: _empty(store), 15, what="the checkpoint to be removed", ignore=(Unavailable,))
    finally:
        await nc.close()
    assert checkpoint.open  # the public entry point (jetcron.checkpoint.open)


async def _empty(store: Checkpoints) -> bool:
    return [n async for n in store.names()] == []
