"""任务记录 (SPEC §8 Operations): recent background job outcomes for admins, read-only.

What became of each extraction and consolidation job — status, why, which model, tokens, how
long — so an operator reads a failure here instead of in a log, and token totals per user and
model show where the LLM spend goes. Filters (status, user) and the page live in the URL; htmx
swaps only the results.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flask import request, url_for
from werkzeug.datastructures import MultiDict

from app import pages, wire
from app.admin.pages import allowed_if
from app.auth.models import User
from app.errors import InvalidInput
from app.extraction.models import JobOutcome
from app.extraction.outcomes import OutcomeStatus
from app.paging import PageRequest

bp = pages.blueprint("outcome_pages", __name__, "/admin")

PAGE_SIZE = 50
TOTALS_LIMIT = 20
KIND_LABELS = {"extraction": "提取", "consolidation": "整理"}
STATUS_LABELS = {OutcomeStatus.SUCCEEDED.value: "成功", OutcomeStatus.SKIPPED.value: "跳过",
                 OutcomeStatus.ABANDONED.value: "放弃", OutcomeStatus.FAILED.value: "失败"}
STATUS_FILTERS = (("", "全部"), *STATUS_LABELS.items())
# What each reason a job records means, for a reader without the code or the log. A reason
# not listed (a new one) is shown as recorded.
REASON_LABELS = {
    "applied": "已写入记忆",
    "nothing_to_remember": "没有需要记住的内容",
    "comparison_set_unavailable": "已写入,但读取已有记忆失败,未与其比较",
    "auto_capture_disabled": "用户未开启自动收集",
    "missing_message": "缺少用户消息或回答",
    "user_message_too_short": "用户消息不足 20 字,未调用模型",
    "no_model": "未配置提取模型:请用 models add 注册模型,或在系统设置中选择",
    "llm_api_key_missing": "模型的 API 密钥未设置:其 api_key_env 指定的环境变量为空",
    "llm_unavailable": "模型服务不可用(连接失败、429 或 5xx),重试后仍失败",
    "llm_timeout": "模型在 MEMORY_LLM_TIMEOUT_S 内没有回答",
    "llm_rejected": "模型服务拒绝了请求(4xx):检查模型名、地址和密钥",
    "llm_error": "模型调用失败",
    "invalid_output": "模型的回答不符合约定格式",
    "too_many_items": "模型一次给出的记忆超过 3 条",
    "foreign_ids": "整理方案引用了本组以外的记忆",
    "duplicate_ids": "整理方案重复引用同一条记忆",
    "drops_everything": "整理方案要删除整组记忆",
    "merge_single_source": "整理方案的合并少于 2 条记忆",
    "merge_too_long": "合并后的内容超过 120 字",
    "session_busy": "同一会话的上一个任务占用太久",
    "worker_killed": "执行任务的进程被终止",
    "worker_lost": "执行任务的 worker 已退出,任务未完成",
    "internal_error": "内部错误(详见日志)",
    "unfinished": "任务未完成",
    "too_few_rows": "记忆太少,无需整理",
    "nothing_to_consolidate": "无需整理",
    "consolidated": "已整理",
    "concurrent_write": "整理期间同样的内容被写入,已放弃",
    "inputs_changed": "整理期间记忆被修改,已放弃",
}


@dataclass(frozen=True)
class OutcomeView:
    """The filters and page the URL asks for."""

    status: str = ""
    user_id: int | None = None
    page: int = 1

    @classmethod
    def from_values(cls, values: MultiDict[str, str]) -> OutcomeView:
        """Parsed as the admin API parses them, so a bad value is the usual 2001."""
        status = values.get("status") or ""
        if status and status not in STATUS_LABELS:
            raise InvalidInput("outcome_status_invalid",
                               f"status must be one of {', '.join(STATUS_LABELS)}")
        raw_user = values.get("userId")
        user_id = wire.user_id(raw_user, "userId") if raw_user else None
        return cls(status, user_id, PageRequest.parse(values.get("page"), PAGE_SIZE).number)

    def url(self, **changes: Any) -> str:
        """This view's URL with `changes`; empty values stay out of the URL."""
        view = replace(self, **changes)
        return url_for("outcome_pages.outcomes", status=view.status or None,
                       userId=view.user_id, page=view.page if view.page > 1 else None)


@bp.get("/outcomes")
@allowed_if(lambda user: user.is_admin, "任务记录仅管理员可用")
def outcomes():
    """任务记录: a page of job outcomes (newest first) and token totals per user and model, both
    under the URL's filters; for htmx only the results fragment."""
    view = OutcomeView.from_values(request.args)
    status = view.status or None
    listing = JobOutcome.page(PageRequest(view.page, PAGE_SIZE), user_id=view.user_id,
                              status=status)
    totals = JobOutcome.token_totals_by_user(user_id=view.user_id, status=status,
                                             limit=TOTALS_LIMIT)
    names = User.display_names({row.user_id for row in listing.records}
                               | {row[0] for row in totals})
    return pages.page_or_fragment(
        "admin/outcomes.html", "admin/_outcomes_results.html",
        view=view, listing=listing, totals=totals, names=names,
        status_filters=STATUS_FILTERS, status_labels=STATUS_LABELS, kind_labels=KIND_LABELS,
        reason_labels=REASON_LABELS, totals_limit=TOTALS_LIMIT,
    )
