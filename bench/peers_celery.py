"""The Celery side of `bench/peers.py`: one no-op task that counts itself, on a Redis broker with no persistence.

The worker is `celery -A bench.peers_celery worker --pool prefork --concurrency 2` (the machine's two cores), with
the broker's URL in PEERS_BROKER. Results are ignored (no result backend), as a fire-and-forget job queue runs.
A task's only work is one INCR on the broker's Redis, so that the bench knows when the queue has drained: the
first and the last task each note their wall time, and the drain rate is the tasks between them over that time.
"""

from __future__ import annotations

import argparse
import os
import time

import redis
from celery import Celery

BROKER = os.environ.get("PEERS_BROKER", "redis://127.0.0.1:6379/0")
DONE, FIRST, LAST = "peers:done", "peers:first", "peers:last"

app = Celery("peers", broker=BROKER)
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)
_counter = redis.Redis.from_url(BROKER)
"""redis-py opens its connections afresh in each forked pool process (its pool checks the pid)."""


@app.task(name="peers.noop")
def noop(total: int) -> None:
    done = int(_counter.incr(DONE))
    if done == 1:
        _counter.set(FIRST, repr(time.time()))
    if done == total:
        _counter.set(LAST, repr(time.time()))


def enqueue(tasks: int) -> None:
    """Put `tasks` no-op tasks on the broker's queue through one producer connection."""
    with app.producer_or_acquire() as producer:
        for _ in range(tasks):
            noop.apply_async((tasks,), producer=producer)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--enqueue", type=int, required=True, help="how many tasks to put on the queue")
    enqueue(parser.parse_args().enqueue)
