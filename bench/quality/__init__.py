"""`python -m bench.run quality`: how well a model learns memories through the service's own
extraction prompt, parser and rules (issue 28).

- `cases`: the labelled set (`cases/*.jsonl`) and what each case expects;
- `runner`: every case through the real pipeline, on a temporary SQLite database, against an
  OpenAI-compatible endpoint or a recorded run;
- `scoring`: a case's observed changes against its expectation, and the scores of a run;
- `report`: the side-by-side table and the JSON file;
- `cli`: the command line.
"""
