"""What the pages tell a person, in Chinese: one sentence per refusal, saying what to do next.

The domain refuses with a stable `reason` (`app.errors`); the JSON API keeps sending its English
`message`, the pages look the reason up here instead. A reason not in the table falls back to a
sentence for its SPEC §4 error code, so a new rule is never shown in English.
"""

from __future__ import annotations

from app.auth.csrf import CSRF_INVALID, CSRF_SENTENCE
from app.envelope import ApiError, ErrorCode
from app.errors import DomainError
from app.memory.rules import ACTIVE_PER_USER_MAX, MANUAL_CONTENT_MAX, PROJECT_KEY_MAX
from app.memory.secrets import Kind as SecretKind

REASONS: dict[str, str] = {
    # a memory's content
    "content_type": "内容格式不对:请输入文字后再保存。",
    "content_empty": "内容不能为空:请写下要记住的内容。",
    "content_too_long": f"内容超过 {MANUAL_CONTENT_MAX} 字:请精简到 {MANUAL_CONTENT_MAX} 字以内。",
    "content_control_chars": "内容里有看不见的控制字符(常见于复制粘贴):请删掉它们后再保存。",
    "duplicate_content": "已有相同内容的记忆:请修改内容,或直接使用已有的那条。",
    **{f"content_secret_{kind.value}": (f"内容{kind.suspected}:密码、密钥、令牌等凭据不能存为记忆,"
                                         "请删掉它后再保存。") for kind in SecretKind},
    "active_limit": (f"生效中的记忆已达 {ACTIVE_PER_USER_MAX} 条上限:"
                     "请先删除或忽略一些,再新增或恢复。"),
    "memory_not_found": "这条记忆已不存在(可能已在别处删除):请刷新页面。",
    "version_conflict": "这条记忆已在别处改过:请看一下现在的样子,再决定是否重做这次修改。",
    "nothing_to_change": "没有要保存的修改:请修改内容后再保存。",
    # the project of a PROJECT memory
    "project_key_required": "项目级记忆需要一个项目:请选择或输入项目标识。",
    "project_key_type": "项目标识格式不对:请重新选择或输入项目。",
    "project_key_too_long": f"项目标识超过 {PROJECT_KEY_MAX} 个字符:请检查后重新输入。",
    "project_key_bot": ("这是机器人渠道(如微信、飞书群聊)的标识,不是项目:"
                        "请换一个项目,或改为用户级记忆。"),
    "project_key_control_chars": "项目标识里有看不见的控制字符:请重新输入项目标识。",
    # the view: filters and paging live in the URL
    "scope_invalid": "范围只能是「用户」或「项目」:请用页面上的标签切换。",
    "status_invalid": "状态只能是「生效中」或「已忽略」:请用页面上的筛选切换。",
    "page_invalid": "页码不对:请用页面上的翻页链接。",
    "page_size_invalid": "每页条数不对:请用页面上的翻页链接。",
    "search_invalid": "搜索词太长:请缩短到 500 字以内。",
    "outcome_status_invalid": "状态筛选不对:请用页面上的筛选切换。",
    "outcome_kind_invalid": "任务类型筛选不对:请用页面上的筛选切换。",
    # the auto-capture switch
    "auto_capture_type": "自动收集只能开启或关闭:请刷新页面后再点开关。",
    "auto_capture_required": "自动收集只能开启或关闭:请刷新页面后再点开关。",
    # the audit
    "user_id_required": "还没有选择用户:请先查找并选择一个用户。",
    "user_id_invalid": "用户 ID 应是正整数:请检查地址,或用搜索查找用户。",
    # system settings
    "setting_value_type": "设置的值格式不对:请重新选择后保存。",
    "setting_unknown": "没有这项设置:请刷新系统设置页面。",
    "setting_not_editable": "这项设置不能在页面上修改:如需调整,请联系运维。",
    "model_not_found": "所选模型不存在(可能已被移除):请刷新页面后重新选择。",
    # a request as such
    "body_not_object": "提交的数据格式不对:请刷新页面后重试。",
    "json_too_deep": "提交的数据嵌套太深:请刷新页面后重试。",
    CSRF_INVALID: CSRF_SENTENCE,
}

# For a reason the table does not know yet: a sentence per error code.
BY_CODE: dict[ErrorCode, str] = {
    ErrorCode.UNAUTHORIZED: "登录已失效:请重新登录。",
    ErrorCode.FORBIDDEN: "你没有权限这样做:如有需要,请联系管理员。",
    ErrorCode.PARAM_INVALID: "输入有误:请检查后重试。",
    ErrorCode.MODEL_NOT_FOUND: "所选模型不存在:请刷新页面后重新选择。",
    ErrorCode.MEMORY_ITEM_NOT_FOUND: "这条记忆已不存在:请刷新页面。",
    ErrorCode.MEMORY_CONTENT_INVALID: "内容不符合要求:请检查后重试。",
    ErrorCode.MEMORY_CONTENT_DUPLICATE: "已有相同内容的记忆:请修改内容。",
    ErrorCode.MEMORY_LIMIT_EXCEEDED: (f"生效中的记忆已达 {ACTIVE_PER_USER_MAX} 条上限:"
                                      "请先删除或忽略一些。"),
    ErrorCode.MEMORY_VERSION_CONFLICT: "这条记忆已在别处改过:请刷新页面,看过现在的样子再操作。",
    ErrorCode.MEMORY_CONTENT_SECRET: ("内容里疑似有密码、密钥或令牌:凭据不能存为记忆,"
                                      "请删掉后再保存。"),
    ErrorCode.INTERNAL_ERROR: "服务暂时不可用:请稍后重试。",
}

# The heading of a whole error page, by error code.
HEADINGS: dict[ErrorCode, str] = {
    ErrorCode.UNAUTHORIZED: "请先登录",
    ErrorCode.FORBIDDEN: "没有权限",
    ErrorCode.PARAM_INVALID: "地址有误",
    ErrorCode.MODEL_NOT_FOUND: "模型不存在",
    ErrorCode.MEMORY_ITEM_NOT_FOUND: "记忆不存在",
    ErrorCode.MEMORY_CONTENT_INVALID: "内容不符合要求",
    ErrorCode.MEMORY_CONTENT_DUPLICATE: "内容重复",
    ErrorCode.MEMORY_LIMIT_EXCEEDED: "已达上限",
    ErrorCode.MEMORY_VERSION_CONFLICT: "记忆已在别处改过",
    ErrorCode.MEMORY_CONTENT_SECRET: "内容含有凭据",
    ErrorCode.INTERNAL_ERROR: "服务暂时不可用",
}

# Pages for what the web server itself refuses (no route, wrong method, …): heading, sentence.
HTTP_PAGES: dict[int, tuple[str, str]] = {
    400: ("请求有误", "页面发出的请求不完整:请刷新页面后重试。"),
    403: ("没有权限", "你没有权限打开这个页面:如有需要,请联系管理员。"),
    404: ("页面不存在", "这个地址没有页面:请检查地址,或回到我的记忆。"),
    405: ("不支持这样打开这个地址", "这个地址只能由页面上的按钮使用:请回到页面操作。"),
    413: ("提交的内容太大", "提交的内容超过了服务能接收的大小:请精简后重试。"),
    429: ("操作太频繁", "操作太频繁:请稍等片刻再试。"),
    500: ("出错了", "服务出了问题:请稍后重试;一直这样的话,请联系管理员。"),
    503: ("服务暂时不可用", "服务所依赖的数据库或队列暂时连不上:请稍后重试。"),
}
HTTP_FALLBACK = ("出错了", "服务暂时不可用:请稍后重试。")

# Why automatic capture cannot extract anything now (`llm.unavailable_reason()`), for the person
# who can fix it and for the person who only sees nothing being captured.
EXTRACTION_UNAVAILABLE_FOR_ADMIN: dict[str, str] = {
    "no_model": ("还没有可用的模型,自动收集不会提取任何记忆:"
                 "请运维用 flask --app wsgi models add 注册模型并设为默认,或在这里选择一个。"),
    "llm_api_key_missing": ("所选模型的 API 密钥没有配置,自动收集不会提取任何记忆:"
                            "请在服务的环境变量 {env} 里设置该模型的密钥,或换一个模型。"),
}
EXTRACTION_UNAVAILABLE_FOR_USER: dict[str, str] = {
    "no_model": "系统还没有配置可用的模型,暂时不会自动收集任何记忆:请联系管理员。",
    "llm_api_key_missing": "系统的模型密钥还没有配置,暂时不会自动收集任何记忆:请联系管理员。",
}


def _as_api_error(exc: ApiError | DomainError) -> ApiError:
    return exc if isinstance(exc, ApiError) else ApiError.from_domain(exc)


def sentence(exc: ApiError | DomainError) -> str:
    """The sentence a person reads for a refusal: by its reason, else by its error code."""
    error = _as_api_error(exc)
    return REASONS.get(error.reason) or BY_CODE[error.error]


def heading(exc: ApiError | DomainError) -> str:
    """The heading of a whole page that shows the refusal."""
    return HEADINGS[_as_api_error(exc).error]


def http_page(status: int) -> tuple[str, str]:
    """(heading, sentence) of a page for an HTTP error the web server itself answers."""
    return HTTP_PAGES.get(status, HTTP_FALLBACK)
