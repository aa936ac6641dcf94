"""Credentials are never stored (SPEC §11), on the machine paths: an extracted candidate holding
one is dropped and the rest of the answer applies, the outcome counting it (`secretsDropped`);
a D15 merge holding one is not applied; the prompt tells the model never to propose one. Each
job runs through the real RQ worker against MariaDB and the scripted OpenAI-compatible server."""

from __future__ import annotations

from datetime import timedelta

from app.db_types import utcnow
from tests.completions import USER_ID, memory_rows

GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6" * 3
FACT = "输出报告用中文"
EARLIER = utcnow() - timedelta(days=3)


def test_a_candidate_holding_a_credential_is_dropped_and_the_rest_applied(extract, memories):
    outcome = extract([{"type": "user", "content": "GitHub 令牌是 " + GITHUB_TOKEN},
                       {"type": "user", "content": FACT},
                       {"type": "project", "content": "生产库 mysql://deploy:S3cr3t@db/app"}])
    assert (outcome["status"], outcome["reason"]) == ("succeeded", "applied")
    assert (outcome["inserted"], outcome["dropped"], outcome["secretsDropped"]) == (1, 0, 2)
    assert memories.count(USER_ID) == memories.count(USER_ID, content=FACT) == 1


def test_an_answer_of_credentials_only_stores_nothing(extract, memories):
    outcome = extract([{"type": "user", "content": "我的数据库密码是 S3cr3t!2024"}])
    assert outcome["status"] == "succeeded"
    assert (outcome["inserted"], outcome["secretsDropped"]) == (0, 1)
    assert memories.count(USER_ID) == 0


def test_an_update_to_words_holding_a_credential_is_dropped(extract, memories):
    known = memories.add(USER_ID, "部署用 GitHub Actions", source="AUTO")
    outcome = extract([{"type": "user", "action": "update", "existingId": known,
                        "content": "部署用 GitHub Actions,令牌 " + GITHUB_TOKEN}])
    assert (outcome["updated"], outcome["secretsDropped"]) == (0, 1)
    assert memories.get(known)["content"] == "部署用 GitHub Actions"


def test_a_credential_first_in_a_full_pool_leaves_the_next_insert_its_room(extract, memories):
    # D14: the first insert's room is found with the lock; a dropped credential must not take it.
    rows = memories.bulk(USER_ID, [f"auto-{i:03d}" for i in range(200)], source="AUTO",
                         updated_at=EARLIER)
    outcome = extract([{"type": "user", "content": "口令:Tr0ub4dor&3"},
                       {"type": "user", "content": FACT}])
    assert (outcome["inserted"], outcome["demoted"], outcome["secretsDropped"]) == (1, 1, 1)
    assert memories.get(rows[0])["status"] == "DISMISSED"
    assert memories.count(USER_ID, content=FACT, status="ACTIVE") == 1


def test_the_extraction_prompt_tells_the_model_never_to_propose_credentials(extract, llm):
    extract([], lastUserMessage="记住:我的 GitHub 令牌放在 1Password 里,别的都按默认来。")
    system = llm.requests[0].messages[0]["content"]
    assert "绝不抽取凭据" in system
    for kind in ("密码", "API 密钥", "访问令牌", "私钥", "银行卡号", "身份证号"):
        assert kind in system


def test_a_merge_holding_a_credential_is_not_applied_and_its_sources_kept(app, consolidate,
                                                                          memories):
    a, b, c, d = memories.bulk(USER_ID, ["数据库用户是 deploy", "数据库密码是 S3cr3t!2024",
                                         "仓库用 pnpm", "仓库要用 pnpm"], source="AUTO",
                               updated_at=EARLIER)
    before = memory_rows(app)
    outcome = consolidate([{"op": "merge", "sourceIds": [a, b],
                            "content": "数据库账号 deploy,密码是 S3cr3t!2024"},
                           {"op": "keep", "sourceIds": [c]}, {"op": "drop", "sourceIds": [d]}])
    assert (outcome["status"], outcome["merges"], outcome["drops"]) == ("succeeded", 0, 1)
    assert (outcome["inserted"], outcome["secretsDropped"]) == (0, 1)
    after = memory_rows(app)
    assert d not in after
    assert all(after[i] == before[i] for i in (a, b, c))
