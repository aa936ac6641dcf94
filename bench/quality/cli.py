"""`python -m bench.run quality`: score one or two models (or a recorded run) on the labelled set.

    python -m bench.run quality --base-url https://api.example.com/v1 --model small-model \
        --model other-model --api-key-env EXAMPLE_API_KEY --record run.json
    python -m bench.run quality --replay run.json
    python -m bench.run quality --model m --repeat 3 --temperature 0.7 \
        --judge-model big-judge --judge-base-url https://judge.example.com/v1

Every table holds the three baselines (`baselines`), computed in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from app.extraction.llm import DEFAULT_KEY_ENV
from app.system import service as system
from bench.common import ROOT
from bench.quality import baselines, judge, recording, report, runner
from bench.quality import cases as labelled
from bench.quality.recording import Recording
from bench.quality.report import Column
from bench.quality.runner import Answer, Endpoint
from bench.quality.scoring import Observation, Scores, summarize

DEFAULT_JSON = ROOT / "bench" / "results" / "quality-scores.json"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run quality",
        description="Run the labelled memory-extraction cases through the service's own "
                    "prompt, parser and rules against an OpenAI-compatible model, and score "
                    "what it learnt.")
    parser.add_argument("--model", action="append", default=[],
                        help="the provider's model name; twice to compare two models")
    parser.add_argument("--base-url", action="append", default=[],
                        help="the endpoint (…/v1); once for all models or once per --model "
                             "(default: OPENAI_BASE_URL, else the openai client's default)")
    parser.add_argument("--api-key-env", action="append", default=[],
                        help="the environment variable holding the key; once for all models "
                             "or once per --model (default: OPENAI_API_KEY)")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="model calls in flight at once (default: 4)")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds per model call before the case is abandoned, as a job "
                             "would be (default: 30)")
    parser.add_argument("--retries", type=int, default=2,
                        help="further tries after a connection error, 429 or 5xx (default: 2)")
    parser.add_argument("--retry-delay", type=float, default=1.0,
                        help="seconds before the first retry, growing linearly (default: 1)")
    parser.add_argument("--cases", type=Path, action="append",
                        help="a JSONL file of cases (default: bench/quality/cases/*.jsonl)")
    parser.add_argument("--kind", action="append", choices=labelled.KINDS,
                        help="only the cases of this kind (repeatable)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON,
                        help="where the scores go (default: bench/results/"
                             "quality-scores.json)")
    parser.add_argument("--record", type=Path,
                        help="save every raw model answer, with tokens and latency, here")
    parser.add_argument("--replay", type=Path,
                        help="score a recorded run again instead of calling a model "
                             "(--model picks among its models)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each model this many times (needs --temperature when > 1); "
                             "each run is a column, the spread is printed")
    parser.add_argument("--temperature", type=float,
                        help="the sampling temperature sent with every call (default: none, "
                             "as a job calls the model)")
    parser.add_argument("--judge-model",
                        help="also score with this judge model's yes/no verdicts (kept in the "
                             "--record file, or added to the --replay file; a replay re-uses "
                             "them)")
    parser.add_argument("--judge-base-url", help="the judge's endpoint (…/v1)")
    parser.add_argument("--judge-api-key-env", default=DEFAULT_KEY_ENV,
                        help="the environment variable holding the judge's key")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat is at least 1")
    if args.repeat > 1 and args.temperature is None:
        parser.error("--repeat needs --temperature: repeats at the provider's default may not "
                     "vary, or vary for reasons nobody set")
    if args.replay is None and not args.model:
        parser.error("--model is required (or --replay FILE)")
    if args.replay is not None and args.record is not None:
        parser.error("--record and --replay do not go together")
    for option in ("base_url", "api_key_env"):
        values = getattr(args, option)
        if len(values) > 1 and len(values) != len(args.model):
            parser.error(f"--{option.replace('_', '-')}: once, or once per --model")
    return args


def endpoints(args: argparse.Namespace) -> list[Endpoint]:
    """One endpoint per --model, each option given once applying to all."""
    def nth(values: list[str], index: int, default: str | None) -> str | None:
        if not values:
            return default
        return values[index] if len(values) > 1 else values[0]

    return [Endpoint(model, nth(args.base_url, i, None),
                     nth(args.api_key_env, i, DEFAULT_KEY_ENV), args.temperature)
            for i, model in enumerate(args.model)]


def unusable(endpoint: Endpoint) -> str | None:
    """Why no case could call this endpoint (a job would skip every one), or None."""
    try:
        system.check_api_key_env(endpoint.api_key_env)
        if endpoint.base_url:
            system.check_base_url(endpoint.base_url)
    except ValueError as exc:
        return str(exc)
    if not os.environ.get(endpoint.api_key_env):
        return f"{endpoint.api_key_env} is not set: export the model's key in it first"
    return None


def _names(models: list[str], repeat: int) -> list[str]:
    """Column names: the model names, numbered when the same model is run twice, and the run
    (`r1`, `r2`, …) when each is repeated."""
    names = [m if models.count(m) == 1 else f"{m} #{models[:i + 1].count(m)}"
             for i, m in enumerate(models)]
    return names if repeat == 1 else [f"{n} r{k}" for n in names for k in range(1, repeat + 1)]


def _baselines(cases: list[labelled.Case]) -> list[tuple[str, Endpoint, dict[str, Answer]]]:
    return [(name, Endpoint(name), baselines.answers(cases, answer))
            for name, answer in baselines.BASELINES.items()]


def main(argv: list[str] | None = None) -> list[Scores]:
    """Score the baselines and the models; the models' scores (baselines are in the JSON)."""
    args = parse_args(argv)
    cases = labelled.load(args.cases)
    if args.kind:
        cases = [c for c in cases if c.kind in args.kind]
    runs: list[tuple[str, Endpoint, dict[str, Answer] | None]]
    kept = Recording()
    recorded = Recording()
    if args.replay is not None:
        recorded = recording.read(args.replay)
        kept.verdicts.update(recorded.verdicts)
        runs = [(name, Endpoint(model), answers) for name, model, answers in recorded.runs
                if not args.model or name in args.model or model in args.model]
        if not runs:
            sys.exit(f"{args.replay} holds none of the models {args.model}")
    else:
        chosen = endpoints(args)
        for endpoint in chosen:
            problem = unusable(endpoint)
            if problem is not None:
                sys.exit(f"quality: {problem}")
        repeated = [e for e in chosen for _ in range(args.repeat)]
        runs = [(name, endpoint, None) for name, endpoint in
                zip(_names(args.model, args.repeat), repeated, strict=True)]
    grade = None if args.judge_model is None else judge.make(
        args.judge_model, kept.verdicts, base_url=args.judge_base_url,
        api_key_env=args.judge_api_key_env, timeout_s=args.timeout)
    observed: list[tuple[str, bool, list[Observation]]] = []
    for name, endpoint, answers in [*_baselines(cases), *runs]:
        is_baseline = name in baselines.BASELINES
        if not is_baseline:
            print(f"{name}: {len(cases)} cases", file=sys.stderr)
        run = runner.run_model(cases, endpoint, name=name, recorded=answers,
                               concurrency=args.concurrency, timeout_s=args.timeout,
                               retries=args.retries, retry_delay_s=args.retry_delay,
                               progress=None if is_baseline else runner.print_progress)
        if run.stale and not is_baseline:
            print(f"note: {name}: {run.stale} recorded answers were given for a prompt that "
                  "has changed since", file=sys.stderr)
        observed.append((name, is_baseline, run.observations))
        if not is_baseline:
            kept.runs.append((name, endpoint.model, run.answers))
    if args.record is not None:
        recording.write(args.record, kept)  # before the judge: a failing judge loses no answer
    try:
        columns = [Column(summarize(name, cases, seen), is_baseline,
                          None if grade is None else summarize(name, cases, seen, grade))
                   for name, is_baseline, seen in observed]
    finally:
        # The judge's verdicts, even those of a run it could not finish, join the recording:
        # the next replay is judged for free.
        if args.record is not None and kept.verdicts:
            recording.write(args.record, kept)
        elif args.replay is not None and kept.verdicts != recorded.verdicts:
            recording.write(args.replay, Recording(recorded.runs, kept.verdicts))
    meta = {"cases": len(cases), "replayed_from": str(args.replay) if args.replay else None,
            "temperature": args.temperature, "judge_model": args.judge_model}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report.to_json(columns, **meta), ensure_ascii=False,
                                    indent=1) + "\n", encoding="utf-8")
    print(report.table(columns).render())
    print(report.guarantees(columns).render())
    if args.repeat > 1:
        for k in range(len(args.model)):
            models = [c.scores for c in columns if not c.baseline][
                k * args.repeat:(k + 1) * args.repeat]
            print(f"{args.model[k]}: {report.spread(models)}")
    print(f"\nscores: {args.json}" + (f"; answers: {args.record}" if args.record else ""))
    return [c.scores for c in columns if not c.baseline]
