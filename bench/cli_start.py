"""How long the `jetcron` command takes to start: `jetcron --help`, and `jetcron jobs list` against a running server,
each the median of repeated runs, beside `python -c pass` (the interpreter's own start) and with the modules it
imports counted. Most of a CLI call's time is its imports; the target is under 0.2 s for both.

    python -m bench.cli_start --reps 15
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from bench.common import emit, summary, system

JETCRON = [sys.executable, "-c", "from jetcron.cli.main import main; main()"]


def timed(argv: list[str], env: dict[str, str], reps: int) -> list[float]:
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        seconds.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')[-2000:]}")
    return seconds


def imported(argv: list[str], env: dict[str, str]) -> int:
    """Modules the command imports (python -X importtime's lines)."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, check=False)
    return sum(1 for line in done.stderr.decode(errors="replace").splitlines() if line.startswith("import time:")) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETCRON_")}
    with system(sync_always=False, services=("api",)) as sys_, tempfile.TemporaryDirectory() as home:
        listing_env = {**env, "JETCRON_NATS_URL": sys_.server.url, "XDG_CONFIG_HOME": home}
        listing = [*JETCRON, "jobs", "list"]
        timed(listing, listing_env, 1)  # the api answers before the repetitions begin
        figures = {
            "python_pass_s": summary(timed([sys.executable, "-c", "pass"], env, args.reps)),
            "help_s": summary(timed([*JETCRON, "--help"], env, args.reps)),
            "jobs_list_s": summary(timed(listing, listing_env, args.reps)),
            "help_modules": imported([*JETCRON, "--help"], env),
            "jobs_list_modules": imported(listing, listing_env),
        }
    emit({"bench": "cli_start", "reps": args.reps, **figures})


if __name__ == "__main__":
    main()
