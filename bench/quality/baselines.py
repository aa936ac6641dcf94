"""Three answers anyone gets without a model, scored in every run beside the models: a model's
figures mean something only by how far they clear these.

- `do-nothing`: `[]` for every case. Right wherever nothing should be learnt;
- `regex`: one regular expression for the words people use to state a lasting preference or a
  project rule ("以后", "一直", "always", "from now on", "this repo" …); the clause it finds is
  stored, as a project fact when it names the project, else as the user's;
- `echo`: the user's message itself, cut to the 120-character limit, stored for every case.

Each is an answer text per case, handed to the same parser and rules as a model's (a replay),
so it is scored exactly as a model is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from app.memory.rules import EXTRACTED_CONTENT_MAX, normalize
from bench.quality.cases import Case
from bench.quality.runner import Answer

# A lasting preference or rule, in either language, and the clause around it.
_LASTING = re.compile(
    r"以后|一直|总是|每次|一律|统一|习惯|偏好|我是|我用|我们项目|这个仓库|这个项目|这个服务|"
    r"\b(?:always|from now on|every time|i prefer|i'm a|i am a|i use|my |this repo|"
    r"this project|this service|in this codebase|our repo)", re.IGNORECASE)
_CLAUSE = re.compile(r"[^,.;!?,。;!?\n]+")
_PROJECT = re.compile(r"我们项目|这个仓库|这个项目|这个服务|仓库|\b(?:this repo|this project|"
                      r"this service|in this codebase|our repo)", re.IGNORECASE)


def do_nothing(case: Case) -> str:
    return "[]"


def regex(case: Case) -> str:
    for clause in _CLAUSE.findall(case.user):
        if _LASTING.search(clause):
            content = normalize(clause)[:EXTRACTED_CONTENT_MAX]
            kind = "project" if _PROJECT.search(clause) else "user"
            return json.dumps([{"type": kind, "action": "insert", "content": content}],
                              ensure_ascii=False)
    return "[]"


def echo(case: Case) -> str:
    content = normalize(case.user)[:EXTRACTED_CONTENT_MAX]
    return json.dumps([{"type": "user", "action": "insert", "content": content}],
                      ensure_ascii=False)


BASELINES: dict[str, Callable[[Case], str]] = {
    "baseline: do-nothing": do_nothing,
    "baseline: regex": regex,
    "baseline: echo": echo,
}


def answers(cases: Sequence[Case], answer: Callable[[Case], str]) -> dict[str, Answer]:
    """A baseline's answer for every case, as a recording to replay."""
    return {case.id: Answer(text=answer(case)) for case in cases}
