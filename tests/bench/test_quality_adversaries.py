"""Scripted adversaries on the whole labelled set: a stub model (tests/llm_server.py) answers
every case by a script — do nothing, echo the message, invert the meaning, duplicate, junk the
parser drops, invalid JSON, errors only. A benchmark whose numbers mean something ranks each of
them below its best baseline and shows each failure in its own row; the service guarantees
read 0 whatever they answer."""

from __future__ import annotations

import json

import pytest

from app.extraction import llm
from bench import run as bench_run
from bench.quality import cases as labelled
from tests.bench import quality_answers
from tests.bench.quality_answers import seeded_ids
from tests.llm_server import ScriptedLlm

KEY_ENV = "QUALITY_ADVERSARY_API_KEY"
ADVERSARIES = (*quality_answers.ANSWERS, "all-errors")


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One bench run: the three baselines and the seven adversaries, side by side."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(KEY_ENV, "scripted-key")
    llm.tls_context()
    server = ScriptedLlm()
    cases = labelled.load()
    ids = seeded_ids(cases)
    asked = [c for c in cases if c.headline]
    for name in ADVERSARIES:  # the runs go one after the other, one case at a time
        for case in asked:
            if name == "all-errors":
                server.reply(status=500)
            else:
                server.reply(quality_answers.ANSWERS[name](case, ids[case.id]))
    scores_file = tmp_path_factory.mktemp("adversaries") / "scores.json"
    models = [arg for name in ADVERSARIES for arg in ("--model", name)]
    try:
        bench_run.main(["quality", "--base-url", server.base_url, *models,
                        "--api-key-env", KEY_ENV, "--concurrency", "1", "--retries", "0",
                        "--json", str(scores_file)])
        assert server.pending == 0
    finally:
        server.close()
        monkeypatch.undo()
    data = json.loads(scores_file.read_text(encoding="utf-8"))
    return ({m["model"]: m for m in data["models"]},
            {b["model"]: b for b in data["baselines"]}, len(asked))


def best_baseline(baselines: dict) -> float:
    return max(b["headline_accuracy"] for b in baselines.values())


@pytest.mark.parametrize("name", ADVERSARIES)
def test_every_scripted_adversary_scores_below_the_best_baseline(scored, name):
    models, baselines, _ = scored
    assert models[name]["headline_accuracy"] < best_baseline(baselines)
    margin = models[name]["margin_over_best_baseline"]
    assert margin["diff"] < 0 and margin["low"] <= margin["diff"] <= margin["high"]


def test_the_baselines_order_is_the_expected_one(scored):
    """Echo stores every message verbatim and is nearly never right (only where the service
    refuses the message for holding a credential, which stores nothing, as expected); the regex
    clears do-nothing."""
    _, baselines, _ = scored
    nothing, regex, echo = (baselines[f"baseline: {n}"]["headline_accuracy"]
                            for n in ("do-nothing", "regex", "echo"))
    assert echo < 0.05 < nothing < regex


@pytest.mark.parametrize("name", [*ADVERSARIES, "baseline"])
def test_the_service_guarantees_read_zero_whatever_the_model_answers(scored, name):
    models, baselines, _ = scored
    for scores in ([models[name]] if name != "baseline" else baselines.values()):
        assert (scores["d3_violations"], scores["manual_violations"],
                scores["cap_violations"]) == (0, 0, 0)


def test_doing_nothing_shows_as_no_recall(scored):
    models, baselines, calls = scored
    scores = models["do-nothing"]
    assert (scores["stored_recall"], scores["stored_precision"], scores["usable"]) == \
        (0.0, None, calls)
    assert scores["headline_accuracy"] == baselines["baseline: do-nothing"]["headline_accuracy"]


def test_echoing_the_message_shows_as_raw_copies_and_junk(scored):
    models, _, calls = scored
    scores = models["echo"]
    # Every message stored as it came, but those the service refused for holding a credential.
    assert scores["failures"]["raw_message"] + scores["refused_items"] == calls
    assert 0 < scores["refused_items"] < 10
    assert scores["junk_rate"] > 0.9 and scores["headline_accuracy"] < 0.05


def test_inverting_the_meaning_shows_as_inverted_rows(scored):
    """Every expected write said the other way round fails on its polarity — all but the
    effects labelled `any` (their right wording may need a negation either way)."""
    models, _, _ = scored
    scores = models["inverted"]
    cases = [c for c in labelled.load() if c.headline]
    writes = [e for c in cases for e in c.expect if e.action in ("insert", "update") and e.must]
    checked = sum(e.polarity != "any" for e in writes)
    assert scores["failures"]["inverted"] == checked
    assert scores["stored_recall"] < 0.05


def test_duplicating_shows_as_the_duplicate_rate_and_false_memories(scored):
    models, _, _ = scored
    scores = models["duplicates"]
    assert scores["duplicate_rate"] == 1.0
    assert scores["false_memories"] > 0 and scores["update_accuracy"] == 0.0


def test_over_long_junk_shows_as_items_the_parser_dropped(scored):
    models, _, calls = scored
    scores = models["over-long"]
    assert (scores["dropped_items"], scores["usable"]) == (calls, calls)
    # Right where nothing was to be learnt — only because the parser threw the junk away.
    assert scores["right_by_dropping"] == round(scores["headline_accuracy"] * calls)
    assert scores["stored_recall"] == 0.0 and scores["junk_rate"] == 0.0


def test_invalid_json_shows_as_invalid_outputs_not_as_clean_rates(scored):
    models, _, calls = scored
    scores = models["invalid-json"]
    assert (scores["invalid_outputs"], scores["usable"], scores["headline_accuracy"]) == \
        (calls, 0, 0.0)
    # No usable answer: nothing to take a junk or duplicate rate of.
    assert (scores["junk_rate"], scores["duplicate_rate"], scores["stored_precision"]) == \
        (None, None, None)


def test_all_errors_shows_as_failed_calls(scored):
    models, _, calls = scored
    scores = models["all-errors"]
    assert (scores["failed_calls"], scores["usable"], scores["headline_accuracy"]) == \
        (calls, 0, 0.0)
