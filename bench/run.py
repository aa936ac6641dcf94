"""Run the benchmarks and print one table each: `.venv/bin/python -m bench.run [names…]`.

Every figure is printed next to a baseline measured in the same run (absolute times on a shared
2-core machine are noise; ratios are not).
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess

from bench import common
from bench.common import Table

BENCHMARKS = ("context", "webhook", "worker", "peer")


def prepare_database() -> None:
    """The bench database exists and is at the latest migration (data kept between runs)."""
    with contextlib.closing(common.raw_connection(None)) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{common.BENCH_DB}` CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci")
        # The 2 M-row table wants more than MariaDB's 128 MB default buffer pool.
        cur.execute("SELECT @@innodb_buffer_pool_size")
        if cur.fetchone()[0] < 1024**3:
            cur.execute(f"SET GLOBAL innodb_buffer_pool_size = {1024**3}")
    subprocess.run([str(common.VENV_BIN / "flask"), "--app", "wsgi", "db", "upgrade"],
                   cwd=common.ROOT, env=common.app_env(), check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], default=[])
    parser.add_argument("--reseed", action="store_true", help="reload the 2 M context rows")
    args = parser.parse_args()
    names = args.names or list(BENCHMARKS)
    prepare_database()
    tables: list[Table] = []
    if "context" in names:
        from bench import context_read

        context_read.run(tables, force_seed=args.reseed)
    if "webhook" in names:
        from bench import webhook_ingest

        webhook_ingest.run(tables)
    if "worker" in names:
        from bench import worker_jobs

        worker_jobs.run(tables)
    if "peer" in names:
        from bench import peer

        peer.run(tables)
    for table in tables:
        print(table.render())


if __name__ == "__main__":
    main()
