"""The realistic comparison set: unrelated machine-made rows a case can add (`"background": N`).

A real user has 20–200 memories, and the job shows the model all of them (D13); a case with
only the one row it is about makes matching trivially easy. These rows are drawn from a fixed
pool, in an order fixed by the case id (the same rows every run), skipping every row whose
topic words appear anywhere in the case (its messages, its rows, what it expects): a background
row never says, or contradicts, what the case is about. PROJECT rows of the pool belong to the
case's project when it has a valid one, and are left out when it has none.
"""

from __future__ import annotations

import hashlib
import unicodedata

# (scope, content, topic words): written by hand, in both languages.
_HAND: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("USER", "用户的主力浏览器是 Firefox", ("浏览器", "Firefox")),
    ("USER", "用户习惯在周五下午写周报", ("周报",)),
    ("USER", "用户用 1Password 管理密码", ("1Password", "密码")),
    ("USER", "用户的终端主题偏好深色", ("终端", "深色", "主题")),
    ("USER", "用户读代码时喜欢先看测试", ("测试",)),
    ("USER", "用户常用的笔记软件是 Obsidian", ("Obsidian", "笔记")),
    ("USER", "用户有一只叫团子的猫", ("猫", "团子")),
    ("USER", "用户不喝咖啡,只喝茶", ("咖啡", "茶")),
    ("USER", "用户每周二晚上打羽毛球", ("羽毛球",)),
    ("USER", "用户在学日语,水平 N3", ("日语", "N3")),
    ("USER", "用户的显示器是 27 寸 4K", ("显示器", "4K")),
    ("USER", "用户喜欢用思维导图梳理需求", ("思维导图", "需求")),
    ("USER", "用户习惯用 Git rebase 保持提交线性", ("rebase", "提交")),
    ("USER", "用户的 Git 提交信息用英文写", ("提交信息", "commit")),
    ("USER", "用户常在地铁上用手机看文档", ("地铁", "手机")),
    ("USER", "用户偏好 Tab 宽度为 4", ("Tab", "缩进")),
    ("USER", "用户是 Rust 初学者", ("Rust",)),
    ("USER", "用户负责公司的数据平台组", ("数据平台",)),
    ("USER", "用户喜欢在例子里用真实数据而不是 foo/bar", ("foo", "例子")),
    ("USER", "用户每天早上九点半开站会", ("站会",)),
    ("USER", "用户习惯用 Excel 做数据核对", ("Excel", "核对")),
    ("USER", "用户出差常去深圳", ("深圳", "出差")),
    ("USER", "用户的家乡是成都,爱吃辣", ("成都", "辣")),
    ("USER", "用户用 Kindle 看技术书", ("Kindle",)),
    ("USER", "用户更习惯看流程图而不是时序图", ("流程图", "时序图")),
    ("USER", "用户的 SSH 密钥用 ed25519", ("SSH", "ed25519")),
    ("USER", "用户讨厌会议超过半小时", ("会议",)),
    ("USER", "用户写文档喜欢用编号列表", ("编号", "列表")),
    ("USER", "用户在用 Arch Linux 的台式机", ("Arch", "台式机")),
    ("USER", "用户关注数据库内核方向的论文", ("论文", "内核")),
    ("USER", "The user reads changelogs before upgrading anything", ("changelog", "upgrad")),
    ("USER", "The user keeps a personal wiki in Notion", ("Notion", "wiki")),
    ("USER", "The user prefers metric units", ("metric", "units")),
    ("USER", "The user is based in Berlin", ("Berlin",)),
    ("USER", "The user plays chess online most evenings", ("chess",)),
    ("USER", "The user likes examples in TypeScript", ("TypeScript", "examples")),
    ("USER", "The user works four days a week, never on Fridays", ("Friday", "four days")),
    ("USER", "The user uses a split ergonomic keyboard", ("keyboard", "ergonomic")),
    ("USER", "The user's team does code review in pairs", ("review", "pairs")),
    ("USER", "The user prefers dark mode in every tool", ("dark mode", "dark")),
    ("USER", "The user drinks decaf after 2 pm", ("decaf", "coffee")),
    ("USER", "The user writes design docs in Google Docs", ("Google Docs", "design doc")),
    ("USER", "The user has a dog called Miso", ("dog", "Miso")),
    ("USER", "The user is learning Spanish", ("Spanish",)),
    ("USER", "The user runs Linux Mint on a ThinkPad", ("Mint", "ThinkPad")),
    ("USER", "The user tracks tasks in Linear", ("Linear", "tasks")),
    ("USER", "The user prefers ISO 8601 dates", ("ISO 8601", "dates")),
    ("USER", "The user likes diagrams drawn in Mermaid", ("Mermaid", "diagram")),
    ("USER", "The user cycles to work", ("cycle", "bike")),
    ("USER", "The user reviews pull requests in the morning", ("pull request", "morning")),
    ("USER", "The user is on the platform team", ("platform team",)),
    ("USER", "The user keeps dotfiles in a bare Git repo", ("dotfiles",)),
    ("USER", "The user prefers podcasts to videos for learning", ("podcast", "video")),
    ("USER", "The user uses Firefox Developer Edition", ("Firefox Developer",)),
    ("USER", "The user likes tables with units in the header", ("units in the header",)),
    ("USER", "The user was a physics teacher before", ("physics", "teacher")),
    ("USER", "The user's laptop is a Framework 13", ("Framework 13", "laptop")),
    ("USER", "The user avoids meetings before 10 am", ("meetings", "10 am")),
    ("USER", "The user writes commit messages in the imperative", ("imperative",)),
    ("USER", "The user uses tmux with the prefix on Ctrl-a", ("tmux",)),
    ("PROJECT", "该项目的日志统一输出 JSON 格式", ("日志", "JSON")),
    ("PROJECT", "该项目的前端组件库是 Ant Design", ("Ant Design", "组件库")),
    ("PROJECT", "该项目的发布窗口是每周四晚上", ("发布", "周四")),
    ("PROJECT", "该项目的配置放在 Apollo 配置中心", ("Apollo", "配置中心")),
    ("PROJECT", "该项目用 Sentry 收集前端报错", ("Sentry", "报错")),
    ("PROJECT", "该项目的接口文档在 YApi 上", ("YApi", "接口文档")),
    ("PROJECT", "该项目的缓存用 Redis 集群", ("Redis", "缓存")),
    ("PROJECT", "该项目的图片存在阿里云 OSS", ("OSS", "图片")),
    ("PROJECT", "该项目的消息队列是 RocketMQ", ("RocketMQ", "消息队列")),
    ("PROJECT", "该项目的代码评审至少需要两个人通过", ("评审", "两个人")),
    ("PROJECT", "This project's feature flags live in LaunchDarkly", ("LaunchDarkly", "flag")),
    ("PROJECT", "This project's docs site is built with MkDocs", ("MkDocs", "docs site")),
    ("PROJECT", "This project's metrics go to Prometheus", ("Prometheus", "metrics")),
    ("PROJECT", "This project's on-call rotation is weekly", ("on-call", "rotation")),
    ("PROJECT", "This project's container images are built with Buildah", ("Buildah",)),
    ("PROJECT", "This project stores secrets in Vault", ("Vault", "secret")),
    ("PROJECT", "This project's search runs on OpenSearch", ("OpenSearch", "search")),
    ("PROJECT", "This project's emails are sent through Postmark", ("Postmark", "email")),
    ("PROJECT", "This project's API gateway is Kong", ("Kong", "gateway")),
    ("PROJECT", "This project's mobile app is written in Flutter", ("Flutter", "mobile")),
)

# Families of rows, one row per subject: customers, repositories, colleagues.
_CUSTOMERS = ("华东电力", "北辰物流", "云杉医疗", "青禾教育", "星河银行", "锦程航空", "南岭矿业",
              "海川水务", "Acme Foods", "Brightline Rail", "Cobalt Health", "Driftwood Media",
              "Everpine Bank", "Foxglove Retail", "Granite Insurance", "Harbor Freight Co",
              "Ironbark Energy", "Juniper Schools", "Kestrel Airlines", "Lumen Telecom")
_PEOPLE = ("王磊", "李静", "张伟", "刘洋", "陈晨", "杨帆", "赵敏", "周宁", "Alice Moreau",
           "Ben Okafor", "Chloe Tan", "Diego Ruiz", "Emma Lind", "Farid Haddad", "Grace Kim",
           "Hugo Blanc", "Ines Duarte", "Jonas Weber", "Kira Sato", "Liam Byrne")
_REPOS = ("atlas", "beacon", "cinder", "delta-sync", "ember", "fjord", "glacier", "harvest",
          "indigo", "juniper-ui", "kite", "lattice", "meadow", "nimbus", "orbit", "pylon",
          "quartz", "ripple", "sable", "tundra")
_BRANCHES = ("main", "develop", "trunk", "master", "release")
_AREAS = ("支付", "订单", "账单", "搜索", "推荐", "鉴权", "报表", "消息", "billing", "search",
          "auth", "reports", "checkout", "inventory", "shipping", "notifications")


def _families() -> list[tuple[str, str, tuple[str, ...]]]:
    rows: list[tuple[str, str, tuple[str, ...]]] = []
    for i, customer in enumerate(_CUSTOMERS):
        person = _PEOPLE[(i * 7) % len(_PEOPLE)]
        if customer.isascii():
            rows.append(("USER", f"The contact at {customer} is {person}", (customer, person)))
        else:
            rows.append(("USER", f"客户「{customer}」的对接人是{person}", (customer, person)))
    for i, repo in enumerate(_REPOS):
        branch = _BRANCHES[i % len(_BRANCHES)]
        rows.append(("USER", f"The {repo} repo's default branch is {branch}", (repo,)))
    for i, person in enumerate(_PEOPLE):
        area = _AREAS[i % len(_AREAS)]
        if area.isascii():
            rows.append(("USER", f"{person} reviews changes to the {area} module",
                         (person, area)))
        else:
            rows.append(("USER", f"{person}负责{area}模块的代码评审", (person, area)))
    months = ("一月", "三月", "五月", "七月", "九月", "十一月", "February", "April", "June",
              "August", "October", "December")
    for i, customer in enumerate(_CUSTOMERS):
        month = months[i % len(months)]
        rows.append(("USER", f"{customer} renews its contract in {month}" if customer.isascii()
                     else f"「{customer}」的合同在{month}续约", (customer,)))
    runners = ("GitHub Actions", "GitLab CI", "Jenkins", "Buildkite", "Drone")
    for i, repo in enumerate(_REPOS):
        rows.append(("USER", f"The {repo} repo's CI runs on {runners[i % len(runners)]}",
                     (repo,)))
    for i, person in enumerate(_PEOPLE):
        month = months[(i * 5) % len(months)]
        rows.append(("USER", f"{person}'s team offsite is in {month}" if person.isascii()
                     else f"{person}的团队团建定在{month}", (person,)))
    return rows


POOL: tuple[tuple[str, str, tuple[str, ...]], ...] = (*_HAND, *_families())


def rows(case_id: str, text: str, project: str | None,
         count: int) -> list[tuple[str, str, str]]:
    """Up to `count` background rows (scope, project key, content) for the case `case_id`:
    `text` is everything the case says, folded as `fold` folds; `project` its valid project key
    or None. Fewer when the pool runs out."""
    if count <= 0:
        return []
    order = sorted(POOL, key=lambda row: hashlib.sha256(f"{case_id}\n{row[1]}".encode())
                   .hexdigest())
    chosen: list[tuple[str, str, str]] = []
    for scope, content, topics in order:
        if scope == "PROJECT" and project is None:
            continue
        if any(fold(topic) in text for topic in topics):
            continue
        chosen.append((scope, project if scope == "PROJECT" else "", content))
        if len(chosen) == count:
            break
    return chosen


def fold(text: str) -> str:
    """Width (NFKC), case and every space ignored: how case text and topics are compared."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())
