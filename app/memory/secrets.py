"""Credentials a memory must never hold (SPEC §11 "Credentials are never stored").

A memory is shown on pages, sent to a third-party model at every extraction and injected into
the system prompt of every later session: a key or password in one leaks everywhere. `find`
names the kind of the first credential a text holds, or None; the domain's rules refuse such
content on every path that writes it (`rules.manual_content`, `rules.credential`).

The detectors are Yelp's `detect-secrets` plugins — the maintained rule set, used through their
public `analyze_string` — and, beside them in this one module, what the library lacks: Google
Cloud, Azure AD and newer OpenAI/Anthropic/npm/GitHub key formats (after gitleaks' rule list),
passwords stated as such in English and Chinese, payment card numbers (Luhn) and PRC resident
ID numbers (ISO 7064 checksum).

What is deliberately not a credential: strings that are only random-looking (commit hashes,
image digests, UUIDs — detect-secrets' entropy plugins are left out), and prose about passwords
("密码策略至少 12 位", "the password is required"): a stated password must look like one.
"""

from __future__ import annotations

import re
from enum import StrEnum

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    FOLLOWED_BY_ARROW_FUNCTION_SIGN_QUOTES_REQUIRED_REGEX,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    KeywordDetector,
)
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector


class Kind(StrEnum):
    """What a credential is, as the refusal names it."""

    AWS = "aws"
    GCP = "gcp"
    AZURE = "azure"
    GITHUB = "github"
    GITLAB = "gitlab"
    SLACK = "slack"
    STRIPE = "stripe"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    JWT = "jwt"
    NPM = "npm"
    PYPI = "pypi"
    SERVICE = "service"
    PRIVATE_KEY = "private_key"
    URL_PASSWORD = "url_password"
    PASSWORD = "password"
    PAYMENT_CARD = "payment_card"
    PRC_ID = "prc_id"

    @property
    def words(self) -> str:
        """The kind in Chinese words, as a person reads it: `GitHub 令牌`."""
        return _WORDS[self][0]

    @property
    def english(self) -> str:
        """The kind in English words, for the JSON API's message: `a GitHub token`."""
        return _WORDS[self][1]

    @property
    def suspected(self) -> str:
        """「疑似 GitHub 令牌」: a space between the Chinese and a Latin word, none otherwise."""
        return f"疑似{' ' if self.words[0].isascii() else ''}{self.words}"


_WORDS: dict[Kind, tuple[str, str]] = {
    Kind.AWS: ("AWS 访问密钥", "an AWS access key"),
    Kind.GCP: ("Google Cloud 密钥", "a Google Cloud key"),
    Kind.AZURE: ("Azure 密钥", "an Azure key"),
    Kind.GITHUB: ("GitHub 令牌", "a GitHub token"),
    Kind.GITLAB: ("GitLab 令牌", "a GitLab token"),
    Kind.SLACK: ("Slack 令牌", "a Slack token"),
    Kind.STRIPE: ("Stripe 密钥", "a Stripe key"),
    Kind.OPENAI: ("OpenAI 类 API 密钥", "an OpenAI-style API key"),
    Kind.ANTHROPIC: ("Anthropic API 密钥", "an Anthropic API key"),
    Kind.JWT: ("JWT 令牌", "a JSON Web Token"),
    Kind.NPM: ("npm 令牌", "an npm token"),
    Kind.PYPI: ("PyPI 令牌", "a PyPI token"),
    Kind.SERVICE: ("第三方服务的 API 密钥", "a service's API key"),
    Kind.PRIVATE_KEY: ("私钥", "a private key"),
    Kind.URL_PASSWORD: ("带密码的连接地址", "a URL with a password"),
    Kind.PASSWORD: ("密码或密钥", "a password or secret"),
    Kind.PAYMENT_CARD: ("银行卡号", "a payment card number"),
    Kind.PRC_ID: ("身份证号", "a resident ID number"),
}

# ---- what detect-secrets knows ------------------------------------------------------------

# Its token plugins, each a kind. Verification (a network call) is never run: only
# `analyze_string`, which yields what the plugin's patterns match.
_TOKEN_PLUGINS: tuple[tuple[BasePlugin, Kind], ...] = (
    (AWSKeyDetector(), Kind.AWS),
    (AzureStorageKeyDetector(), Kind.AZURE),
    (GitHubTokenDetector(), Kind.GITHUB),
    (GitLabTokenDetector(), Kind.GITLAB),
    (SlackDetector(), Kind.SLACK),
    (StripeDetector(), Kind.STRIPE),
    (OpenAIDetector(), Kind.OPENAI),
    (NpmDetector(), Kind.NPM),
    (PypiTokenDetector(), Kind.PYPI),
    (JwtTokenDetector(), Kind.JWT),
    (SendGridDetector(), Kind.SERVICE),
    (TwilioKeyDetector(), Kind.SERVICE),
    (DiscordBotTokenDetector(), Kind.SERVICE),
    (TelegramBotTokenDetector(), Kind.SERVICE),
    (MailchimpDetector(), Kind.SERVICE),
    (SquareOAuthDetector(), Kind.SERVICE),
)
_PRIVATE_KEYS = PrivateKeyDetector()
_URL_PASSWORDS = BasicAuthDetector()
# `api_key = "…"`, `password: …` and their kin: the config spellings (quotes optional, so they
# also find what the code spellings' quotes-required `:` and `=` forms find) plus `=> "…"`.
# Each form is a case-insensitive scan of the whole text, the detector's dearest part.
_KEYWORDS = KeywordDetector()
_ARROW = FOLLOWED_BY_ARROW_FUNCTION_SIGN_QUOTES_REQUIRED_REGEX
_KEYWORD_FORMS = {**CONFIG_DENYLIST_REGEX_TO_GROUP,
                  _ARROW: QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP[_ARROW]}

# ---- what it lacks (patterns after gitleaks' rules where one exists) ----------------------

_B = r"(?<![A-Za-z0-9_-])"  # no token character before: a match starts a token
_E = r"(?![A-Za-z0-9_-])"  # and none after: it ends one
_TOKEN_PATTERNS: tuple[tuple[re.Pattern[str], Kind], ...] = tuple(
    (re.compile(pattern, flags), kind) for pattern, flags, kind in (
        (r"aws_?secret_?access_?key\s*[=:]\s*[\"']?[A-Za-z0-9/+]{40}", re.IGNORECASE, Kind.AWS),
        (rf"{_B}AIza[0-9A-Za-z_-]{{35}}{_E}", 0, Kind.GCP),
        (rf"{_B}GOCSPX-[0-9A-Za-z_-]{{28}}{_E}", 0, Kind.GCP),
        (rf"{_B}ya29\.[0-9A-Za-z_-]{{30,}}", 0, Kind.GCP),
        (r"\"private_key_id\"\s*:\s*\"[0-9a-f]{40}\"", 0, Kind.GCP),
        (r"SharedAccessKey=[A-Za-z0-9+/=]{40,}", 0, Kind.AZURE),
        (r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
         0, Kind.AZURE),
        (r"[?&]sv=\d{4}-\d\d-\d\d\S*?&sig=[A-Za-z0-9%+/=]{20,}", 0, Kind.AZURE),
        (rf"{_B}github_pat_[A-Za-z0-9_]{{40,}}", 0, Kind.GITHUB),
        (rf"{_B}(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{{20,}}", 0, Kind.STRIPE),
        (rf"{_B}sk-ant-[a-z]{{2,8}}\d\d-[A-Za-z0-9_-]{{20,}}", 0, Kind.ANTHROPIC),
        (rf"{_B}sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{{20,}}", 0, Kind.OPENAI),
        (rf"{_B}sk-[A-Za-z0-9]{{32,}}{_E}", 0, Kind.OPENAI),
        (rf"{_B}npm_[A-Za-z0-9]{{36}}{_E}", 0, Kind.NPM),
        (rf"{_B}pypi-[A-Za-z0-9_-]{{50,}}", 0, Kind.PYPI),
        (rf"{_B}hf_[A-Za-z]{{34}}{_E}", 0, Kind.SERVICE),
        (rf"{_B}whsec_[A-Za-z0-9+/=]{{24,}}", 0, Kind.SERVICE),
    ))
# A URL whose user part is empty: `redis://:pass@host` (detect-secrets wants a user).
_EMPTY_USER_URL = re.compile(r"://:[^\s:/?#\[\]@]+@")

# A password, key or token stated as such. The value is the token after the keyword and its
# verb or sign; whether it looks like a password is `_looks_like_password`'s call.
_VALUE = (r"[\"'`\u201c\u2018\u300c\u300e]?"
          r"(?P<value>[^\s\"'`\u201d\u2019\u300d\u300f,;()\uff0c\uff1b\u3002\u3001\uff08\uff09]+)")
_STATED = (
    re.compile(
        r"(?<![A-Za-z0-9])(?P<key>pass(?:word|phrase|wd|code)|pwd|pw|pin|secret(?:[ _-]?key)?"
        r"|api[ _-]?key|access[ _-]?key|private[ _-]?key|(?:auth|access|api|bearer)?[ _-]?token"
        r"|credentials?)s?"
        r"(?:\s+(?:for|of|on|to)\s+[\w.@-]+)?"  # password for root is …
        r"(?:\s+(?:is set to|set to|is|was|are)\s+|\s*(?::=|=>|->|[:=\uff1a])\s*)"
        + _VALUE, re.IGNORECASE),
    re.compile(
        r"(?P<key>密码|口令|密钥|秘钥|私钥|令牌|授权码|api\s*key|token)"
        r"\s*(?:(?:是|为|改成了?|改为|设为|设置为|设置成|换成了?)\s*[:\uff1a=\uff1d]?|[:\uff1a=\uff1d])\s*"
        + _VALUE, re.IGNORECASE),
    re.compile(r"\b(?P<key>Bearer)\s+(?P<value>[A-Za-z0-9._~+/=-]{16,})"),
)
# Values that stand for a password without being one: masks, templates, references, paths.
_NOT_A_VALUE = re.compile(
    r"^(?:[*xX•·.#?_-]+|\$\{?\w+\}?|%\(?\w*\)?s|<[^>]*>|\{\{.*\}\}|\{\w*\}"
    r"|(?:https?://|/|~/|\./|\.\./).*|.*(?:environ|getenv|process\.env|secrets\.|vault).*"
    # hashing and cipher names: what a password is stored with, not the password
    r"|(?:bcrypt|scrypt|argon2\w*|pbkdf2\S*|sha-?\d+|md5|aes-?\S*|rsa-?\d*|hmac\S*|base64"
    r"|ed25519))$",
    re.IGNORECASE)
# Passwords so common that stating one is a leak even though it is a word.
_DEFAULT_PASSWORDS = frozenset({
    "admin", "root", "password", "passw0rd", "changeme", "letmein", "qwerty", "welcome",
    "123456", "12345678", "111111", "000000", "abc123", "admin123", "root123", "test123",
})
_TRAILING = ".,;:!?)\u3002\uff0c\uff1b\uff1a\uff01\uff1f\uff09\u3011\u300d\u300f"


def _looks_like_password(value: str, *, digits: bool = True) -> bool:
    """A stated value is a password when it could not be a word of the sentence: letters and
    digits, a symbol, an inner capital, six or more digits (`digits`: for keywords that name a
    password, where a number is one; `max_tokens=128000` is a count) — or a notorious default."""
    value = value.rstrip(_TRAILING)
    if value.lower() in _DEFAULT_PASSWORDS:
        return True
    if len(value) < 6 or not value.isascii() or _NOT_A_VALUE.match(value):
        return False
    if value.isdigit():
        return digits
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    inner_capital = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return (has_digit and has_alpha) or (not value.isalnum() and (has_digit or has_alpha)) \
        or inner_capital


# Keywords that name a password, which may be all digits; after `token` or `key` a number is
# a count (`max_tokens=128000`).
_NUMERIC_KEYWORDS = ("pass", "pw", "密码", "口令")
# A PIN is digits, four or more (`pin: v1.4.2` pins a version).
_PIN = re.compile(r"\d{4,12}")


def _stated_password(text: str) -> bool:
    for pattern in _STATED:
        for match in pattern.finditer(text):
            key, value = match.group("key").lower(), match.group("value").rstrip(_TRAILING)
            if key == "pin":
                if _PIN.fullmatch(value):
                    return True
            elif _looks_like_password(value, digits=key.startswith(_NUMERIC_KEYWORDS)):
                return True
    return any(_looks_like_password(value.split()[0]) for value in
               _KEYWORDS.analyze_string(text, _KEYWORD_FORMS) if value.split())


# ---- numbers with a check digit --------------------------------------------------------------

# 13–19 digits, grouped by single spaces or dashes, not part of a longer run of digits.
_CARD = re.compile(r"(?<![\w-])(?<!\d[ -])\d(?:[ -]?\d){12,18}(?![\w-]|[ -]\d)")
# Issuers' number ranges (ISO/IEC 7812 IINs): Visa, Mastercard, Amex, Discover, UnionPay, JCB,
# Diners, Maestro. A Luhn-valid run of digits outside them (a timestamp, an order number) is not
# a card.
_CARD_PREFIX = re.compile(r"^(?:4|5[1-5]|222[1-9]|22[3-9]|2[3-6]|27[01]|2720|3[47]|6011|65"
                          r"|64[4-9]|62|35(?:2[89]|[3-8])|30[0-5]|3[68]|5[06-9]|6[0-9])")


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _payment_card(text: str) -> bool:
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group())
        if 13 <= len(digits) <= 19 and _CARD_PREFIX.match(digits) and _luhn(digits):
            return True
    return False


# GB 11643: 6-digit region (first digit 1–8), birth date YYYYMMDD, 3-digit sequence, check
# character (ISO 7064 MOD 11-2).
_PRC_ID = re.compile(r"(?<![\w])([1-8]\d{5})((?:18|19|20)\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])"
                     r"\d{3}[\dXx](?!\w)")
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def _prc_id(text: str) -> bool:
    for match in _PRC_ID.finditer(text):
        number = match.group().upper()
        total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS, strict=True))
        if "10X98765432"[total % 11] == number[17]:
            return True
    return False


# ---- the detector -----------------------------------------------------------------------------

# Cheap gates, each a superset of what the checks behind it can match, so a text that passes
# none of them is settled in microseconds (most memories are plain prose; the keyword plugin
# alone costs ~0.4 ms on 500 characters). Every issued key or token the token checks know is a
# run of at least 20 URL-safe characters (the shortest, an AWS key id, is AKIA + 16).
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_+/=.~%:@?&-]{20,}")
# Every keyword of detect-secrets' KeywordDetector and of `_STATED` contains one of these.
_KEYWORD_HINTS = ("key", "pass", "pwd", "pw", "pin", "secret", "contrase", "token", "credential",
                  "bearer", "密码", "口令", "密钥", "秘钥", "私钥", "令牌", "授权码")
# Read at a hint, in the lowered text: what any keyword form needs right after its keyword — a
# sign, a quote, a bracket, a verb (`is`, `是`), `.assign(` or a long token (`Bearer …`). Loose
# on purpose (a superset of the forms), so only its misses are trusted.
_AFTER_HINT = re.compile(
    r"[^\W\u2e80-\u9fff\uac00-\ud7af]*[\[\]\d'\"`]{0,6}\s*(?:[:=!(>\uff1a\uff1d'\"`]|\.assign|\S{0,50}?\s*['\"`]"
    r"|(?:\s+(?:for|of|on|to)\s+[\w.@-]+)?\s+(?:is|was|are|set)\b|\s+[\w.~+/=-]{16}"
    r"|是|为|改|设|换)")
# …or right before it: `"value" == password` (detect-secrets' reverse comparison).
_BEFORE_HINT = re.compile(r"[!=]=\s*\w*$")


def _keyword_assigned(text: str) -> bool:
    """Whether a keyword form may be in `text`: some hint with a sign, quote or verb at it."""
    lowered = text.lower().replace("\u017f", "s")  # ſ matches s under IGNORECASE
    for hint in _KEYWORD_HINTS:
        at = lowered.find(hint)
        while at != -1:
            if _AFTER_HINT.match(lowered, at + len(hint)) or \
                    _BEFORE_HINT.search(lowered, max(0, at - 80), at):
                return True
            at = lowered.find(hint, at + 1)
    return False


def _any_match(plugin: BasePlugin, text: str) -> bool:
    return any(True for _ in plugin.analyze_string(text))


def _token(text: str) -> Kind | None:
    for pattern, kind in _TOKEN_PATTERNS:
        if pattern.search(text):
            return kind
    for plugin, kind in _TOKEN_PLUGINS:
        if _any_match(plugin, text):
            return kind
    return None


def find(text: str) -> Kind | None:
    """The kind of the first credential `text` holds, or None. A named kind wins over the
    general ones: a GitHub token stated as a password is refused as a GitHub token."""
    if _TOKEN_RUN.search(text) and (kind := _token(text)) is not None:
        return kind
    if ("PRIVATE KEY" in text or "PuTTY" in text) and _any_match(_PRIVATE_KEYS, text):
        return Kind.PRIVATE_KEY
    if "://" in text and "@" in text and (_any_match(_URL_PASSWORDS, text)
                                          or _EMPTY_USER_URL.search(text)):
        return Kind.URL_PASSWORD
    if _keyword_assigned(text) and _stated_password(text):
        return Kind.PASSWORD
    if _payment_card(text):
        return Kind.PAYMENT_CARD
    if _prc_id(text):
        return Kind.PRC_ID
    return None
