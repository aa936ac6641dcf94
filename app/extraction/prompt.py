"""The extraction prompt (seed §5.6 step 2, D13 protocol), kept here as reviewable constants.

The model sees the last user message, the assistant's final answer, the machine-made memories it
may match (with ids: the comparison set) and the dismissed contents it must stay away from (no
ids: the negative set). It answers with a JSON array that `parser` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.memory.rules import EXTRACT_MAX_ITEMS, EXTRACTED_CONTENT_MAX, Scope, normalize

SYSTEM_PROMPT = f"""你是长期记忆抽取器。\
输入是一次已完成任务的最后一轮对话(用户消息与助手的最终答复),以及这位用户已有的记忆。请找出值得长期记住的事实,并判断它与已有记忆的关系。

只抽取明确的长期事实或偏好:
- type=user:用户本人的长期偏好或习惯,例如"输出报告用中文"、"习惯用 pnpm";
- type=project:当前项目/仓库的长期事实,例如"该仓库测试用 Vitest"。没有当前项目时不要输出 project。
猜测、闲聊、寒暄、一次性任务细节、临时状态一律不抽。

与"已有记忆"比较(每条带 id;只能引用列出的 id,type 与该条的类别一致):
- action=insert:全新的事实,不带 existingId;
- action=touch:与某条已有记忆说的是同一件事,existingId 填该条 id,content 可省略;
- action=update:与某条已有记忆是同一件事且新表述更完整,existingId 填该条 id,content 填完整的新表述。
"已忽略的内容"是用户明确不要的记忆:不要抽取与其语义相近的任何内容。

输出要求:
- 只输出一个 JSON 数组,不要任何其他文字:\
[{{"type": "user|project", "action": "insert|touch|update", "existingId": 123, "content": "..."}}]
- 最多 {EXTRACT_MAX_ITEMS} 条,每条 content 不超过 {EXTRACTED_CONTENT_MAX} 字;
- content 保持用户原话的语言;
- 没有值得记住的内容时输出 []。"""

USER_PROMPT = """当前项目:{project}

已有记忆:
{existing}

已忽略的内容:
{dismissed}

用户消息:
<user_message>
{user_message}
</user_message>

助手的最终答复:
<assistant_message>
{assistant_message}
</assistant_message>"""

NOTHING = "(无)"
NO_PROJECT = "(无:本次会话不属于任何项目,只能输出 type=user)"


@dataclass(frozen=True)
class KnownMemory:
    """A comparison-set row as the model sees it."""

    id: int
    scope: str
    project_key: str
    content: str


def _existing_line(memory: KnownMemory) -> str:
    label = "[用户]" if memory.scope == Scope.USER else f"[项目:{memory.project_key}]"
    return f"- id={memory.id} {label} {normalize(memory.content)}"


def build_messages(*, project_key: str | None, comparison: Sequence[KnownMemory],
                   dismissed: Sequence[str], user_message: str,
                   assistant_message: str) -> list[dict[str, str]]:
    """The chat messages of one extraction call."""
    existing = "\n".join(_existing_line(m) for m in comparison) or NOTHING
    negative = "\n".join(f"- {normalize(c)}" for c in dismissed) or NOTHING
    user = USER_PROMPT.format(project=project_key or NO_PROJECT, existing=existing,
                              dismissed=negative, user_message=user_message,
                              assistant_message=assistant_message)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def prompt_chars(messages: Sequence[dict[str, str]]) -> int:
    """Prompt size in code points, recorded with each outcome."""
    return sum(len(m["content"]) for m in messages)
