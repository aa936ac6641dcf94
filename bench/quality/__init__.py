"""`python -m bench.run quality`: how well a model learns memories through the service's own
extraction prompt, parser and rules (issues 28 and 40; docs/quality.md).

- `cases`: the labelled set (`cases/*.jsonl`), what each case expects and when stored words
  say it; `background`: the unrelated rows of the realistic comparison sets;
- `runner`: every case through the real pipeline, on a temporary SQLite database, against an
  OpenAI-compatible endpoint or a recorded run;
- `baselines`: do-nothing, a regex, echo-the-message — scored in every run;
- `judge`: a judge model's cached yes/no on stored words;
- `scoring`: a case's observed changes against its expectation, and the scores of a run;
- `report`: the side-by-side tables (scores, service guarantees) and the JSON file;
- `recording`: answers and verdicts kept for replay; `cli`: the command line.
"""
