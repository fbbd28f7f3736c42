"""Scenario 6: where the hottest service spends its time during scenario 1 (py-spy, collapsed stacks)."""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from bench.common import emit, system
from bench.throughput import _submit_and_wait


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime; with `children`, also that of its children it has waited for (a real agent's runs)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def top_frames(raw: Path, n: int = 12) -> list[dict[str, object]]:
    """Self samples per innermost frame, from py-spy's raw (collapsed) output."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        total += int(count)
        counts[stack.split(";")[-1].strip()] += int(count)
    return [{"frame": frame, "share": round(c / max(1, total), 3)} for frame, c in counts.most_common(n)]


def run(runs: int, seconds: int, service: str | None = None, keep: Path | None = None, mode: str = "sim",
        rate: int = 100) -> dict[str, object]:
    """`mode`: "sim" (2 sim agents, scenario 1a) or "true" (4 agents running `true`, scenario 1b; an agent's CPU
    then includes its children's)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    sim = mode == "sim"
    with system(sync_always=True, agents=2 if sim else 4, sim=sim) as jc:
        before = {name: _cpu_seconds(p.pid, not sim) for name, p in jc.procs.items()}
        result: dict[str, object] = {}
        worker = threading.Thread(target=lambda: result.update(zip(
            ("elapsed", "done"), asyncio.run(_submit_and_wait(jc.url, runs, ["true"], "prof")), strict=True)))
        worker.start()
        worker.join(timeout=seconds / 3)
        spent = {name: _cpu_seconds(p.pid, not sim) - before[name] for name, p in jc.procs.items()}
        hottest = service or max(spent, key=lambda k: spent[k])
        raw = jc.base / "profile.txt"
        try:
            subprocess.run([spy, "record", "--format", "raw", "-o", str(raw), "-d", str(seconds // 2), "-r", str(rate),
                            "-p", str(jc.procs[hottest].pid), "--nonblocking"], check=False, capture_output=True)
        except OSError as exc:  # no py-spy: still report where the CPU went, per service
            result["profiler_error"] = str(exc)
        worker.join()
        if keep is not None and raw.exists():
            shutil.copyfile(raw, keep)
        done = int(result.get("done", 0) or 0)
        after = {name: _cpu_seconds(p.pid, not sim) - before[name] for name, p in jc.procs.items()}
        return {"bench": "profile", "mode": mode, "runs": runs,
                ("profiled_service" if service else "hottest_service"): hottest,
                "cpu_ms_per_run": {k: round(v / max(1, done) * 1000, 3) for k, v in after.items()},
                "top_frames": top_frames(raw) if raw.exists() else [],
                **({"profiler_error": result["profiler_error"]} if "profiler_error" in result else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=6000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--service", help="profile this process (api, placement, run_tracker, trigger, agent-1...) "
                        "instead of the busiest one")
    parser.add_argument("--keep", type=Path, help="copy py-spy's collapsed stacks to this file")
    parser.add_argument("--mode", choices=["sim", "true"], default="sim",
                        help="sim agents (scenario 1a), or 4 agents running `true` (1b)")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    args = parser.parse_args()
    emit(run(args.runs, args.seconds, args.service, args.keep, args.mode, args.rate))


if __name__ == "__main__":
    main()
