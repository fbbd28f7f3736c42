"""GPU gangs on a real server with fake GPUs: all or nothing under one leaf, devices per host, torn down as one."""

from __future__ import annotations

from pathlib import Path

from harness import Services, pid_alive, wait_for
from placement_support import agents_known, job, one_run, start

from jetcron.sdk.client import Client


def gpu_agent(leaf: str, gpus: int = 8) -> dict[str, str]:
    # TEST ONLY: the agent advertises GPUs it does not have.
    return {"JETCRON_AGENT_FAKE_GPUS": f"{gpus}:H100", "JETCRON_AGENT_LABELS": f"leaf={leaf}",
            "JETCRON_AGENT_CPU": "8"}


FLEET = {"agent-1": gpu_agent("l1"), "agent-2": gpu_agent("l1"), "agent-3": gpu_agent("l1"),
         "agent-4": gpu_agent("l2")}
# Each member appends who it is, its devices, rank and size, attempt and pid; attempt 1 may be told to linger.
RECORD = ('echo "$JETCRON_AGENT_ID $CUDA_VISIBLE_DEVICES $JETCRON_GANG_RANK $JETCRON_GANG_SIZE $JETCRON_ATTEMPT $$" '
          '>> {out}; if [ "$JETCRON_ATTEMPT" = 1 ]; then sleep {first}; else sleep 1; fi')


def lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


async def test_gangs_land_on_one_leaf_and_each_host_gets_its_own_devices(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given three 8-GPU hosts under leaf l1 and one under l2
    await start(services, FLEET)
    await agents_known(services.server.url, 4)

    # When two gangs of 2 hosts × 4 GPUs are submitted together
    outs = {name: tmp_path / f"{name}.txt" for name in ("g1", "g2")}
    for name, out in outs.items():
        await client.call("jobs.create", job(name, "sh", "-c", RECORD.format(out=out, first=2),
                                             resources={"cpu": 1, "gpus": 4, "hosts": 2}))

    # Then both succeed, each on two hosts of l1
    runs = {name: await one_run(client, name, lambda r: r["state"] in ("succeeded", "failed", "dead"), timeout=30)
            for name in outs}
    for name, run in runs.items():
        assert run["state"] == "succeeded", run
        assert len(run["agents"]) == 2 and set(run["agents"]) <= {"agent-1", "agent-2", "agent-3"}
        # And every member ran once, with its rank, the gang size and 4 devices of its own host
        seen = sorted((line[0], line[2], line[3]) for line in lines(outs[name]))
        assert seen == sorted((agent, str(rank), "2") for rank, agent in enumerate(run["agents"]))
        for line in lines(outs[name]):
            assert len(line[1].split(",")) == 4
            assert line[1].split(",") == [str(i) for i in run["gpu_indices"][line[0]]]
    # And two gangs sharing a host never share a device on it
    for host in set(runs["g1"]["agents"]) & set(runs["g2"]["agents"]):
        assert not set(runs["g1"]["gpu_indices"][host]) & set(runs["g2"]["gpu_indices"][host])


async def test_a_gang_that_no_leaf_can_hold_waits_instead_of_spreading(services: Services, client: Client) -> None:
    await start(services, FLEET)
    await agents_known(services.server.url, 4)

    # When a gang needs 4 hosts × 8 GPUs: 4 such hosts exist, but no leaf has 4
    record = await client.call("jobs.create", job("wide", "true", resources={"gpus": 8, "hosts": 4}))

    # Then it is warned about at submit and waits, never split across leaves
    never = "no leaf can ever hold 4 hosts × 8 GPUs (largest: l1 with 3)"
    assert record["warnings"] == [f"unsatisfiable: {never}; its runs will wait until such an agent registers"]
    run = await one_run(client, "wide", lambda r: r["reason"] == never, what="the gang to wait with its reason")
    assert (run["state"], run["agents"]) == ("scheduled", [])

    # And a gang that fits only once a host is free says which leaf comes closest
    await client.call("jobs.create", job("hog", "sleep", "30", resources={"gpus": 8}))
    await one_run(client, "hog", lambda r: r["state"] == "running")
    await client.call("jobs.create", job("three", "true", resources={"gpus": 8, "hosts": 3}))
    busy = await one_run(client, "three", lambda r: r["reason"].startswith("no leaf with"))
    assert busy["reason"] == "no leaf with 3 hosts × 8 free GPUs (closest: l1 with 2)"


async def test_a_dead_member_tears_the_whole_gang_down_and_it_is_requeued_as_one(
        services: Services, client: Client, tmp_path: Path) -> None:
    # Given a gang of 2 hosts × 8 GPUs running its first attempt (which would run for a minute) on leaf l1
    await start(services, FLEET)
    await agents_known(services.server.url, 4)
    out = tmp_path / "gang.txt"
    await client.call("jobs.create", job("train", "sh", "-c", RECORD.format(out=out, first=60),
                                         resources={"cpu": 1, "gpus": 8, "hosts": 2}))
    first = await one_run(client, "train", lambda r: r["state"] == "running" and len(lines(out)) == 2,
                          timeout=30, what="both members of attempt 1 to run")
    leader, member = first["agents"]
    pids = {line[0]: int(line[5]) for line in lines(out)}

    # When the member's host dies (its agent killed with SIGKILL: no report, its lease lapses)
    services[member].kill9()

    # Then the leader's attempt-1 process is stopped too: the gang is torn down as a whole
    await wait_for(lambda: not pid_alive(pids[leader]), 20, what="the leader's attempt-1 process to be stopped")
    # And the run is re-queued as one gang: attempt 2 on two live hosts of one leaf, and it succeeds
    run = await one_run(client, "train", lambda r: r["state"] in ("succeeded", "dead", "failed"), timeout=40,
                        what="attempt 2 to end")
    assert (run["state"], run["attempt"]) == ("succeeded", 2)
    assert member not in run["agents"] and set(run["agents"]) <= {"agent-1", "agent-2", "agent-3"}
    assert run["history"][0]["outcome"] == "lost"
    assert f"gang member {member} lost" in run["history"][0]["reason"]
    # And attempt 2 started every member once, with 8 devices each
    second = [line for line in lines(out) if line[4] == "2"]
    assert sorted(line[0] for line in second) == sorted(run["agents"])
    assert all(line[1] == "0,1,2,3,4,5,6,7" for line in second)
