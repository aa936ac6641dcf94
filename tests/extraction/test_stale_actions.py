"""What the model proposed applies to what it saw (SPEC §11): a touch or update of a row changed
since the job read it — by its user while the model thought — is not applied and counted
`stale`. Real MariaDB, RQ and openai; the user's edit goes through the domain's own service."""

from __future__ import annotations

import threading

import pytest

from app.memory import service as memory_service
from app.memory.rules import Status
from tests.completions import USER_ID


@pytest.mark.parametrize("action", ["touch", "update"])
def test_a_users_edit_made_while_the_model_thought_is_left_as_the_user_made_it(
        app, extract, llm, memories, action):
    row = memories.add(USER_ID, "仓库统一用 npm 管理依赖", source="AUTO")
    answer = {"type": "user", "action": action, "existingId": row}
    if action == "update":
        answer["content"] = "仓库统一用 pnpm 9 管理依赖"

    def edit_while_the_model_thinks() -> None:
        llm.wait_for_requests(1)
        with app.app_context():
            memory_service.update_item(USER_ID, row, content="仓库统一用 yarn 管理依赖")

    editor = threading.Thread(target=edit_while_the_model_thinks)
    editor.start()
    try:
        llm.reply_items([answer], delay=1.0)
        outcome = extract(None)
    finally:
        editor.join()

    after = memories.get(row)
    assert (after["content"], after["version"]) == ("仓库统一用 yarn 管理依赖", 2)
    assert (outcome["status"], outcome["stale"], outcome["touched"], outcome["updated"]) == \
        ("succeeded", 1, 0, 0)


def test_a_row_dismissed_while_the_model_thought_is_not_touched(app, extract, llm, memories):
    row = memories.add(USER_ID, "仓库统一用 npm 管理依赖", source="AUTO")

    def dismiss_while_the_model_thinks() -> None:
        llm.wait_for_requests(1)
        with app.app_context():
            memory_service.update_item(USER_ID, row, status=Status.DISMISSED)

    dismisser = threading.Thread(target=dismiss_while_the_model_thinks)
    dismisser.start()
    try:
        llm.reply_items([{"type": "user", "action": "touch", "existingId": row}], delay=1.0)
        outcome = extract(None)
    finally:
        dismisser.join()

    after = memories.get(row)
    assert (after["status"], after["version"]) == ("DISMISSED", 2)
    assert (outcome["stale"], outcome["touched"]) == (1, 0)


def test_an_update_by_a_job_raises_the_version_and_a_touch_does_not(extract, memories):
    touched = memories.add(USER_ID, "回答尽量简短", source="AUTO")
    rewritten = memories.add(USER_ID, "仓库统一用 npm 管理依赖", source="AUTO")
    outcome = extract([{"type": "user", "action": "touch", "existingId": touched},
                       {"type": "user", "action": "update", "existingId": rewritten,
                        "content": "仓库统一用 pnpm 管理依赖"}])
    assert (outcome["touched"], outcome["updated"], outcome["stale"]) == (1, 1, 0)
    assert (memories.get(touched)["version"], memories.get(rewritten)["version"]) == (1, 2)
