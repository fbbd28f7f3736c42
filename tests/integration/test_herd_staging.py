"""A herd due at one instant is staged earlier than the horizon, at the herd rate, and still starts on time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from harness import Services, wait_for

from jetcron.sdk.client import Client

HERD = 60
RATE = 10.0  # JETCRON_TRIGGER_HERD_RATE: the 60th job's second needs 5.9 s of staging, the horizon gives 1 s
HORIZON = 1.0


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_a_herd_is_staged_ahead_at_the_herd_rate_and_starts_at_its_due_time(
        services: Services, client: Client) -> None:
    # Given 60 one-off jobs due at the same instant, a staging horizon of 1 s and a herd rate of 10 runs/s
    await services.start_system(agents=1, JETCRON_TRIGGER_HORIZON=str(HORIZON), JETCRON_TRIGGER_HERD_RATE=str(RATE),
                                JETCRON_AGENT_SIM="true")
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=12)
    for i in range(HERD):
        # Tiny resources: the one agent has room for the whole herd at once (staged runs hold their place)
        await client.call("jobs.create", {"spec": {"name": f"herd-{i:02d}", "command": ["true"],
                                                   "resources": {"cpu": 0.01, "memory_mb": 1},
                                                   "schedule": {"kind": "at", "at": due.isoformat()}}})
    assert datetime.now(UTC) < due - timedelta(seconds=7), "the herd was created before its staging began"

    # When the instant has passed and every run has ended
    async def ended() -> list[dict[str, Any]] | None:
        page = await client.call("runs.list", {"limit": 1000})
        runs = [r for r in page["items"] if r["job"].startswith("herd-")]
        return runs if len(runs) == HERD and all(r["state"] == "succeeded" for r in runs) else None

    runs: list[dict[str, Any]] = await wait_for(ended, 40, what="every herd run to succeed")

    # Then the runs were recorded spread back from the instant, up to (HERD - 1) / RATE seconds ahead, far
    # beyond the 1 s horizon; placement assigned each at once; and none started before the instant.
    ahead = sorted((due - at(r["created_at"])).total_seconds() for r in runs)
    assert ahead[-1] > 4.0, f"the earliest record was only {ahead[-1]:.2f} s ahead"
    assert ahead[-1] < (HERD - 1) / RATE + 0.5, f"recorded {ahead[-1]:.2f} s ahead, before its spread began"
    assert sum(1 for a in ahead if a > 2 * HORIZON) >= 30, f"record leads {ahead}"
    assigned_ahead = [(due - at(r["assigned_at"])).total_seconds() for r in runs]
    assert sum(1 for a in assigned_ahead if a > 2 * HORIZON) >= 30, f"assignment leads {sorted(assigned_ahead)}"
    assert all(at(r["scheduled_at"]) == due for r in runs)
    early = [r["run_id"] for r in runs if at(r["started_at"]) < due]
    assert not early, f"started before their due time: {early}"
    assert all(len(r["history"]) == 1 for r in runs), "a herd run was attempted twice"
