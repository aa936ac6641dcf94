"""Run the benchmarks and print one table each: `.venv/bin/python -m bench.run [names…]`.

`bench.run quality …` is the memory-quality benchmark (`bench.quality`, its own options; see
`bench.run quality --help`): it needs a model, not the bench database.

Every figure is printed next to a baseline measured in the same run (absolute times on a shared
2-core machine are noise; ratios are not).
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys

from bench import common
from bench.common import Table

BENCHMARKS = ("context", "webhook", "worker", "peer")


BUFFER_POOL_BYTES = 1024**3


def buffer_pool_statement(current_bytes: int, grow: bool) -> str | None:
    """The statement that grows the server's InnoDB buffer pool for the 2 M-row context table,
    or None. `SET GLOBAL` changes the whole server, every other database on it included, so it
    runs only when asked for (`--grow-buffer-pool`)."""
    if grow and current_bytes < BUFFER_POOL_BYTES:
        return f"SET GLOBAL innodb_buffer_pool_size = {BUFFER_POOL_BYTES}"
    return None


def prepare_database(*, grow_buffer_pool: bool) -> None:
    """The bench database exists and is at the latest migration (data kept between runs)."""
    with contextlib.closing(common.raw_connection(None)) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{common.BENCH_DB}` CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci")
        cur.execute("SELECT @@innodb_buffer_pool_size")
        current = cur.fetchone()[0]
        statement = buffer_pool_statement(current, grow_buffer_pool)
        if statement is not None:
            cur.execute(statement)
        elif current < BUFFER_POOL_BYTES:
            print(f"note: innodb_buffer_pool_size is {current // 1024**2} MB; the context "
                  "bench reads from disk. --grow-buffer-pool raises it to 1 GB for the whole "
                  "server.", file=sys.stderr)
    subprocess.run([str(common.VENV_BIN / "flask"), "--app", "wsgi", "db", "upgrade"],
                   cwd=common.ROOT, env=common.app_env(), check=True, capture_output=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], default=[])
    parser.add_argument("--reseed", action="store_true", help="reload the 2 M context rows")
    parser.add_argument("--grow-buffer-pool", action="store_true",
                        help="SET GLOBAL innodb_buffer_pool_size to 1 GB when it is smaller: "
                             "changes the whole MariaDB server, so only on a server of your "
                             "own (default: leave the server's settings alone)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["quality"]:
        from bench.quality import cli

        cli.main(argv[1:])
        return
    args = parse_args(argv)
    names = args.names or list(BENCHMARKS)
    prepare_database(grow_buffer_pool=args.grow_buffer_pool)
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
