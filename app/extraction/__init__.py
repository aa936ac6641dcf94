"""Automatic capture (seed §5.6, §10): from a finished task to memory rows.

- `intake`: what the completion webhook records and decides.
- `queue`: transport for jobs — RQ on Redis, or one in-process thread in the embedded setup —
  and the per-session lock. The job kinds themselves are defined in `jobs/`.
- `runner`: the jobs' transactions, retries and outcome (`outcomes`).
- `pipeline`: read the inputs, ask the model, hand its answer to the domain (D8, D10, D11,
  D13), with `prompt`, `parser` and `llm`, the only module that talks to a model.
- `trigger` and `consolidation`: D15 — when a consolidation follows an extraction, and the
  merge/keep/drop of one memory group.
- `models`: the received events, the job outcomes and the consolidation cooldown.

The rules that change memories (D3, D13, D14, D15's application) live in `app.memory`.
"""
