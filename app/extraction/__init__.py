"""Automatic capture (seed §5.6, §10): from a finished task to memory rows.

- `intake` (+ `intake_db`, its statements): what the completion webhook records and decides.
- `queue`: runs jobs — RQ on Redis, or one in-process thread in the embedded setup.
- `runner`: the job itself — session lock, one transaction, retries, the outcome (`outcomes`).
- `pipeline`: the rules (D8, D10, D11, D13, D14), with `prompt`, `parser` and `llm`, the only
  module that talks to a model.
- `models`: the received events and the job outcomes.
"""
