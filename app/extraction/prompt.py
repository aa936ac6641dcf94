"""The LLM prompts, kept here as reviewable constants: extraction and consolidation.

Extraction (seed §5.6 step 2, D13 protocol): the model sees the last user message, the
assistant's final answer, the machine-made memories it may match (with ids: the comparison set)
and the dismissed contents it must stay away from (no ids: the negative set). It answers with a
JSON array that `parser.parse` reads.

Consolidation (seed §10.3, D15): the model sees one group's machine-made ACTIVE rows with ids —
never a MANUAL or DISMISSED row — and how many rows the group should come down to. It answers
with merge/keep/drop operations that `parser.parse_plan` reads.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.memory.repository import Known
from app.memory.rules import EXTRACT_MAX_ITEMS, EXTRACTED_CONTENT_MAX, Group, one_line

SYSTEM_PROMPT = f"""你是长期记忆抽取器。\
输入是一次已完成任务的最后一轮对话(用户消息与助手的最终答复),以及这位用户已有的记忆。请找出值得长期记住的事实,并判断它与已有记忆的关系。

只抽取明确的长期事实或偏好:
- type=user:用户本人的长期偏好或习惯,例如"输出报告用中文"、"习惯用 pnpm";
- type=project:当前项目/仓库的长期事实,例如"该仓库测试用 Vitest"。没有当前项目时不要输出 project。
猜测、闲聊、寒暄、一次性任务细节、临时状态一律不抽。
绝不抽取凭据:密码、口令、API 密钥、访问令牌、私钥、带密码的连接地址、银行卡号、身份证号,\
哪怕用户说要记住;可以记"凭据存放在哪里",不记凭据本身。

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


# Each known row on one line of its own, as the injected block does it (`rules.one_line`): a
# row stored with a newline or a control character cannot start a line the model reads as
# instructions. (Nearly every row is clean already, which one_line settles at C speed: a
# comparison set is up to 200 rows per job.)
def _existing_line(memory: Known) -> str:
    return f"- id={memory.id} {memory.group.label} {one_line(memory.content)}"


def build_messages(*, project_key: str | None, comparison: Sequence[Known],
                   dismissed: Sequence[str], user_message: str,
                   assistant_message: str) -> list[dict[str, str]]:
    """The chat messages of one extraction call."""
    existing = "\n".join(_existing_line(m) for m in comparison) or NOTHING
    negative = "\n".join(f"- {one_line(c)}" for c in dismissed) or NOTHING
    user = USER_PROMPT.format(project=project_key or NO_PROJECT, existing=existing,
                              dismissed=negative, user_message=user_message,
                              assistant_message=assistant_message)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def prompt_chars(messages: Sequence[dict[str, str]]) -> int:
    """Prompt size in code points, recorded with each outcome."""
    return sum(len(m["content"]) for m in messages)


# ---- consolidation (D15) -----------------------------------------------------------------

CONSOLIDATION_SYSTEM_PROMPT = f"""你是长期记忆整理器。\
输入是同一位用户、同一分组里由系统自动记下的记忆,每条带 id。\
请把说同一件事或紧密相关的条目合并、把冗余条目删掉,\
让这一组更精简,但不能丢失任何不重复的事实。

每个 id 最多出现在一个操作里,只能使用列出的 id:
- op=merge:两条及以上说的是同一件事或紧密相关的事,合并成一条完整表述;\
sourceIds 填被合并的 id(至少 2 个),content 填合并后的表述\
(不超过 {EXTRACTED_CONTENT_MAX} 字,保持原文的语言,不添加原文没有的信息);
- op=keep:保持原样的条目;
- op=drop:与某条 keep 条目或某个 merge 结果意思完全相同的冗余条目,会被删除。
没有出现在任何操作里的条目保持原样。拿不准时用 keep。

输出要求:只输出一个 JSON 数组,不要任何其他文字:\
[{{"op": "merge", "sourceIds": [11, 12], "content": "..."}}, {{"op": "keep", "sourceIds": [7]}}, \
{{"op": "drop", "sourceIds": [9]}}]"""

CONSOLIDATION_USER_PROMPT = """分组:{group}
目标:整理后本组不超过 {budget} 条(这是目标,不是删掉不重复事实的理由)。

记忆:
{rows}"""


def build_consolidation_messages(*, group: Group, budget: int,
                                 rows: Sequence[tuple[int, str]]) -> list[dict[str, str]]:
    """The chat messages of one consolidation call: a group and its (id, content) rows."""
    lines = "\n".join(f"- id={item_id} {one_line(content)}" for item_id, content in rows)
    user = CONSOLIDATION_USER_PROMPT.format(group=group.label, budget=budget, rows=lines)
    return [{"role": "system", "content": CONSOLIDATION_SYSTEM_PROMPT},
            {"role": "user", "content": user}]
