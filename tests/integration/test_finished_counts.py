"""Finished runs per minute (jc_finished, `runs.finished`) on a real nats-server with auth on: every run that
ends is counted once, in the minute it finished, by outcome, whichever tracker replica or service wrote its end; a
tenant reads only its own counts; trackers killed and replaced neither lose nor double a count."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from harness import Services, run_cli, wait_for

from jetcron.core.lifecycle.finished import minute_of
from jetcron.sdk.client import Client
from jetcron.sdk.errors import ApiError

Counts = dict[datetime, dict[str, int]]
TERMINAL = {"succeeded", "failed", "dead", "cancelled"}


def _job(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {"spec": {"name": name, "command": command, "schedule": {"kind": "now"}, **spec}}


async def _create(client: Client, prefix: str, n: int, command: list[str], **spec: Any) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(n)]
    for name in names:
        await client.call("jobs.create", _job(name, command, **spec))
    return names


async def _ended(client: Client, jobs: list[str]) -> list[dict[str, Any]]:
    """The one run of each job, once every one has ended."""

    async def all_ended() -> list[dict[str, Any]] | None:
        runs = []
        for job in jobs:
            items = (await client.call("runs.list", {"job": job}))["items"]
            if len(items) != 1 or items[0]["state"] not in TERMINAL:
                return None
            runs.append(items[0])
        return runs

    found: list[dict[str, Any]] = await wait_for(all_ended, 60, interval=0.5, what=f"the runs of {jobs[:3]}...")
    return found


def _expected(runs: list[dict[str, Any]]) -> Counts:
    by_minute: dict[datetime, Counter[str]] = {}
    for run in runs:
        minute = minute_of(datetime.fromisoformat(run["finished_at"]))
        by_minute.setdefault(minute, Counter())[run["state"]] += 1
    return {m: dict(c) for m, c in by_minute.items()}


async def _counts(client: Client) -> Counts:
    reply = await client.call("runs.finished", {"minutes": 60})
    assert datetime.fromisoformat(reply["since"]) <= minute_of(datetime.now(UTC))
    return {datetime.fromisoformat(item["minute"]): item["counts"] for item in reply["items"]}


async def _counts_become(client: Client, expected: Counts, what: str) -> None:
    last: list[Counts] = []

    async def equal() -> bool:
        last[:] = [await _counts(client)]
        return last[0] == expected

    try:
        await wait_for(equal, 20, interval=0.5, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{what}: read {last} expected {expected}") from exc


async def test_every_finished_run_is_counted_once_in_its_minute_by_outcome_and_a_tenant_sees_its_own(
        secure_services: Services, admin: Client, tmp_path: Path) -> None:
    # Given two tracker replicas and two agents
    await secure_services.start_system(agents=2)
    secure_services.start("run_tracker-2", "run_tracker")
    await secure_services["run_tracker-2"].wait_logged("run tracker ready", 30)
    acme, globex = Client(admin.nc, tenant="acme"), Client(admin.nc, tenant="globex")

    # When acme's runs succeed, fail (a non-retryable exit code) and die (no attempt left), and globex's succeed
    # and one is cancelled by the api while it runs (an end the trackers do not write)
    acme_jobs = (await _create(acme, "ok", 5, ["true"])
                 + await _create(acme, "bad", 3, ["sh", "-c", "exit 3"], retry={"non_retryable_exit_codes": [3]})
                 + await _create(acme, "gone", 2, ["sh", "-c", "exit 1"], retry={"max_attempts": 1}))
    globex_jobs = await _create(globex, "ok", 2, ["true"])
    await globex.call("jobs.create", _job("long", ["sleep", "300"]))

    async def running() -> str | None:
        items = (await globex.call("runs.list", {"job": "long"}))["items"]
        return str(items[0]["run_id"]) if items and items[0]["state"] == "running" else None

    await globex.call("runs.cancel", {"run_id": await wait_for(running, 30, what="long to run")})
    acme_runs = await _ended(acme, acme_jobs)
    globex_runs = await _ended(globex, [*globex_jobs, "long"])
    assert Counter(r["state"] for r in acme_runs) == {"succeeded": 5, "failed": 3, "dead": 2}
    assert Counter(r["state"] for r in globex_runs) == {"succeeded": 2, "cancelled": 1}

    # Then each is counted once, in the minute it finished, by outcome: the admin reads the cluster's counts,
    # each tenant its own and nothing of the other's
    await _counts_become(admin, _expected(acme_runs + globex_runs), "the cluster's counts")
    await _counts_become(acme, _expected(acme_runs), "acme's counts")
    await _counts_become(globex, _expected(globex_runs), "globex's counts")
    # and a few flushes later nothing was counted twice
    await asyncio.sleep(3)
    assert await _counts(admin) == _expected(acme_runs + globex_runs)
    # and the CLI prints the same figures
    cli = run_cli(secure_services.server.url, "--creds", str(tmp_path / "admin.creds"), "runs", "finished", "-o",
                  "json")
    assert cli.returncode == 0, cli.stderr
    assert {datetime.fromisoformat(item["minute"]): item["counts"] for item in json.loads(cli.stdout)["items"]} \
        == _expected(acme_runs + globex_runs)

    # When every tracker is killed and a new one starts (it counts afresh from the records: none lowered, none
    # raised twice), then more runs end
    secure_services["run_tracker"].kill9()
    secure_services["run_tracker-2"].kill9()
    secure_services.start("run_tracker-3", "run_tracker")
    await secure_services["run_tracker-3"].wait_logged("run tracker ready", 30)
    more = await _ended(acme, await _create(acme, "after", 3, ["true"]))
    await _counts_become(admin, _expected(acme_runs + globex_runs + more), "the counts after the trackers' restart")
    await _counts_become(acme, _expected(acme_runs + more), "acme's counts after the restart")
    await asyncio.sleep(3)
    assert await _counts(globex) == _expected(globex_runs)


async def test_a_span_out_of_bounds_is_refused_naming_the_field(secure_services: Services, admin: Client) -> None:
    await secure_services.start_system(agents=0, core=("api",))
    for minutes in (0, 1441, "60"):
        with pytest.raises(ApiError, match="minutes") as refused:
            await Client(admin.nc, tenant="acme").call("runs.finished", {"minutes": minutes})
        assert refused.value.code == "invalid" and refused.value.field == "minutes"
    # Nothing finished yet: an empty span, for the admin and for a tenant
    assert (await admin.call("runs.finished", {}))["items"] == []
    assert (await Client(admin.nc, tenant="acme").runs.finished(minutes=1440)).items == []
