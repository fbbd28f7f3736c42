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

from jetcron.bus.checkpoints import CHUNK, Checkpoints, DamagedCheckpoint, StaleCheckpoint, remove_run, saved_runs
from jetcron.bus.natspy import connection_of
from jetcron.bus.streams import ServerStreams
from jetcron.core.errors import Unavailable
from jetcron.sdk import checkpoint
from jetcron.sdk.client import Client
from jetcron.wire.subjects import STREAM_CHECKPOINTS, checkpoint_subject


@pytest.fixture
def store(topology_js: JetStreamContext) -> Checkpoints:
    return Checkpoints(connection_of(topology_js), topology_js, "acme")


async def _subjects(js: JetStreamContext) -> list[str]:
    info = await js.stream_info(STREAM_CHECKPOINTS, subjects_filter=">")
    return sorted(info.state.subjects or {})


async def test_the_latest_save_is_what_loads(store: Checkpoints) -> None:
    assert await store.load("job.1") is None
    await store.save("job.1", 1, attempt=1, state={"loss": 0.9})
    await store.save("job.1", 2, attempt=1, state={"loss": 0.5})
    saved = await store.load("job.1")
    assert saved is not None and (saved.step, saved.attempt, saved.state) == (2, 1, {"loss": 0.5})


async def test_an_older_attempt_cannot_overwrite_a_newer_attempts_checkpoint(store: Checkpoints) -> None:
    # Given attempt 2 has saved (attempt 1 was fenced off: its lease was lost)
    await store.save("job.2", 7, attempt=2)

    # When the paused attempt 1 wakes and tries to save its older progress
    with pytest.raises(StaleCheckpoint, match="attempt 1 is older"):
        await store.save("job.2", 3, attempt=1)

    # Then attempt 2's checkpoint stands
    saved = await store.load("job.2")
    assert saved is not None and (saved.step, saved.attempt) == (7, 2)


async def test_a_file_checkpoint_round_trips_in_alternate_slots(store: Checkpoints,
                                                                topology_js: JetStreamContext) -> None:
    weights = bytes(range(256)) * 2000  # 512 KB: four chunks
    await store.save("job.3", 1, attempt=1, file=b"old weights")
    await store.save("job.3", 2, attempt=1, state={"epoch": 2}, file=weights)
    saved = await store.load("job.3")
    assert saved is not None and saved.file == "f.1.1" and saved.file_size == len(weights) and saved.chunks == 4
    out = io.BytesIO()
    await store.read_file(saved, out)
    assert out.getvalue() == weights
    # Every part lies under the run's own subjects (what its credential is confined to); the step-1 file is in
    # the other slot, which the next save writes over.
    prefix = checkpoint_subject("acme", "job.3", "")
    assert await _subjects(topology_js) == sorted([prefix + "rec", prefix + "f.1.0.0",
                                                   *(f"{prefix}f.1.1.{n}" for n in range(4))])
    await store.save("job.3", 3, attempt=1, file=b"newer")
    again = await store.load("job.3")
    assert again is not None and again.file == "f.1.0"


async def test_a_file_that_does_not_read_back_as_saved_is_refused(store: Checkpoints,
                                                                  topology_js: JetStreamContext) -> None:
    # Given a checkpoint whose chunk was written over afterwards (the slot's next save, cut short)
    saved = await store.save("job.4", 1, attempt=1, file=b"x" * (CHUNK + 10))
    await topology_js.publish(checkpoint_subject("acme", "job.4", "f.1.0.1"), b"tampered")

    # Then reading it back says so rather than handing over what was not saved
    with pytest.raises(DamagedCheckpoint, match=r"job\.4 at step 1: its file reads back as"):
        await store.read_file(saved, io.BytesIO())


async def test_the_tracker_removes_a_runs_checkpoints_in_one_purge(store: Checkpoints,
                                                                   topology_js: JetStreamContext) -> None:
    await store.save("job.5", 1, attempt=1, file=b"weights")
    await store.save("job.6", 1, attempt=1)
    streams = ServerStreams(topology_js)
    found = await saved_runs(streams)
    assert sorted(r.run_id for r in found) == ["job.5", "job.6"]
    await remove_run(streams, next(r for r in found if r.run_id == "job.5"))
    assert [r.run_id for r in await saved_runs(streams)] == ["job.6"]
    assert await store.load("job.5") is None


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
        js = nc.jetstream()
        store = Checkpoints(nc, js, "default")
        saved = await store.load(run["run_id"])
        assert saved is None or saved.step == 5

        async def empty() -> bool:
            return await _subjects(js) == []

        await wait_for(empty, 15, what="the checkpoint to be removed", ignore=(Unavailable,))
    finally:
        await nc.close()
    assert checkpoint.open  # the public entry point (jetcron.checkpoint.open)
