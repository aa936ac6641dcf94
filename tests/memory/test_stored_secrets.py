"""Rows stored before credentials were refused (SPEC §11): `flask --app wsgi memories
find-secrets` lists the memories the rules would refuse today (id, user, kind), whatever their
status, and changes nothing."""

from __future__ import annotations

from tests.conftest import snapshot

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6" * 3


def test_find_secrets_lists_the_stored_rows_that_hold_a_credential(app, runner, memories):
    token = memories.add(7, "GitHub token: " + GITHUB_TOKEN, source="AUTO")
    memories.add(7, "输出报告用中文")
    password = memories.add(8, "我的数据库密码是 S3cr3t!2024", status="DISMISSED")
    memories.add(8, "密码策略至少 12 位", scope="PROJECT", project_key="mao")
    card = memories.add(9, "信用卡 4111 1111 1111 1111", scope="PROJECT", project_key="mao")
    before = snapshot(app)
    result = runner.invoke(args=["memories", "find-secrets", "--batch", "2"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"{token}\t7\tgithub\tGitHub 令牌",
                                          f"{password}\t8\tpassword\t密码或密钥",
                                          f"{card}\t9\tpayment_card\t银行卡号"]
    assert "scanned 5 memories" in result.stderr and "3 hold a credential" in result.stderr
    assert snapshot(app) == before


def test_find_secrets_on_clean_memories_lists_nothing(runner, memories):
    memories.bulk(7, [f"事实 {i}" for i in range(5)])
    result = runner.invoke(args=["memories", "find-secrets"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "scanned 5 memories" in result.stderr and "0 hold a credential" in result.stderr
