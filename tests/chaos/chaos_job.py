"""The chaos job: log every attempt as `run_id attempt token pid`, then commit its one real effect through once().

argv: OUT_DIR FIRST_SLEEP LATER_SLEEP [GATE] — attempt 1 sleeps FIRST_SLEEP seconds before its effect, later ones
LATER_SLEEP. With GATE, attempt 1 first waits (up to 60 s) for that file to exist, so a test can hold it until the
rest of the cluster is ready. Lines are appended with O_APPEND and fsync, so a kill -9 right after leaves them on disk.
"""

import os
import sys
import time

from jetcron.sdk.once import AlreadyClaimed, once


def append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def main() -> None:
    out, first_sleep, later_sleep = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    run_id, attempt = os.environ["JETCRON_RUN_ID"], os.environ["JETCRON_ATTEMPT"]
    token = os.environ["JETCRON_FENCING_TOKEN"]
    append(os.path.join(out, "attempts.log"), f"{run_id} {attempt} {token} {os.getpid()}\n")
    if attempt == "1" and len(sys.argv) > 4:
        opened = time.monotonic() + 60
        while not os.path.exists(sys.argv[4]) and time.monotonic() < opened:
            time.sleep(0.05)
    time.sleep(first_sleep if attempt == "1" else later_sleep)
    deadline = time.monotonic() + 30
    while True:
        try:
            with once(os.environ["JETCRON_IDEMPOTENCY_KEY"] + ":effect") as first:
                if first:
                    append(os.path.join(out, "effects.log"), f"{run_id} {attempt} {token}\n")
            return
        except AlreadyClaimed:
            # An earlier attempt (paused, cut off) may still be inside its effect: wait for it to commit or fail.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


if __name__ == "__main__":
    main()
