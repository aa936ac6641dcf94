"""`--judge-model`: a second opinion on whether stored words say an expected memory.

The keyword rule (`cases.verdict`) is fixed and cheap but blind to paraphrase; a judge model
reads the conversation, the expected memory and the stored words and answers yes or no. Its
verdicts are kept by a hash of the judge's name and the exact question, and saved in the
`--record` file, so a replay is judged again for free and always the same way. Only pairs the
pairing could use are asked (the right scope or the right row).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, MutableMapping

from app.extraction import llm
from bench.quality.cases import Case, Effect

SYSTEM = (
    "You grade a long-term memory written by an assistant after a conversation. Answer with "
    "one word: yes or no. Say yes only when the stored memory states the expected fact with "
    "the user's meaning: not inverted, not a one-off detail of this task, not a verbatim copy "
    "of the message, nothing the user did not say.")


def question(case: Case, effect: Effect, words: str) -> list[dict[str, str]]:
    user = (f"User message:\n{case.user}\n\nAssistant's answer:\n{case.assistant}\n\n"
            f"Expected memory (keywords, any language): {effect.describe()}\n"
            f"Case note: {case.why or '-'}\n\nStored memory:\n{words}\n\n"
            "Does the stored memory state the expected fact? yes or no")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def key(judge_model: str, messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps([judge_model, messages], ensure_ascii=False,
                                     sort_keys=True).encode()).hexdigest()


def parse(text: str) -> bool:
    """A yes/no answer, read from its first word (anything else is a no)."""
    words = text.strip().lower().split()
    return bool(words) and words[0].strip(".,!:;\"'") in ("yes", "是", "是的")


def make(judge_model: str, verdicts: MutableMapping[str, bool], *,
         base_url: str | None = None, api_key_env: str = llm.DEFAULT_KEY_ENV,
         timeout_s: float = 30.0) -> Callable[[Case, Effect, str], bool]:
    """A `scoring.Judge` reading `verdicts` first and asking the judge model for the rest,
    kept in `verdicts`."""
    model = llm.ChatModel(0, "judge", judge_model, base_url, api_key_env)

    def judge(case: Case, effect: Effect, words: str) -> bool:
        messages = question(case, effect, words)
        digest = key(judge_model, messages)
        if digest not in verdicts:
            verdicts[digest] = parse(llm.complete(model, messages, timeout_s).text)
        return verdicts[digest]
    return judge
