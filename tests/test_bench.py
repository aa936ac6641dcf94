"""The benchmarks' runner (`python -m bench.run`): it leaves a shared database server's settings
alone unless told otherwise."""

from __future__ import annotations

import pytest

from bench import run

SMALL_POOL = 128 * 1024**2


def test_bench_leaves_the_buffer_pool_alone_without_the_flag():
    args = run.parse_args(["context"])
    assert args.grow_buffer_pool is False
    assert run.buffer_pool_statement(SMALL_POOL, args.grow_buffer_pool) is None


def test_bench_grows_the_buffer_pool_only_with_the_flag():
    args = run.parse_args(["--grow-buffer-pool", "context"])
    assert args.grow_buffer_pool is True and args.names == ["context"]
    assert run.buffer_pool_statement(SMALL_POOL, True) == \
        "SET GLOBAL innodb_buffer_pool_size = 1073741824"
    assert run.buffer_pool_statement(run.BUFFER_POOL_BYTES, True) is None


def test_bench_help_names_the_flag_and_what_it_changes(capsys):
    with pytest.raises(SystemExit):
        run.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--grow-buffer-pool SET GLOBAL innodb_buffer_pool_size" in help_text
    assert "changes the whole MariaDB server" in help_text

