"""Benchmark: the credential detector (SPEC §11) — `.venv/bin/python -m bench.credentials`.

- per call, on 120- and 500-character contents (the extracted and the manual limits): plain
  prose in Chinese and English (the common case, settled by the cheap gates), technical text
  that passes every gate (URLs, `token`, `密钥` …: every detector runs) and a content whose
  credential sits at its very end; next to what every write does with the same content anyway
  (`rules.normalize` + `rules.dedup_hash`);
- `flask --app wsgi memories find-secrets` over ROWS stored memories (2 M by default, seeded
  once into the bench database with a realistic mix: a tenth technical, one in 10,000 holding a
  credential), next to the same streamed read without the detector.

The bench database is `BENCH_DB` (default memory_bench), migrated like `bench.run`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import subprocess
import sys
import time
import timeit

from app.memory import rules, secrets
from bench.common import (
    ROOT,
    VENV_BIN,
    Table,
    app_env,
    insert_memory_rows,
    ratio,
    raw_connection,
)

ROWS = 2_000_000
USERS = 10_000
# The first user id of the seeded rows, far from the other benches' users.
USER_BASE = 5_000_000
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6" * 3

PROSE_ZH = ("用户偏好用中文输出报告,代码评审时先看测试再看实现;该仓库测试用 Vitest,构建用 pnpm 与 "
            "turbo,发布前需要跑 lint 与类型检查。")
PROSE_EN = ("The user prefers reports in English; this repository tests with pytest, builds "
            "with uv and releases on Fridays after the lint and type checks pass. ")
# Passes every gate (a long URL, '://' with '@', `secret:`), holds no credential.
TECHNICAL = ("部署用 https://deploy@github.com/org/repo/actions/workflows/release.yml 触发,"
             "secret: keep tests small;密钥轮换见 wiki,password policy at least 12 characters. ")


def _sized(text: str, size: int) -> str:
    return (text * (size // len(text) + 1))[:size]


def contents(size: int) -> dict[str, str]:
    """The contents measured at `size` code points."""
    credential = "GitHub token: " + GITHUB_TOKEN
    return {"prose (zh)": _sized(PROSE_ZH, size), "prose (en)": _sized(PROSE_EN, size),
            "technical (every gate passed)": _sized(TECHNICAL, size),
            "credential at the end": _sized(TECHNICAL, size - len(credential)) + credential}


def per_call_us(function, text: str) -> float:
    """Best of five runs of the mean per-call CPU time, in µs: CPU time, because on a shared
    machine wall time also counts the turns other processes take."""
    number = 2_000
    runs = timeit.repeat(lambda: function(text), number=number, repeat=5,
                         timer=time.process_time)
    return min(runs) / number * 1e6


def _write_cost(text: str) -> None:
    rules.dedup_hash("USER", None, rules.normalize(text))


def detector_table() -> Table:
    table = Table("Credential detector: cost per call (rules.credential)",
                  ["content", "chars", "detector", "normalize + dedup hash", "ratio"])
    for size in (120, 500):
        for name, text in contents(size).items():
            found = secrets.find(text)
            assert (found is None) == ("credential" not in name), (name, found)
            ours, base = per_call_us(rules.credential, text), per_call_us(_write_cost, text)
            table.add(name, size, f"{ours:.1f} µs", f"{base:.1f} µs", ratio(ours, base))
    table.notes.append("prose is settled by the gates (a token-shaped run, a keyword, "
                       "'://' with '@', a PEM header) before any detect-secrets plugin runs")
    return table


# ---- find-secrets over the seeded table ------------------------------------------------------

def _content(i: int) -> str:
    if i % 10_000 == 7:
        return f"第 {i} 条:部署用的 GitHub token 是 {GITHUB_TOKEN}"
    if i % 10 == 3:
        return f"第 {i} 条:{TECHNICAL.strip()}"
    return f"第 {i} 条:" + (PROSE_ZH if i % 2 else PROSE_EN).strip()


def seeded(cur) -> int:
    cur.execute("SELECT COUNT(*) FROM memory_item WHERE user_id >= %s", (USER_BASE,))
    return cur.fetchone()[0]


def seed(rows: int) -> float:
    """`rows` memories of USERS users (kept between runs); seconds spent, 0 when already there."""
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        if seeded(cur) == rows:
            return 0.0
        began = time.perf_counter()
        cur.execute("DELETE FROM memory_item WHERE user_id >= %s", (USER_BASE,))
        cur.execute("SET unique_checks = 0")
        at = "2026-12-01 00:00:00.000000"
        batch: list[tuple] = []
        for i in range(rows):
            content = _content(i)
            batch.append((USER_BASE + i % USERS, "USER", "", content, "AUTO", "ACTIVE",
                          rules.dedup_hash("USER", None, content), at, at))
            if len(batch) == 10_000 or i == rows - 1:
                insert_memory_rows(cur, batch)
                batch = []
        cur.execute("SET unique_checks = 1")
        return time.perf_counter() - began


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str]) -> tuple[float, float, str, str]:
    """(wall s, CPU s of the command's process, stdout, stderr): the CPU figure holds on a
    shared machine, where the wall clock also counts other processes' turns."""
    began, cpu = time.perf_counter(), _children_cpu_s()
    done = subprocess.run(command, cwd=ROOT, env=app_env(), capture_output=True, text=True,
                          check=True)
    return time.perf_counter() - began, _children_cpu_s() - cpu, done.stdout, done.stderr


READ_ONLY = """
import time
from app import create_app
from app.memory import repository
from app.memory.stored_secrets import BATCH
app = create_app()
with app.app_context():
    began = time.perf_counter()
    rows = sum(len(part) for part in repository.every_content(BATCH))
    print(rows, time.perf_counter() - began)
"""


def find_secrets_table(rows: int) -> Table:
    seconds_seeding = seed(rows)
    table = Table(f"flask --app wsgi memories find-secrets over {rows:,} seeded memories",
                  ["measure", "value", "baseline", "ratio / note"])
    _, read_cpu, read, _ = _timed([str(VENV_BIN / "python"), "-c", READ_ONLY])
    read_rows, read_s = int(read.split()[0]), float(read.split()[1])
    wall, cpu, stdout, stderr = _timed([str(VENV_BIN / "flask"), "--app", "wsgi", "memories",
                                        "find-secrets"])
    found = len(stdout.splitlines())
    expected = sum(1 for i in range(rows) if i % 10_000 == 7)
    table.add("find-secrets, whole command", f"{wall:.1f} s ({read_rows / wall:,.0f} rows/s)",
              f"streamed read alone {read_s:.1f} s", ratio(wall, read_s))
    table.add("  its CPU time", f"{cpu:.1f} s", f"read alone {read_cpu:.1f} s (process)",
              ratio(cpu, read_cpu))
    table.add("rows listed", f"{found:,}", f"{expected:,} seeded with a credential",
              stderr.strip().splitlines()[-1])
    table.notes.append(f"seeding took {seconds_seeding:.0f} s" if seconds_seeding
                       else "rows seeded by an earlier run")
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=ROWS, help="memories to scan (default 2 M)")
    parser.add_argument("--no-scan", action="store_true", help="the per-call figures only")
    args = parser.parse_args(argv)
    tables = [detector_table()]
    if not args.no_scan:
        from bench.run import prepare_database

        prepare_database(grow_buffer_pool=False)
        tables.append(find_secrets_table(args.rows))
    for table in tables:
        print(table.render())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
