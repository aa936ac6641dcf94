"""A stock forking `rq.Worker` in a process the size of ours, for `bench.run worker`.

The service's app is built and warmed up as `flask --app wsgi worker` does before it forks
(`jobs.worker.run_worker`); then RQ's own `Worker` class works a queue of no-op jobs in burst
mode. What forking a work horse costs RQ itself from a process as big as our worker, so the
bench can tell the share of a forked job that is the process's size from the share that is
the job's.

    python -m bench.rq_sized_worker <redis url> <queue>
"""

from __future__ import annotations

import sys

import redis
from rq import Queue, Worker

from app.extraction import llm, runner
from wsgi import app


def main(url: str, queue_name: str) -> None:
    with app.app_context():
        llm.warm_up()
        runner.warm_up()
    connection = redis.Redis.from_url(url)
    Worker([Queue(queue_name, connection=connection)], connection=connection).work(
        burst=True, logging_level="WARNING")


if __name__ == "__main__":
    main(*sys.argv[1:3])
