"""The memory-quality benchmark (`python -m bench.run quality`), without a model: a scripted
OpenAI-compatible server answers a known mix of right and wrong decisions, and every expected
score below is counted by hand from that mix — never by calling the scorer. Runs on the
benchmark's own SQLite database; no MariaDB or Redis needed. The scripted adversaries on the
whole labelled set are in test_quality_adversaries.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.extraction import llm
from app.memory.rules import ACTIVE_PER_USER_MAX
from bench import run as bench_run
from bench.quality import cases as labelled
from bench.quality import cli, recording, runner
from bench.quality.cases import Case, CaseError, parse_case, says, verdict
from bench.quality.runner import Answer, Endpoint
from bench.quality.scoring import (
    ANSWERED,
    INVALID,
    SKIPPED,
    Observation,
    Proposed,
    Stored,
    paired_bootstrap,
    percentile,
    score_case,
    summarize,
)
from tests.bench import quality_answers
from tests.bench.quality_answers import seeded_ids
from tests.llm_server import ScriptedLlm

KEY_ENV = "QUALITY_TEST_API_KEY"


@pytest.fixture
def scripted(monkeypatch):
    """The scripted OpenAI-compatible server, its key in the environment variable the
    benchmark is told to read."""
    monkeypatch.setenv(KEY_ENV, "scripted-key")
    llm.tls_context()  # loaded once per process: not inside the first case's timeout
    server = ScriptedLlm()
    yield server
    server.close()


def write_cases(path: Path, raw: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in raw),
                    encoding="utf-8")
    return path


def case(id: str, kind: str, user: str, expect: list | None = None, *, project="mao",
         memories: list | None = None, optional: list | None = None, lang="zh",
         **extra) -> dict:
    return {"id": id, "kind": kind, "lang": lang, "project": project,
            "memories": memories or [], "user": user, "assistant": "好的,已处理。",
            "expect": expect or [], "optional": optional or [], **extra}


def auto(ref: str, content: str, scope="USER", status="ACTIVE", source="AUTO", **extra) -> dict:
    return {"ref": ref, "scope": scope, "source": source, "status": status,
            "content": content, **extra}


LONG = "(这是一段足够长、超过 D11 阈值的用户消息。)"

# Thirteen cases, one scripted answer each (in case order: the run below asks one at a time).
# Seeded rows get ids in case order on the fresh database: c3's row is 1, c4's is 2.
MIX = [
    case("c1", "user", "以后报告都用中文写" + LONG,
         [{"action": "insert", "scope": "USER", "must": [["中文"]]}]),
    case("c2", "nothing", "今天好累,陪我聊聊" + LONG),
    case("c3", "touch", "我一直用 pnpm 的" + LONG, [{"action": "touch", "ref": "a"}],
         memories=[auto("a", "用户习惯用 pnpm")]),
    case("c4", "update", "This service targets Go 1.22 exactly, pinned in CI.",
         [{"action": "update", "ref": "a", "must": [["1.22"]]}],
         memories=[auto("a", "Service targets Go", scope="PROJECT")], lang="en"),
    case("c5", "dismissed", "Keep answers concise, skip the preambles please.",
         memories=[auto("d", "Prefers short answers", status="DISMISSED",
                        match=[["short", "concise"]])], lang="en"),
    case("c6", "manual", "回答里不要使用 emoji,我说过的" + LONG,
         memories=[auto("m", "不要使用 emoji", source="MANUAL")],
         optional=[{"action": "insert", "scope": "USER", "must": [["emoji"]]}]),
    case("c7", "no_project_key", "我们项目的接口都走 gRPC" + LONG,
         [{"action": "insert", "scope": "USER", "must": [["gRPC"]]}], project="weixin-bot"),
    case("c8", "project", "这个仓库测试统一用 Vitest" + LONG,
         [{"action": "insert", "scope": "PROJECT", "must": [["Vitest"]]}]),
    case("c9", "short", "谢谢!"),
    case("c10", "project", "This repo deploys to Fly.io on every push to main.",
         [{"action": "insert", "scope": "PROJECT", "must": [["Fly"]]}], lang="en"),
    case("c11", "nothing", "帮我把这段 SQL 改成 INNER JOIN" + LONG),
    case("c12", "user", "我是红绿色弱,图表别只靠红绿区分" + LONG,
         [{"action": "insert", "scope": "USER", "must": [["色弱"]]}]),
    case("c13", "user", "I'm vegetarian, leave meat out of any recipe.",
         [{"action": "insert", "scope": "USER", "must": [["vegetarian"]]}], lang="en"),
]
BIG_USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
# Long enough for a loaded shared machine to answer the fast calls well within it.
TIMEOUT_S = 2.5


def script_the_mix(server: ScriptedLlm) -> None:
    server.reply_items([{"type": "user", "action": "insert", "content": "报告用中文"}],
                       usage=BIG_USAGE)                                         # c1 right
    server.reply_items([{"type": "user", "content": "用户今天很累"}])           # c2 junk
    server.reply_items([{"type": "user", "content": "习惯使用 pnpm 管理依赖"}])  # c3 duplicate
    server.reply_items([{"type": "project", "action": "update", "existingId": 2,
                         "content": "Service targets Go 1.22"}])                 # c4 right
    server.reply_items([{"type": "user", "content": "Prefers concise answers"}])  # c5 DISMISSED
    server.reply_items([{"type": "user", "content": "不要使用 emoji"}])         # c6 MANUAL hit
    server.reply_items([{"type": "project", "content": "接口都走 gRPC"}])       # c7 right (USER)
    server.reply("Sure! The repo uses Vitest.")                                  # c8 invalid
    # c9: under the D11 threshold, never asked
    server.reply_items([{"type": "user", "content": "Deploys to Fly.io"}])      # c10 wrong scope
    server.reply("[]")                                                           # c11 right
    server.reply_items([{"type": "user", "content": "用户红绿色弱"}],
                       delay=TIMEOUT_S + 1)                                    # c12 timeout
    server.reply(status=500)                                                     # c13 retried…
    server.reply_items([{"type": "user", "content": "User is vegetarian"}])     # …then right


def run_the_mix(tmp_path: Path, server: ScriptedLlm, *extra: str) -> dict:
    cases_file = write_cases(tmp_path / "mix.jsonl", MIX)
    scores_file = tmp_path / "scores.json"
    bench_run.main(["quality", "--base-url", server.base_url, "--model", "scripted-small",
                    "--api-key-env", KEY_ENV, "--cases", str(cases_file), "--concurrency", "1",
                    "--timeout", str(TIMEOUT_S), "--retries", "1", "--retry-delay", "0",
                    "--json", str(scores_file), *extra])
    return json.loads(scores_file.read_text(encoding="utf-8"))


def test_scores_of_a_known_mix_of_right_and_wrong_answers_are_the_hand_counted_ones(
        tmp_path, scripted):
    script_the_mix(scripted)
    data = run_the_mix(tmp_path, scripted)
    (scores,) = data["models"]
    # c9 is under the D11 threshold: never asked, outside the headline.
    assert (scores["cases"], scores["short_cases"], scores["calls"]) == (12, 1, 12)
    # Right: c1, c4, c6 (an exact repeat of the MANUAL words), c7, c11, c13 (after a retry).
    assert scores["headline_accuracy"] == 0.5
    # Usable: all but c8 (invalid) and c12 (timeout) — 10; right among them: the same 6.
    assert (scores["usable"], scores["usable_accuracy"]) == (10, 0.6)
    assert (scores["invalid_outputs"], scores["failed_calls"]) == (1, 1)
    # Written: c1, c2, c3, c4 (update), c5, c7, c10, c13 = 8; of which expected: c1, c4, c7, c13.
    assert scores["stored_precision"] == 0.5
    # Expected writes: c1, c4, c7, c8, c10, c12, c13 = 7; written as expected: 4.
    assert scores["stored_recall"] == round(4 / 7, 6)
    assert scores["extraction_f1"] == round(2 * 0.5 * (4 / 7) / (0.5 + 4 / 7), 6)
    # Nothing expected, usable: c2, c5, c11; something stored: c2, c5.
    assert scores["junk_rate"] == round(2 / 3, 6)
    # Touch or update expected: c3, c4; a new row instead: c3.
    assert (scores["duplicate_rate"], scores["update_accuracy"]) == (0.5, 0.5)
    assert scores["false_memories"] == 4  # c2, c3, c5, c10 (wrong scope)
    assert scores["dismissed_relearnt"] == 1  # c5: says what the dismissed row says
    assert (scores["d3_violations"], scores["manual_violations"],
            scores["cap_violations"]) == (0, 0, 0)
    # Usage of the 11 answered calls (c12 has none): c1 1000/50, ten of 321/12.
    assert scores["prompt_tokens_per_case"] == round((1000 + 10 * 321) / 11, 6)
    assert scores["completion_tokens_per_case"] == round((50 + 10 * 12) / 11, 6)
    assert scores["accuracy_by_kind"] == {
        "dismissed": 0.0, "manual": 1.0, "no_project_key": 1.0, "nothing": 0.5,
        "project": 0.0, "touch": 0.0, "update": 1.0, "user": round(2 / 3, 6)}
    outcome = {c["case_id"]: (c["status"], c["correct"]) for c in scores["per_case"]}
    assert outcome["c8"] == ("invalid", False)
    assert outcome["c9"] == ("skipped", True)
    assert outcome["c12"] == ("timeout", False)
    assert outcome["c13"] == ("answered", True)
    reasons = {c["case_id"]: c["reason"] for c in scores["per_case"]}
    assert (reasons["c1"], reasons["c11"], reasons["c9"], reasons["c8"], reasons["c12"]) == (
        "applied", "nothing_to_remember", "user_message_too_short", "invalid_output",
        "llm_timeout")
    changes = {c["case_id"]: c["changes"] for c in scores["per_case"]}
    assert changes["c7"] == ["insert USER: 接口都走 gRPC"]  # a bot channel has no project
    assert changes["c6"] == ["touch m"]
    assert changes["c4"] == ["update a: Service targets Go 1.22"]


def test_every_table_holds_the_three_baselines_scored_in_the_same_run(tmp_path, scripted):
    """do-nothing is right on c2, c5, c6, c11 of the 12 headline cases; echo stores every
    message, a copy, never right."""
    script_the_mix(scripted)
    data = run_the_mix(tmp_path, scripted)
    baselines = {b["model"]: b for b in data["baselines"]}
    assert list(baselines) == ["baseline: do-nothing", "baseline: regex", "baseline: echo"]
    assert baselines["baseline: do-nothing"]["headline_accuracy"] == round(4 / 12, 6)
    assert baselines["baseline: echo"]["headline_accuracy"] == 0.0
    assert baselines["baseline: echo"]["failures"]["raw_message"] == 12
    (model,) = data["models"]
    best = max(baselines.values(), key=lambda b: b["headline_accuracy"])
    assert model["margin_over_best_baseline"]["baseline"] == best["model"]
    diff = model["margin_over_best_baseline"]
    assert diff["low"] <= diff["diff"] <= diff["high"]
    assert diff["diff"] == round(0.5 - best["headline_accuracy"], 6)


def test_every_case_goes_through_the_jobs_prompt_with_its_memories(tmp_path, scripted):
    """What the model is shown is the pipeline's prompt: the AUTO row with its id, the
    dismissed words without one, no MANUAL row; a bot channel has no project."""
    script_the_mix(scripted)
    run_the_mix(tmp_path, scripted)
    prompts = {r.prompt.split("<user_message>")[1].split("</user_message>")[0].strip()[:4]: r
               for r in scripted.requests}
    assert "- id=1 [用户] 用户习惯用 pnpm" in prompts["我一直用"].prompt
    dismissed = prompts["Keep"].prompt
    assert "已忽略的内容:\n- Prefers short answers" in dismissed and "id=" not in dismissed
    assert "不要使用 emoji" not in prompts["回答里不"].prompt.split("<user_message>")[0]
    assert "当前项目:(无" in prompts["我们项目"].prompt
    assert {r.model for r in scripted.requests} == {"scripted-small"}
    assert scripted.requests[0].headers["authorization"] == "Bearer scripted-key"


def test_a_replayed_run_scores_exactly_as_the_recorded_one_without_a_model(tmp_path, scripted):
    script_the_mix(scripted)
    recorded = run_the_mix(tmp_path, scripted, "--record", str(tmp_path / "answers.json"))
    scripted.close()  # nothing answers any more
    replay_file = tmp_path / "replayed.json"
    bench_run.main(["quality", "--replay", str(tmp_path / "answers.json"),
                    "--cases", str(tmp_path / "mix.jsonl"), "--json", str(replay_file)])
    replayed = json.loads(replay_file.read_text(encoding="utf-8"))
    assert replayed["models"] == recorded["models"]
    saved = recording.read(tmp_path / "answers.json")
    ((name, model, answers),) = saved.runs
    assert (name, model) == ("scripted-small", "scripted-small")
    assert set(answers) == {c["id"] for c in MIX} - {"c9"}
    assert answers["c12"].error == "LlmTimeout" and answers["c12"].text is None
    assert answers["c1"].prompt_tokens == 1000 and answers["c1"].latency_s > 0


def test_replay_latency_percentiles_come_from_the_recording(tmp_path):
    """Nearest rank over the recorded latencies of the cases that called the model."""
    cases_file = write_cases(tmp_path / "cases.jsonl", [
        case(f"n{i}", "nothing", f"第 {i} 个没有可记内容的对话" + LONG) for i in range(5)])
    answers = {f"n{i}": Answer(text="[]", prompt_tokens=100 + i, completion_tokens=2,
                               latency_s=latency)
               for i, latency in enumerate([0.9, 0.1, 0.5, 0.3, 0.7])}
    recording.write(tmp_path / "answers.json", recording.Recording(
        [("small", "small-1", answers), ("large", "large-1", answers)]))
    scores = cli.main(["--replay", str(tmp_path / "answers.json"), "--cases", str(cases_file),
                       "--json", str(tmp_path / "scores.json")])
    assert [s.model for s in scores] == ["small", "large"]  # side by side
    for s in scores:
        assert (s.latency_p50_s, s.latency_p95_s) == (0.5, 0.9)
        assert s.prompt_tokens_per_case == 102 and s.headline_accuracy == 1.0


def test_a_replayed_answer_given_for_another_prompt_is_counted_stale(tmp_path):
    """The answer is still scored (re-scoring after a rule or label change is the point); the
    run says how many answers were given for a prompt the case no longer builds."""
    raw = case("n0", "nothing", "没有可记内容的一段对话" + LONG)
    answers = {"n0": Answer(text="[]", prompt_sha256="0" * 64)}
    run = runner.run_model([parse_case(raw)], Endpoint("small"), recorded=answers)
    assert run.stale == 1 and run.observations[0].status == ANSWERED


def test_model_calls_run_at_most_concurrency_at_a_time(tmp_path, scripted):
    raw = [case(f"n{i}", "nothing", f"第 {i} 个没有可记内容的对话" + LONG) for i in range(6)]
    for _ in raw:
        scripted.reply("[]", delay=0.3)
    run = runner.run_model([parse_case(c) for c in raw],
                           Endpoint("scripted-small", scripted.base_url, KEY_ENV),
                           concurrency=2, timeout_s=5)
    assert [o.status for o in run.observations] == [ANSWERED] * 6
    requests = scripted.requests
    # Each call lasts 0.3 s; 50 ms of slack for the server noting a call's end after the
    # client has read its answer.
    overlap = max(sum(r.started <= q.started < r.ended - 0.05 for r in requests)
                  for q in requests)
    assert overlap == 2


def test_two_models_are_run_and_scored_side_by_side(tmp_path, scripted):
    raw = [case("u1", "user", "以后报告都用中文写" + LONG,
                [{"action": "insert", "scope": "USER", "must": [["中文"]]}])]
    scripted.reply_items([{"type": "user", "content": "报告用中文"}])
    scripted.reply("[]")
    scores = cli.main(["--base-url", scripted.base_url, "--model", "small", "--model", "large",
                       "--api-key-env", KEY_ENV, "--cases",
                       str(write_cases(tmp_path / "c.jsonl", raw)),
                       "--json", str(tmp_path / "s.json")])
    assert [(s.model, s.headline_accuracy) for s in scores] == [("small", 1.0), ("large", 0.0)]
    assert [r.model for r in scripted.requests] == ["small", "large"]


# ---- the scoring, as pure functions ---------------------------------------------------------

def one(raw: dict) -> Case:
    return parse_case(raw)


TOUCH = one(case("t", "touch", "我一直用 pnpm 的" + LONG, [{"action": "touch", "ref": "a"}],
                 memories=[auto("a", "用户习惯用 pnpm")]))
NOTHING = one(case("n", "nothing", "今天好累,陪我聊聊" + LONG))


def test_a_touch_is_right_only_when_the_expected_row_alone_is_touched():
    assert score_case(TOUCH, Observation("t", ANSWERED, touched=("a",))).correct
    assert not score_case(TOUCH, Observation("t", ANSWERED)).correct


def test_an_insert_where_a_touch_was_expected_is_a_duplicate():
    score = score_case(TOUCH, Observation("t", ANSWERED,
                                          inserted=(Stored("USER", "", "用 pnpm"),)))
    assert (score.correct, score.duplicate, score.stored, score.stored_right) == \
        (False, True, 1, 0)


def test_anything_stored_where_nothing_should_be_is_junk():
    assert score_case(NOTHING, Observation("n", ANSWERED,
                                           inserted=(Stored("USER", "", "很累"),))).junk
    assert score_case(NOTHING, Observation("n", ANSWERED)).junk is False
    assert score_case(TOUCH, Observation("t", ANSWERED)).junk is None  # not a junk case
    short = one(case("s", "short", "谢谢!"))
    assert score_case(short, Observation("s", SKIPPED)).junk is None  # never put to the model


def test_an_unusable_answer_is_never_a_right_decision():
    assert not score_case(NOTHING, Observation("n", INVALID, called=True)).correct
    assert score_case(NOTHING, Observation("n", SKIPPED)).correct


def test_a_fact_in_the_wrong_scope_is_neither_recalled_nor_precise():
    project = one(case("p", "project", "这个仓库测试统一用 Vitest" + LONG,
                       [{"action": "insert", "scope": "PROJECT", "must": [["Vitest"]]}]))
    wrong = score_case(project, Observation("p", ANSWERED,
                                            inserted=(Stored("USER", "", "用 Vitest"),)))
    right = score_case(project, Observation("p", ANSWERED,
                                            inserted=(Stored("PROJECT", "mao", "用 Vitest"),)))
    assert (wrong.recalled, wrong.stored_right, wrong.correct) == (0, 0, False)
    assert (right.recalled, right.stored_right, right.correct) == (1, 1, True)


def test_an_optional_insert_is_neither_wrong_nor_junk_and_the_manual_row_stays():
    manual = one(case("m", "manual", "请一直用中文回复我" + LONG,
                      memories=[auto("m", "回答时使用中文", source="MANUAL")],
                      optional=[{"action": "insert", "scope": "USER", "must": [["中文"]]}]))
    added = score_case(manual, Observation("m", ANSWERED,
                                           inserted=(Stored("USER", "", "用中文回复"),)))
    assert (added.correct, added.junk, added.stored_right, added.manual_violation) == \
        (True, None, 1, False)
    touched = score_case(manual, Observation("m", ANSWERED, touched=("m",), changed=("m",)))
    assert touched.manual_violation  # its time moved though nobody repeated its words


def test_an_exact_repeat_of_a_manual_row_refreshing_its_time_is_no_violation():
    """Seed §5.6: an exact-hash hit refreshes `updated_at`; D13 hides the row from the model."""
    manual = one(case("m", "manual", "请一直用中文回复我" + LONG,
                      memories=[auto("m", "回答时使用中文", source="MANUAL")]))
    repeated = score_case(manual, Observation(
        "m", ANSWERED, touched=("m",), changed=("m",),
        proposed=(Proposed("insert", "user", "回答时使用中文"),)))
    reworded = score_case(manual, Observation(
        "m", ANSWERED, updated=(("m", "回答用中文"),), changed=("m",)))
    assert (repeated.manual_violation, repeated.correct) == (False, True)
    assert reworded.manual_violation


def test_writing_what_a_dismissed_row_says_is_a_relearnt_dismissed_wording():
    dismissed = one(case("d", "dismissed", "Keep answers concise, skip the preambles please.",
                         memories=[auto("d", "Prefers short answers", status="DISMISSED",
                                        match=[["short", "concise"]])], lang="en"))
    said = score_case(dismissed, Observation("d", ANSWERED, inserted=(
        Stored("USER", "", "Likes CONCISE answers"),)))
    other = score_case(dismissed, Observation("d", ANSWERED, inserted=(
        Stored("USER", "", "Uses zsh"),)))
    assert (said.dismissed_relearnt, other.dismissed_relearnt) == (True, False)
    assert (said.correct, said.d3_violation) == (False, False)  # the model's fault, not D3


def test_summary_rates_over_their_own_denominators():
    observations = [Observation("t", ANSWERED, called=True, inserted=(
        Stored("USER", "", "习惯用 pnpm"),), prompt_tokens=300, completion_tokens=10,
        latency_s=2.0),
                    Observation("n", ANSWERED, called=True, prompt_tokens=100,
                                completion_tokens=4, latency_s=1.0)]
    scores = summarize("m", [TOUCH, NOTHING], observations)
    assert (scores.headline_accuracy, scores.junk_rate, scores.duplicate_rate) == \
        (0.5, 0.0, 1.0)
    assert (scores.stored_precision, scores.stored_recall) == (0.0, None)
    assert (scores.prompt_tokens_per_case, scores.completion_tokens_per_case) == (200, 7)
    assert (scores.latency_p50_s, scores.latency_p95_s) == (1.0, 2.0)


def test_percentile_is_a_nearest_rank_value():
    values = [float(v) for v in range(1, 21)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == \
        (10.0, 19.0, 20.0)
    assert percentile([], 50) is None


def test_stored_words_say_a_match_whatever_their_case_width_and_spaces():
    assert says("用户习惯用 PNPM 9.x", ((("pnpm",), ("9",))))
    assert says("Ｖｉｔｅｓｔ for unit tests", (("vitest",),))
    assert says("报告 用 中文", (("用中文",),))
    assert not says("用户习惯用 npm", (("pnpm",),))


# ---- the labelled set -----------------------------------------------------------------------

def test_labelled_set_holds_250_cases_evenly_in_both_languages_and_every_kind():
    cases = labelled.load()
    assert len(cases) >= 250
    assert {c.kind for c in cases} == set(labelled.KINDS)
    zh, en = (sum(c.lang == lang for c in cases) for lang in ("zh", "en"))
    assert zh + en == len(cases) and abs(zh - en) <= len(cases) // 10


def test_a_quarter_of_the_cases_show_the_model_a_realistic_comparison_set():
    """20–200 memories, as real users have; some close enough to the cap (200) that the
    three items an answer may hold fill it."""
    cases = labelled.load()
    sizes = [sum(m.status == "ACTIVE" for m in c.memories) for c in cases]
    assert sum(size >= 20 for size in sizes) >= len(cases) / 4
    assert max(sizes) == ACTIVE_PER_USER_MAX - 3


def test_background_rows_never_mention_what_the_case_is_about():
    raw = case("b", "user", "我习惯用 Obsidian 记笔记,以后笔记相关的示例按它来" + LONG,
               [{"action": "insert", "scope": "USER", "must": [["Obsidian"]]}], background=150)
    rows = parse_case(raw).memories
    assert len(rows) == 150 and all(m.background and m.source == "AUTO" for m in rows)
    assert not any("Obsidian" in m.content or "笔记" in m.content for m in rows)
    assert rows == parse_case(raw).memories  # the same rows every run


def test_the_labelled_set_is_learnable_through_the_pipeline(tmp_path):
    """Perfect answers, replayed through the real parser and rules, score perfectly: every
    label is something the service can do (ids, groups, downgrades, D11)."""
    cases = labelled.load()
    ids = seeded_ids(cases)
    answers = {c.id: Answer(text=quality_answers.ideal(c, ids[c.id])) for c in cases}
    run = runner.run_model(cases, Endpoint("ideal"), recorded=answers)
    scores = summarize("ideal", cases, run.observations)
    wrong = [s.case_id for s in scores.per_case if not s.correct]
    assert wrong == []
    assert (scores.stored_precision, scores.stored_recall, scores.junk_rate,
            scores.duplicate_rate, scores.false_memories, scores.stray_touches) == \
        (1.0, 1.0, 0.0, 0.0, 0, 0)
    assert (scores.d3_violations, scores.manual_violations, scores.cap_violations) == (0, 0, 0)
    assert scores.calls == sum(c.kind != "short" for c in cases)


def test_a_project_fact_without_a_valid_project_key_must_be_expected_as_user():
    with pytest.raises(CaseError, match="stored as USER"):
        parse_case(case("x", "no_project_key", "我们项目的接口都走 gRPC" + LONG,
                        [{"action": "insert", "scope": "PROJECT", "must": [["gRPC"]]}],
                        project="weixin-bot"))


def test_short_is_exactly_the_messages_under_the_d11_threshold():
    with pytest.raises(CaseError, match="D11"):
        parse_case(case("x", "nothing", "谢谢!"))
    with pytest.raises(CaseError, match="D11"):
        parse_case(case("x", "short", "这是一段足够长、超过阈值的用户消息,没有可记内容"))


def test_only_active_machine_made_rows_can_be_expected_touched():
    with pytest.raises(CaseError, match="machine-made"):
        parse_case(case("x", "touch", "请一直用中文回复我" + LONG,
                        [{"action": "touch", "ref": "m"}],
                        memories=[auto("m", "回答时使用中文", source="MANUAL")]))


def test_quality_needs_a_model_or_a_recording(capsys):
    with pytest.raises(SystemExit):
        cli.parse_args([])
    assert "--model is required" in capsys.readouterr().err


def test_an_unset_key_variable_stops_the_run_before_any_case(monkeypatch, tmp_path):
    monkeypatch.delenv("QUALITY_UNSET_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="QUALITY_UNSET_API_KEY is not set"):
        cli.main(["--model", "m", "--api-key-env", "QUALITY_UNSET_API_KEY",
                  "--json", str(tmp_path / "s.json")])
    assert not (tmp_path / "s.json").exists()


def test_progress_goes_to_stderr(capsys):
    runner.print_progress(25, 122)
    assert capsys.readouterr().err == "25/122\n"


# ---- meaning-aware scoring ------------------------------------------------------------------

VITEST = one(case("v", "project", "这个仓库测试统一用 Vitest,这次先补 date 工具的测试" + LONG,
                  [{"action": "insert", "scope": "PROJECT", "must": [["Vitest"]],
                    "must_not": ["date 工具"]}]))
EMOJI = one(case("e", "user", "别在回答里给我加 emoji 了,我一直不喜欢" + LONG,
                 [{"action": "insert", "scope": "USER", "must": [["emoji"]],
                   "polarity": "-"}]))


def test_stored_words_with_the_meaning_inverted_do_not_say_the_effect():
    (vitest,), (emoji,) = VITEST.expect, EMOJI.expect
    assert verdict("该仓库测试用 Vitest", vitest, VITEST.user) is None
    assert verdict("User does NOT want Vitest", vitest, VITEST.user) == "inverted"
    assert verdict("用户不希望:该仓库用 Vitest", vitest, VITEST.user) == "inverted"
    assert verdict("不要在回答里使用 emoji", emoji, EMOJI.user) is None
    assert verdict("用户喜欢 emoji", emoji, EMOJI.user) == "inverted"


def test_a_negation_in_another_clause_leaves_the_meaning_alone():
    (vitest,) = VITEST.expect
    assert verdict("测试用 Vitest,不用 Jest", vitest, VITEST.user) is None
    assert verdict("不用 Jest,测试用 Vitest", vitest, VITEST.user) is None


def test_the_one_off_task_and_must_not_phrases_do_not_say_the_effect():
    (vitest,) = VITEST.expect
    assert verdict("这次测试用 Vitest", vitest, VITEST.user) == "one_off"
    assert verdict("用 Vitest 补 date 工具的测试", vitest, VITEST.user) == "must_not"


def test_the_raw_message_copied_is_not_a_memory():
    (vitest,) = VITEST.expect
    assert verdict(VITEST.user[:120], vitest, VITEST.user) == "raw_message"
    copied = score_case(VITEST, Observation("v", ANSWERED, inserted=(
        Stored("PROJECT", "mao", VITEST.user[:120]),)))
    assert (copied.correct, copied.failures) == (False, {"raw_message": 1})


def test_pairing_finds_the_most_effects_whatever_the_order_of_the_answer():
    """The first row fits both effects, the second only the first: a greedy pairing in answer
    order gives one; the maximum matching gives both."""
    two = one(case("p", "multi_fact", "这个仓库用 pnpm 和 Vitest,测试都用 Vitest" + LONG,
                   [{"action": "insert", "scope": "PROJECT", "must": [["pnpm", "Vitest"]]},
                    {"action": "insert", "scope": "PROJECT", "must": [["Vitest"]]}]))
    rows = (Stored("PROJECT", "mao", "用 pnpm 和 Vitest"), Stored("PROJECT", "mao", "用 pnpm"))
    for order in (rows, rows[::-1]):
        scored = score_case(two, Observation("p", ANSWERED, inserted=order))
        assert (scored.recalled, scored.correct) == (2, True)


def test_an_update_labelled_or_insert_is_as_well_said_by_a_new_row():
    raw = case("u", "update", "我一直用 pnpm,而且版本固定在 9.x" + LONG,
               [{"action": "update", "ref": "a", "must": [["pnpm"], ["9"]], "or_insert": True}],
               memories=[auto("a", "用户习惯用 pnpm")])
    new_row = score_case(one(raw), Observation("u", ANSWERED, inserted=(
        Stored("USER", "", "pnpm 固定 9.x"),)))
    assert (new_row.correct, new_row.duplicate) == (True, False)


def test_a_touch_of_a_row_nobody_mentioned_is_a_stray_touch():
    scored = score_case(TOUCH, Observation("t", ANSWERED, touched=("a", "b")))
    assert (scored.correct, scored.stray_touches) == (False, 1)


def test_a_forbidden_phrase_stored_is_never_right():
    secret = one(case("s", "sensitive", "测试库密码是 Tx9kd82q,帮我连一下看看 orders 表" + LONG,
                      forbidden=["Tx9kd82q"]))
    stored = score_case(secret, Observation("s", ANSWERED, inserted=(
        Stored("USER", "", "测试库密码 Tx9kd82q"),)))
    assert (stored.correct, stored.forbidden, stored.junk) == (False, True, True)


def test_the_paired_bootstrap_interval_holds_the_difference_and_is_the_same_every_run():
    model = [1.0] * 60 + [0.0] * 40
    baseline = [1.0] * 45 + [0.0] * 55
    diff, low, high = paired_bootstrap(model, baseline)
    assert diff == 0.15 and low < 0.15 < high and 0 < low
    assert paired_bootstrap(model, baseline) == (diff, low, high)
    assert paired_bootstrap(baseline, baseline) == (0.0, 0.0, 0.0)


def test_a_repeat_needs_a_temperature_which_every_call_carries(tmp_path, scripted, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["--model", "m", "--repeat", "2"])
    assert "--repeat needs --temperature" in capsys.readouterr().err
    raw = [case("u1", "user", "以后报告都用中文写" + LONG,
                [{"action": "insert", "scope": "USER", "must": [["中文"]]}])]
    scripted.reply_items([{"type": "user", "content": "报告用中文"}])
    scripted.reply("[]")
    scores = cli.main(["--base-url", scripted.base_url, "--model", "small", "--repeat", "2",
                       "--temperature", "0.7", "--api-key-env", KEY_ENV, "--cases",
                       str(write_cases(tmp_path / "c.jsonl", raw)),
                       "--json", str(tmp_path / "s.json")])
    assert [(s.model, s.headline_accuracy) for s in scores] == [("small r1", 1.0),
                                                                ("small r2", 0.0)]
    assert [r.body["temperature"] for r in scripted.requests] == [0.7, 0.7]
    assert ("small: headline over 2 runs: mean 50.0%, min 0.0%, max 100.0%, sd 70.7 pts"
            in capsys.readouterr().out)


def test_judge_verdicts_are_scored_beside_the_keywords_and_replayed_for_free(tmp_path,
                                                                             scripted):
    """The model's row says the fact in words the keywords miss ("Chinese"): the keywords say
    wrong, the judge says right; a replay asks the judge nothing."""
    raw = [case("u1", "user", "以后报告都用中文写" + LONG,
                [{"action": "insert", "scope": "USER", "must": [["中文"]]}])]
    cases_file = write_cases(tmp_path / "c.jsonl", raw)
    answers = {"u1": Answer(text=json.dumps([{"type": "user", "content": "Reports in Chinese"}]))}
    recording.write(tmp_path / "run.json", recording.Recording([("small", "small", answers)]))
    # Judged: the regex baseline's row, the echo baseline's row, the model's row.
    for verdict_text in ("no", "no", "Yes."):
        scripted.reply(verdict_text)
    args = ["--replay", str(tmp_path / "run.json"), "--cases", str(cases_file),
            "--judge-model", "judge-1", "--judge-base-url", scripted.base_url,
            "--judge-api-key-env", KEY_ENV, "--json", str(tmp_path / "s.json")]
    cli.main(args)
    first = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    (model,) = first["models"]
    assert (model["headline_accuracy"], model["judged"]["headline_accuracy"]) == (0.0, 1.0)
    assert len(scripted.requests) == 3 and scripted.requests[0].model == "judge-1"
    assert len(recording.read(tmp_path / "run.json").verdicts) == 3
    scripted.close()  # nothing answers any more
    cli.main(args)
    again = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert again["models"] == first["models"]


def test_only_a_new_row_restating_the_known_one_is_a_duplicate():
    """An insert beside the expected touch that says something else is a false memory, not a
    duplicate."""
    restated = score_case(TOUCH, Observation("t", ANSWERED, touched=("a",), inserted=(
        Stored("USER", "", "习惯使用 pnpm 管理依赖"),)))
    unrelated = score_case(TOUCH, Observation("t", ANSWERED, touched=("a",), inserted=(
        Stored("USER", "", "周末喜欢爬山"),)))
    assert (restated.duplicate, restated.false_memories) == (True, 1)
    assert (unrelated.duplicate, unrelated.false_memories) == (False, 1)
