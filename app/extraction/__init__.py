"""Automatic capture (seed §5.6, §10): from a finished task to memory rows.

- `intake` (+ `intake_db`, its statements): what the completion webhook records and decides.
- `queue`: runs jobs — RQ on Redis, or one in-process thread in the embedded setup.
- `runner`: the jobs themselves — session lock, one transaction, retries, the outcome
  (`outcomes`).
- `pipeline`: the rules (D8, D10, D11, D13, D14), with `prompt`, `parser` and `llm`, the only
  module that talks to a model.
- `trigger` and `consolidation`: D15 — when a consolidation follows an extraction, and the
  merge/keep/drop of one memory group.
- `models`: the received events, the job outcomes and the consolidation cooldown.
"""
