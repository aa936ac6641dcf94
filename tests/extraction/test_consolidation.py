"""The consolidation job (seed §10.3 D15, §10.6): what the model sees, what its plan may do, and
that a group changes completely or not at all. Each job runs through the real RQ worker against
MariaDB and the scripted OpenAI-compatible server."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from app.db_types import utcnow
from app.extensions import db
from app.extraction.prompt import CONSOLIDATION_SYSTEM_PROMPT
from app.memory import repository, rules
from app.memory import service as memory_service
from app.memory.memories import UserMemories
from app.memory.models import MemoryItem
from app.memory.rules import Status
from tests.completions import USER_ID, capture_on, memory_rows
from tests.conftest import TEST_DATABASE_URL

OTHER_USER = USER_ID + 1
EARLIER = utcnow() - timedelta(days=3)


def group(memories, contents: list[str], **fields) -> list[int]:
    """Machine-made ACTIVE rows of one group (USER unless fields say otherwise), oldest first."""
    fields.setdefault("source", "AUTO")
    return memories.bulk(USER_ID, contents, updated_at=EARLIER, origin_session_id=55, **fields)


def merge(ids: list[int], content: str) -> dict:
    return {"op": "merge", "sourceIds": ids, "content": content}


def unchanged(app, before: dict, outcome: dict, status: str, reason: str) -> None:
    """The group was abandoned: the outcome says why and no row of any user changed."""
    assert (outcome["status"], outcome["reason"]) == (status, reason), outcome
    assert (outcome["merges"], outcome["drops"], outcome["inserted"]) == (0, 0, 0)
    assert outcome["rowsOut"] == outcome["rowsIn"]
    assert memory_rows(app) == before


# ---- what the model is shown -------------------------------------------------------------

def test_manual_and_dismissed_rows_never_reach_the_prompt(app, consolidate, llm, memories):
    shown = group(memories, ["自动行甲", "自动行乙"]) + \
        group(memories, ["合并行丙"], source="CONSOLIDATED")
    hidden = [memories.add(USER_ID, "手写行"),
              memories.add(USER_ID, "已忽略的自动行", source="AUTO", status="DISMISSED"),
              memories.add(USER_ID, "已忽略的手写行", status="DISMISSED"),
              memories.add(USER_ID, "项目组自动行", scope="PROJECT", project_key="mao",
                           source="AUTO"),
              memories.add(OTHER_USER, "别人的自动行", source="AUTO")]
    consolidate([])
    (request,) = llm.requests
    assert request.messages[0]["content"] == CONSOLIDATION_SYSTEM_PROMPT
    prompt = request.prompt
    for item_id, content in zip(shown, ["自动行甲", "自动行乙", "合并行丙"], strict=True):
        assert f"- id={item_id} {content}" in prompt
    for item_id in hidden:
        assert f"id={item_id} " not in prompt
    assert "手写" not in prompt and "已忽略" not in prompt and "项目组" not in prompt
    assert "别人" not in prompt
    # One MANUAL row is injected with the group, so the machine rows may keep 30 - 1.
    assert "分组:[用户]" in prompt and "不超过 29 条" in prompt


def test_a_project_group_shows_only_that_projects_rows(app, consolidate, llm, memories):
    group(memories, ["mao 项目行一", "mao 项目行二"], scope="PROJECT", project_key="mao")
    group(memories, ["blog 项目行"], scope="PROJECT", project_key="blog")
    group(memories, ["用户行"])
    consolidate([], project_key="mao")
    prompt = llm.requests[0].prompt
    assert "分组:[项目:mao]" in prompt and "不超过 60 条" in prompt
    assert "mao 项目行一" in prompt and "mao 项目行二" in prompt
    assert "blog" not in prompt and "用户行" not in prompt


def test_a_group_with_fewer_than_two_machine_rows_is_skipped_without_a_call(
        consolidate, llm, memories):
    group(memories, ["唯一的自动行"])
    memories.bulk(USER_ID, [f"手写行{i}" for i in range(40)])
    outcome = consolidate(None)
    assert (outcome["status"], outcome["reason"], outcome["rowsIn"]) == \
        ("skipped", "too_few_rows", 1)
    assert llm.requests == []


def test_consolidation_is_skipped_when_auto_capture_is_off(app, consolidate, llm, memories):
    group(memories, ["自动行甲", "自动行乙"])
    capture_on(app, enabled=False)
    outcome = consolidate(None)
    assert (outcome["status"], outcome["reason"]) == ("skipped", "auto_capture_disabled")
    assert llm.requests == []


# ---- merge, keep, drop -------------------------------------------------------------------

@pytest.mark.parametrize("project_key", [None, "mao"])
def test_a_merge_replaces_its_sources_with_one_consolidated_row(
        app, consolidate, memories, project_key):
    fields = {"scope": "PROJECT", "project_key": project_key} if project_key else {}
    a, b, c, kept = group(memories, ["报告用中文", "总结也用中文", "汇报也用中文", "仓库用 pnpm"],
                          **fields)
    other_group = memories.add(USER_ID, "别组的行", source="AUTO", scope="PROJECT",
                               project_key="blog")
    before = memory_rows(app)
    outcome = consolidate([merge([a, b, c], "报告和总结都用中文"),
                           {"op": "keep", "sourceIds": [kept]}], project_key=project_key)
    assert (outcome["status"], outcome["reason"]) == ("succeeded", "consolidated")
    assert (outcome["rowsIn"], outcome["rowsOut"], outcome["merges"], outcome["drops"],
            outcome["inserted"]) == (4, 2, 1, 0, 1)
    assert (outcome["scope"], outcome["projectKey"]) == \
        ("PROJECT" if project_key else "USER", project_key)
    after = memory_rows(app)
    assert a not in after and b not in after and c not in after
    assert after[kept] == before[kept] and after[other_group] == before[other_group]
    (merged,) = [r for r in after.values() if r["source"] == "CONSOLIDATED"]
    scope = "PROJECT" if project_key else "USER"
    assert (merged["user_id"], merged["scope"], merged["project_key"], merged["content"],
            merged["status"], merged["origin_session_id"], merged["dedup_hash"]) == \
        (USER_ID, scope, project_key or "", "报告和总结都用中文", "ACTIVE", None,
         rules.dedup_hash(scope, project_key, "报告和总结都用中文"))
    # It inherits its sources' history, so consolidating does not reorder the injection.
    assert merged["created_at"] == before[a]["created_at"]
    assert merged["updated_at"] == before[c]["updated_at"]


def test_drop_deletes_the_redundant_rows(app, consolidate, memories):
    keep, b, c = group(memories, ["报告用中文", "报告要用中文", "输出报告请用中文"])
    before = memory_rows(app)
    outcome = consolidate([{"op": "keep", "sourceIds": [keep]},
                           {"op": "drop", "sourceIds": [b, c]}])
    assert (outcome["status"], outcome["rowsOut"], outcome["merges"], outcome["drops"]) == \
        ("succeeded", 1, 0, 2)
    assert memory_rows(app) == {keep: before[keep]}


def test_rows_no_operation_names_are_kept(app, consolidate, memories):
    a, b, c = group(memories, ["报告用中文", "总结用中文", "仓库用 pnpm"])
    before = memory_rows(app)
    consolidate([merge([a, b], "报告和总结都用中文")])
    assert memory_rows(app)[c] == before[c]


def test_a_merge_of_exactly_120_code_points_is_accepted(consolidate, memories):
    a, b = group(memories, ["事实一", "事实二"])
    longest = "长" * 60 + " \n\t " + "长" * 59  # 120 once whitespace is folded
    outcome = consolidate(f'[{{"op": "merge", "sourceIds": [{a}, {b}], '
                          f'"content": "{longest.encode("unicode_escape").decode()}"}}]')
    assert outcome["status"] == "succeeded" and outcome["merges"] == 1
    assert memories.count(USER_ID, content=rules.normalize(longest),
                          source="CONSOLIDATED") == 1


@pytest.mark.parametrize("reply", [[], "keeps"])
def test_a_plan_that_only_keeps_changes_nothing(app, consolidate, memories, reply):
    ids = group(memories, ["事实一", "事实二"])
    before = memory_rows(app)
    outcome = consolidate(reply if reply == [] else [{"op": "keep", "sourceIds": ids}])
    assert (outcome["status"], outcome["reason"]) == ("succeeded", "nothing_to_consolidate")
    assert memory_rows(app) == before


# ---- plans that abandon the group --------------------------------------------------------

def test_a_merge_over_120_code_points_abandons_the_group(app, consolidate, memories):
    a, b, c, d, e = group(memories, [f"事实{i}" for i in range(5)])
    before = memory_rows(app)
    outcome = consolidate([merge([a, b], "短的合并"), {"op": "drop", "sourceIds": [e]},
                           merge([c, d], "长" * 121)])
    unchanged(app, before, outcome, "abandoned", "merge_too_long")


def test_a_merge_needs_two_sources(app, consolidate, memories):
    a, b = group(memories, ["事实一", "事实二"])
    before = memory_rows(app)
    outcome = consolidate([merge([a], "改写的事实一"), {"op": "drop", "sourceIds": [b]}])
    unchanged(app, before, outcome, "abandoned", "merge_single_source")


@pytest.mark.parametrize("foreign", ["manual", "dismissed", "other_group", "other_user",
                                     "unknown"])
def test_an_id_outside_the_groups_input_abandons_the_group(app, consolidate, memories,
                                                           foreign):
    a, b, c = group(memories, ["事实一", "事实二", "事实三"])
    foreign_id = {
        "manual": lambda: memories.add(USER_ID, "手写的事实"),
        "dismissed": lambda: memories.add(USER_ID, "已忽略的事实", source="AUTO",
                                          status="DISMISSED"),
        "other_group": lambda: memories.add(USER_ID, "项目的事实", source="AUTO",
                                            scope="PROJECT", project_key="mao"),
        "other_user": lambda: memories.add(OTHER_USER, "别人的事实", source="AUTO"),
        "unknown": lambda: 987654,
    }[foreign]()
    before = memory_rows(app)
    outcome = consolidate([merge([a, foreign_id], "合并了别处的行"), merge([b, c], "好的合并")])
    unchanged(app, before, outcome, "abandoned", "foreign_ids")


@pytest.mark.parametrize("plan", ["within_one_op", "across_ops"])
def test_an_id_named_twice_abandons_the_group(app, consolidate, memories, plan):
    a, b, c = group(memories, ["事实一", "事实二", "事实三"])
    before = memory_rows(app)
    ops = [merge([a, a, b], "合并")] if plan == "within_one_op" else \
        [merge([a, b], "合并"), {"op": "drop", "sourceIds": [c, a]}]
    unchanged(app, before, consolidate(ops), "abandoned", "duplicate_ids")


def test_dropping_every_row_abandons_the_group(app, consolidate, memories):
    ids = group(memories, ["事实一", "事实二"])
    before = memory_rows(app)
    outcome = consolidate([{"op": "drop", "sourceIds": ids}])
    unchanged(app, before, outcome, "abandoned", "drops_everything")


@pytest.mark.parametrize("answer", [
    pytest.param("好的,以下是整理结果:合并一和二", id="prose"),
    pytest.param('[{{"op": "rewrite", "sourceIds": [{a}, {b}], "content": "改写"}}]',
                 id="unknown-op"),
    pytest.param('[{{"op": "merge", "sourceIds": [{a}, {b}]}}]', id="merge-no-content"),
])
def test_an_answer_that_breaks_the_protocol_abandons_the_group(app, consolidate, memories,
                                                               answer):
    """Through the worker; every other way to break it is in test_consolidation_plan.py."""
    a, b, _ = group(memories, ["事实一", "事实二", "事实三"])
    before = memory_rows(app)
    outcome = consolidate(answer.format(a=a, b=b))
    unchanged(app, before, outcome, "abandoned", "invalid_output")


def test_a_garbage_response_body_abandons_the_group(app, consolidate, llm, memories):
    group(memories, ["事实一", "事实二"])
    before = memory_rows(app)
    llm.reply(body=b"<html>502 Bad Gateway</html>")
    unchanged(app, before, consolidate(None), "abandoned", "invalid_output")
    assert len(llm.requests) == 1


def test_an_llm_timeout_abandons_the_group(app, consolidate, llm, memories):
    a, b = group(memories, ["事实一", "事实二"])
    before = memory_rows(app)
    app.config.update(MEMORY_LLM_TIMEOUT_S=0.5, MEMORY_RETRY_DELAYS_S=(0,))
    llm.reply_items([merge([a, b], "太迟的合并")], delay=2)
    outcome = consolidate(None)
    unchanged(app, before, outcome, "abandoned", "llm_timeout")
    assert (outcome["attempts"], len(llm.requests)) == (1, 1)


def test_transient_llm_errors_are_retried(app, consolidate, llm, memories):
    a, b = group(memories, ["事实一", "事实二"])
    app.config.update(MEMORY_RETRY_DELAYS_S=(0, 0))
    llm.reply(status=503)
    llm.reply(disconnect=True)
    llm.reply_items([merge([a, b], "两条事实")])
    outcome = consolidate(None)
    assert (outcome["status"], outcome["attempts"], outcome["merges"]) == ("succeeded", 3, 1)


def test_a_row_changed_while_the_model_thinks_abandons_the_group(
        app, consolidate, llm, memories, change):
    a, b, c = group(memories, ["事实一", "事实二", "事实三"])
    llm.reply_items([merge([a, b], "合并的事实"), {"op": "keep", "sourceIds": [c]}], delay=1)
    users_change = threading.Thread(target=change, args=(app, llm, b))
    users_change.start()
    outcome = consolidate(None)
    users_change.join(timeout=10)
    assert (outcome["status"], outcome["reason"]) == ("abandoned", "inputs_changed")
    after = memory_rows(app)
    assert a in after and c in after
    assert memories.count(USER_ID, source="CONSOLIDATED") == 0


@pytest.fixture(params=["edited", "dismissed", "deleted"])
def change(request):
    """What the user does to a source row while the model is thinking (through the service,
    as the API and the pages do)."""
    def run(app, llm, item_id: int) -> None:
        llm.wait_for_requests(1)
        with app.app_context():
            if request.param == "edited":
                memory_service.update_item(USER_ID, item_id, content="用户改写后的事实")
            elif request.param == "dismissed":
                memory_service.update_item(USER_ID, item_id, status=Status.DISMISSED)
            else:
                memory_service.delete_item(USER_ID, item_id)
            db.session.remove()
    return run


# ---- the transaction ---------------------------------------------------------------------

def test_a_failure_between_insert_and_delete_rolls_the_group_back(
        app, consolidate, memories, monkeypatch):
    """Fault injected in our own write step, after the first merge's insert and every delete:
    a dirty read shows the group half-way, and the rollback restores all of it."""
    a, b, c, d, e = group(memories, [f"事实{i}" for i in range(5)])
    before = memory_rows(app)
    write = UserMemories._merge
    half_way: list[tuple[int, int]] = []
    engine = sa.create_engine(TEST_DATABASE_URL, isolation_level="READ UNCOMMITTED")

    def failing_write(self, group_, merge_op, sources):
        if half_way:
            raise RuntimeError("injected failure")
        result = write(self, group_, merge_op, sources)
        with engine.connect() as dirty:
            half_way.append(tuple(dirty.execute(
                sa.select(sa.func.sum(sa.case((MemoryItem.source == "CONSOLIDATED", 1),
                                              else_=0)), sa.func.count())
                .where(MemoryItem.user_id == USER_ID)).one()))
        return result

    monkeypatch.setattr(UserMemories, "_merge", failing_write)
    try:
        outcome = consolidate([merge([a, b], "合并一"), merge([c, d], "合并二"),
                               {"op": "drop", "sourceIds": [e]}])
    finally:
        engine.dispose()
    # Half-way: one merged row inserted, all five sources and drops deleted.
    assert half_way == [(1, 1)]
    assert (outcome["status"], outcome["reason"]) == ("failed", "internal_error")
    assert (outcome["merges"], outcome["drops"], outcome["inserted"]) == (0, 0, 0)
    assert memory_rows(app) == before


# ---- merged words that already exist -----------------------------------------------------

def test_merged_words_equal_to_a_sources_are_a_new_consolidated_row(app, consolidate,
                                                                     memories):
    a, b = group(memories, ["报告用中文", "报告要用中文"])
    outcome = consolidate([merge([a, b], "报告用中文")])
    assert (outcome["status"], outcome["inserted"], outcome["rowsOut"]) == ("succeeded", 1, 1)
    (row,) = memory_rows(app).values()
    assert (row["content"], row["source"], row["dedup_hash"]) == \
        ("报告用中文", "CONSOLIDATED", rules.dedup_hash("USER", None, "报告用中文"))


def test_merged_words_of_an_active_machine_row_keep_that_row(app, consolidate, memories):
    kept = memories.add(USER_ID, "报告和总结都用中文", source="AUTO",
                        updated_at=EARLIER - timedelta(days=1))
    a, b = group(memories, ["报告用中文", "总结用中文"])
    before = memory_rows(app)
    outcome = consolidate([merge([a, b], "报告和总结都用中文"),
                           {"op": "keep", "sourceIds": [kept]}])
    assert (outcome["status"], outcome["merges"], outcome["inserted"], outcome["touched"],
            outcome["rowsOut"]) == ("succeeded", 1, 0, 1, 1)
    after = memory_rows(app)
    assert list(after) == [kept]
    # The fact was last confirmed when its newest source was.
    assert after[kept]["updated_at"] == before[b]["updated_at"]
    assert {k: v for k, v in after[kept].items() if k != "updated_at"} == \
        {k: v for k, v in before[kept].items() if k != "updated_at"}


def test_merged_words_of_a_manual_row_leave_it_untouched(app, consolidate, memories):
    manual = memories.add(USER_ID, "报告和总结都用中文")
    a, b = group(memories, ["报告用中文", "总结用中文"])
    before = memory_rows(app)
    outcome = consolidate([merge([a, b], "报告和总结都用中文")])
    assert (outcome["status"], outcome["merges"], outcome["inserted"], outcome["touched"]) == \
        ("succeeded", 1, 0, 0)
    assert memory_rows(app) == {manual: before[manual]}


def test_merged_words_the_user_dismissed_are_refused_and_the_sources_kept(
        app, consolidate, memories):
    dismissed = memories.add(USER_ID, "报告和总结都用中文", source="AUTO", status="DISMISSED")
    a, b, c, d = group(memories, ["报告用中文", "总结用中文", "仓库用 pnpm", "仓库要用 pnpm"])
    before = memory_rows(app)
    outcome = consolidate([merge([a, b], "报告和总结都用中文"),
                           {"op": "keep", "sourceIds": [c]}, {"op": "drop", "sourceIds": [d]}])
    assert (outcome["status"], outcome["merges"], outcome["drops"], outcome["dropped"]) == \
        ("succeeded", 0, 1, 1)
    after = memory_rows(app)
    assert d not in after
    assert all(after[i] == before[i] for i in (dismissed, a, b, c))


def test_merged_words_dismissed_during_the_write_roll_the_group_back(
        app, consolidate, memories, monkeypatch):
    """A writer outside the user lock (a user editing a dismissed row into the merged words)
    may commit between the wording check and the insert. That state is injected in our own
    delete step, inside the job's transaction (a second connection could wait on the job's
    locks and never commit in time): the whole group goes back as it was."""
    a, b, c = group(memories, ["报告用中文", "总结用中文", "仓库用 pnpm"])
    dismissed = memories.add(USER_ID, "别的说法", source="AUTO", status="DISMISSED")
    before = memory_rows(app)
    delete = repository.delete

    def dismissed_words_appear_then_delete(user_id, ids, group_=None):
        db.session.execute(sa.update(MemoryItem).where(MemoryItem.id == dismissed).values(
            content="报告和总结都用中文",
            dedup_hash=rules.dedup_hash("USER", None, "报告和总结都用中文")))
        return delete(user_id, ids, group_)

    monkeypatch.setattr(repository, "delete", dismissed_words_appear_then_delete)
    outcome = consolidate([merge([a, b], "报告和总结都用中文"), {"op": "drop", "sourceIds": [c]}])
    unchanged(app, before, outcome, "abandoned", "concurrent_write")


def test_two_merges_to_the_same_words_become_one_row(app, consolidate, memories):
    a, b, c, d = group(memories, ["报告用中文", "总结用中文", "输出用中文", "汇报用中文"])
    outcome = consolidate([merge([a, b], "一律用中文"), merge([c, d], "一律用中文")])
    assert (outcome["status"], outcome["merges"], outcome["inserted"], outcome["rowsOut"]) == \
        ("succeeded", 2, 1, 1)
    (row,) = memory_rows(app).values()
    assert (row["content"], row["source"]) == ("一律用中文", "CONSOLIDATED")


# ---- consolidated rows are machine-made (D13, D14) ---------------------------------------

def _consolidated_row(app, consolidate, memories) -> int:
    a, b = group(memories, ["报告用中文", "总结用中文"])
    assert consolidate([merge([a, b], "报告和总结都用中文")])["merges"] == 1
    (row,) = [r for r in memory_rows(app).values() if r["source"] == "CONSOLIDATED"]
    return row["id"]


def test_a_consolidated_row_is_in_the_next_extractions_comparison_set(
        app, consolidate, extract, llm, memories):
    merged = _consolidated_row(app, consolidate, memories)
    before = memories.get(merged)
    outcome = extract([{"type": "user", "action": "touch", "existingId": merged}])
    assert f"- id={merged} [用户] 报告和总结都用中文" in llm.requests[-1].prompt
    assert (outcome["kind"], outcome["touched"]) == ("extraction", 1)
    assert memories.get(merged)["rawUpdatedAt"] > before["rawUpdatedAt"]


def test_a_consolidated_row_is_demoted_like_an_auto_row(app, consolidate, extract, memories):
    merged = _consolidated_row(app, consolidate, memories)
    memories.bulk(USER_ID, [f"手写行{i:03d}" for i in range(199)])
    outcome = extract([{"type": "user", "content": "池满时学到的新事实"}])
    assert (outcome["inserted"], outcome["demoted"]) == (1, 1)
    assert memories.get(merged)["status"] == "DISMISSED"
