"""Automatic capture (seed §5.6, §10): from a finished task to memory rows.

`intake` records what the completion webhook reports and enqueues a job; `queue` runs jobs (RQ
on Redis, or one in-process thread in the embedded setup); `runner` is the job itself (session
lock, transaction, retries, outcome); `pipeline` applies the rules (D8, D10, D11, D13, D14) with
`prompt`, `parser` and `llm`, the only module that talks to a model.
"""
