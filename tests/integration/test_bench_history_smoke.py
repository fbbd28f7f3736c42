"""bench/listing.py's long-history scenario (`--history`) does not rot: it runs at a tiny size and reports every
view at every size (make test-bench runs it with the other scenarios' smoke tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.run import run_scenario


@pytest.mark.bench
@pytest.mark.timeout(300)
def test_the_history_scenario_reports_each_view_at_each_size(tmp_path: Path) -> None:
    results = run_scenario("bench.listing", ["--history", "5,20", "--jobs", "2", "--requests", "2", "--reps", "1"],
                           tmp_path)
    assert [r["bench"] for r in results] == ["listing_history"], results
    result = results[0]
    for view in ("job", "jobs_page", "ui_jobs"):
        for size in (5, 20):
            assert result[f"{view}_{size}_p50_ms"]["median"] > 0, (view, size, result)
