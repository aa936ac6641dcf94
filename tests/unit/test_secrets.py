"""Credentials are never stored (SPEC §11): the detector's labelled sample table.

Every positive sample holds one credential of its kind and must be found as that kind; every
negative sample is ordinary technical text (labelled with what it is) and must pass. Chinese and
English alike. Pure unit tests: no database.
"""

from __future__ import annotations

import pytest

from app.memory import secrets
from app.memory.secrets import Kind

JWT = ("eyJhbGciOiAiSFMyNTYiLCAidHlwIjogIkpXVCJ9.eyJzdWIiOiAiNDIiLCAibmFtZSI6ICJkZXBsb3kifQ"
       ".Kp3nX2vQ9mYt0sLr8bWc4dEf6gHi1jKl5mNo7pQr2sT")
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeks"
               "oGMGw==")

POSITIVES: list[tuple[Kind, str]] = [
    # AWS
    (Kind.AWS, "Deploy with AKIAIOSFODNN7EXAMPLE as the access key id"),
    (Kind.AWS, "我的 AWS 密钥 ID 是 AKIAZ3MHQK7TWPLR5V2N"),
    (Kind.AWS, "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    (Kind.AWS, "临时凭证 ASIAY34FZKBOKMUTVV7A 明天过期"),
    # Google Cloud
    (Kind.GCP, "Maps API key: AIzaSy" + "B1c2D3e4F5" * 3 + "g6H"),
    (Kind.GCP, "谷歌 OAuth 客户端密钥 GOCSPX-" + "Ab1Cd2Ef3Gh4" * 2 + "Ij5K"),
    (Kind.GCP, "curl -H 'Authorization: Bearer ya29.a0AfH6SMBx" + "Kp3nX2vQ9m" * 3 + "'"),
    (Kind.GCP, '服务账号 JSON 里 "private_key_id": "' + "3f786850e387550fdab836ed7e6dc881de23001b"
     + '"'),
    # Azure
    (Kind.AZURE, "DefaultEndpointsProtocol=https;AccountName=prod;AccountKey=" + AZURITE_KEY),
    (Kind.AZURE, "Azure AD 应用的 client secret 是 xYz8Q~" + "Ab1Cd2Ef3G" * 3 + "h4"),
    (Kind.AZURE, "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
     "SharedAccessKey=" + "Kp3nX2vQ9m" * 4 + "Yt0="),
    (Kind.AZURE, "下载链接 https://acct.blob.core.windows.net/c/a.zip?sv=2022-11-02&ss=b&sig="
     + "Kp3nX2vQ9mYt0sLr8bWc4dEf6gHi%3D"),
    # GitHub
    (Kind.GITHUB, "GitHub token: ghp_" + "a1B2c3D4e5F6" * 3),
    (Kind.GITHUB, "推送时用 github_pat_11A" + "bC3dE4fG5h" * 8 + " 这个令牌"),
    (Kind.GITHUB, "the OAuth app gave gho_" + "Zy9Xw8Vu7Ts6" * 3),
    # GitLab
    (Kind.GITLAB, "GitLab 个人令牌 glpat-xY9zW8vU7tS6rQ5pO4nM"),
    (Kind.GITLAB, "register the runner with glrt-aB3dE5fG7hJ9kL1mN3pQ5"),
    # Slack
    (Kind.SLACK, "bot token xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    (Kind.SLACK, "告警发到 https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnopqrstuvwx"),
    # Stripe
    (Kind.STRIPE, "charge with sk_live_51HxYzAbCdEfGhIjKlMnOpQr"),
    (Kind.STRIPE, "测试环境用 sk_test_4eC39HqLyjWDarjtT1zdp7dc 跑支付"),
    (Kind.STRIPE, "restricted key rk_live_" + "Ab1Cd2Ef3Gh4" * 2),
    # OpenAI-style keys
    (Kind.OPENAI, "OPENAI_API_KEY=sk-proj-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7"),
    (Kind.OPENAI, "legacy key 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"),
    (Kind.OPENAI, "OpenAI 的 key 是 sk-" + "Qw3rTy6uIo9pAs2d" * 3),
    (Kind.OPENAI, "DeepSeek 接口用 sk-" + "9f8e7d6c5b4a3210" * 2 + " 调用"),
    # Anthropic
    (Kind.ANTHROPIC, "Claude key sk-ant-api03-" + "Xy1_Zw2-" * 12 + "AA"),
    (Kind.ANTHROPIC, "把 sk-ant-admin01-" + "Ab1Cd2Ef3Gh4" * 3 + " 配到网关"),
    # JWT
    (Kind.JWT, "session cookie " + JWT),
    (Kind.JWT, "登录态 token 用 " + JWT + " 调试"),
    # npm / PyPI
    (Kind.NPM, "publish with npm_" + "a1B2c3D4e5F6" * 3),
    (Kind.NPM, ".npmrc 写 //registry.npmjs.org/:_authToken=npm_" + "Zy9Xw8Vu7Ts6" * 3),
    (Kind.PYPI, "twine upload -p pypi-AgEIcHlwaS5vcmc" + "CJDU3Zj" * 11),
    (Kind.PYPI, "PyPI 上传令牌 pypi-" + "Ab1Cd2Ef3G" * 6),
    # other services detect-secrets knows
    (Kind.SERVICE, "SendGrid SG." + "aB3dE5fG7h" * 2 + "J9." + "Ab1Cd2Ef3G" * 4 + "h4I"),
    (Kind.SERVICE, "Hugging Face 令牌 hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"),
    (Kind.SERVICE, "webhook signing secret whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    # private key blocks
    (Kind.PRIVATE_KEY, "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq9\n"
     "-----END RSA PRIVATE KEY-----"),
    (Kind.PRIVATE_KEY, "部署机的私钥:-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA"),
    (Kind.PRIVATE_KEY, "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    # URLs with a password
    (Kind.URL_PASSWORD, "connect to mysql://deploy:S3cr3t@db.internal:3306/app"),
    (Kind.URL_PASSWORD, "生产库连接串 postgres://admin:hunter2@10.0.0.5/prod"),
    (Kind.URL_PASSWORD, "缓存地址 redis://:p4ssw0rd@cache:6379/0"),
    (Kind.URL_PASSWORD, "clone https://bob:glass-Onion7@git.example.com/team/repo.git"),
    # a password or secret stated as such
    (Kind.PASSWORD, "我的数据库密码是 S3cr3t!2024"),
    (Kind.PASSWORD, "口令:Tr0ub4dor&3"),
    (Kind.PASSWORD, "测试环境的密钥=9f8e7d6c5b4a"),
    (Kind.PASSWORD, "跳板机密码为 123456"),
    (Kind.PASSWORD, "服务器 root 密码: admin"),
    (Kind.PASSWORD, "银行卡支付密码是 880412"),
    (Kind.PASSWORD, "Wi-Fi 密码改成了 CorrectHorse42"),
    (Kind.PASSWORD, "令牌:a1b2c3d4e5f6"),
    (Kind.PASSWORD, "the staging password is hunter2"),
    (Kind.PASSWORD, "The VPN passwd: Xy7#kLm9"),
    (Kind.PASSWORD, "call the API with token=abc123def456"),
    (Kind.PASSWORD, 'config has api_key = "k3y-for-staging"'),
    (Kind.PASSWORD, "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345"),
    (Kind.PASSWORD, "my password for root is Winter2024!"),
    (Kind.PASSWORD, "door PIN is 482913"),
    (Kind.PASSWORD, "银行卡 PIN: 4827"),
    (Kind.PASSWORD, "secret_key: dJ8fK2mQ9xZ"),
    # payment card numbers (Luhn)
    (Kind.PAYMENT_CARD, "pay with Visa 4111 1111 1111 1111"),
    (Kind.PAYMENT_CARD, "信用卡 5555-5555-5555-4444 有效期 12/28"),
    (Kind.PAYMENT_CARD, "Amex 378282246310005"),
    (Kind.PAYMENT_CARD, "银联卡号 6222020200000001236"),
    (Kind.PAYMENT_CARD, "JCB card 3530111333300000"),
    (Kind.PAYMENT_CARD, "工资卡 6217 0000 0000 0000 004"),
    # PRC resident ID numbers (checksum)
    (Kind.PRC_ID, "身份证号 11010519491231002X"),
    (Kind.PRC_ID, "my resident ID is 440308199901011234"),
    (Kind.PRC_ID, "证件号:110101199003074477"),
    (Kind.PRC_ID, "报销填 320106198506120021 这个身份证"),
    (Kind.PRC_ID, "id 11010519491231002x in lower case"),
]

NEGATIVES: list[tuple[str, str]] = [
    # random-looking but not secret: hashes, digests, ids
    ("commit hash", "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b"),
    ("commit hash", "回滚到 a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 之前的版本"),
    ("commit hash", "git sha 9fceb02 broke the build"),
    ("commit hash", "Git 提交哈希 e83c5163316f89bfbde7d9ab23ca2e25604af290"),
    ("image digest",
     "image: nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31"),
    ("image digest",
     "镜像固定为 sha256:9b2a28eb47540823042a2ba401386845089bb7b62a9637d55816132c4c3c36eb"),
    ("image name", "镜像 registry.example.com/app/api:1.4.2"),
    ("image name", "base image is python:3.12-slim-bookworm"),
    ("UUID", "request id 550e8400-e29b-41d4-a716-446655440000"),
    ("UUID", "租户 ID 是 123e4567-e89b-12d3-a456-426614174000"),
    ("file hash", "sha1 of the file is da39a3ee5e6b4b0d3255bfef95601890afd80709"),
    ("object id", "MongoDB 文档 _id 507f1f77bcf86cd799439011"),
    ("base64 data", "logo is data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"),
    # talk about passwords and keys, none stated
    ("password policy", "密码策略至少 12 位"),
    ("password policy", "密码长度至少 8 位,包含大小写字母和数字"),
    ("password policy", "password must be at least 12 characters"),
    ("password policy", "密码: 12 位以上,90 天更换"),
    ("password policy", "the password is required on first login"),
    ("password policy", "Password is Required for every admin account"),
    ("password policy", "密码是必填项"),
    ("password policy", "密码需要每 90 天更换一次"),
    ("password storage", "Passwords are stored with bcrypt"),
    ("password storage", "密码用 bcrypt 加密存储"),
    ("password storage", "密码是 Argon2id 哈希后存的"),
    ("password storage", "the password is hashed with PBKDF2-SHA256"),
    ("password reset", "password reset links expire after 30 minutes"),
    ("secret storage", "API keys live in Vault, never in the repo"),
    ("secret storage", "密钥放在 KMS 里管理,轮换周期是 90 天"),
    ("secret storage", "密钥是 KMS 托管的"),
    ("secret storage", "secret: keep tests small and fast"),
    ("secret storage", "The secret is consistency"),
    ("secret reference", "export OPENAI_API_KEY=$OPENAI_API_KEY"),
    ("secret reference", "password: ${DB_PASSWORD}"),
    ("secret reference", "token 从环境变量 GITHUB_TOKEN 读取"),
    ("secret reference", 'api_key = os.environ["API_KEY"]'),
    ("masked secret", "password: ********"),
    ("masked secret", "密码:<redacted>"),
    ("token counts", "token 上限 4096"),
    ("token counts", "max_tokens=128000 for long reports"),
    ("token counts", "the token budget is 8000"),
    ("token prefixes", "GitHub token 需要 repo 权限,前缀是 ghp_"),
    ("token prefixes", "Bearer token 放在 Authorization 头里"),
    ("prose", "用户名是 zhangsan,习惯用 pnpm"),
    ("prose", "口令验证失败时锁定账户 30 分钟"),
    ("prose", "项目用 pnpm,不用 npm;npm_config_registry 指向内网镜像"),
    ("prose", "用 scikit-learn 做回归,别写成 sk-learn"),
    ("prose", "The tests must pass: run pytest -n 2"),
    ("version pin", "pin: v1.4.2 of the chart"),
    ("version pin", "pinned: numpy==1.26.4"),
    ("key names", "primary key: id BIGINT; sort key: updated_at DESC, id DESC"),
    ("key names", "cache key: user:{id}:context"),
    ("secret reference", "密码:见 1Password 里的 prod-db 条目"),
    ("secret reference", "password=`cat /run/secrets/db`"),
    # URLs without a password
    ("URL", "DATABASE_URL=mysql+pymysql://app@db/app?charset=utf8mb4"),
    ("URL", "postgres://user@localhost/db"),
    ("URL", "文档在 https://example.com/docs/a:b@c 里"),
    ("URL", "ssh git@github.com:org/repo.git"),
    # numbers that are not cards or ID numbers
    ("phone number", "手机号 13800138000"),
    ("timestamp", "时间戳 1733300000000 毫秒"),
    ("order number", "订单号 2024120412345678"),
    ("card failing Luhn", "4111 1111 1111 1112"),
    ("ID failing checksum", "身份证 110105194912310021"),
    ("ISBN", "ISBN 978-7-111-54742-6"),
    ("version", "Python 3.11.4, Node 20.11.1"),
    ("ports", "端口 3306、6379、8080"),
    ("ports", "ports 3306 6379 8080 9090"),
    ("postcode", "邮编 100080"),
    ("ARN", "role arn:aws:iam::123456789012:role/deploy"),
    ("sequence", "1234 5678 9012 3456"),
]


@pytest.mark.parametrize(("kind", "text"), POSITIVES,
                         ids=[f"{kind}-{i}" for i, (kind, _) in enumerate(POSITIVES)])
def test_a_credential_is_found_as_its_kind(kind: Kind, text: str):
    assert secrets.find(text) is kind


@pytest.mark.parametrize(("what", "text"), NEGATIVES,
                         ids=[f"{what}-{i}" for i, (what, _) in enumerate(NEGATIVES)])
def test_ordinary_technical_text_is_not_a_credential(what: str, text: str):
    assert secrets.find(text) is None


def test_the_table_holds_sixty_samples_each_way_in_both_languages():
    def chinese(text: str) -> bool:
        return any("\u4e00" <= c <= "\u9fff" for c in text)

    for table in (POSITIVES, NEGATIVES):
        assert len(table) >= 60
        assert sum(chinese(text) for _, text in table) >= 20
        assert sum(not chinese(text) for _, text in table) >= 20
    assert {kind for kind, _ in POSITIVES} == set(Kind)


def test_every_kind_is_named_in_words():
    assert Kind.GITHUB.suspected == "疑似 GitHub 令牌"
    assert Kind.PRIVATE_KEY.suspected == "疑似私钥"
    assert all(kind.words and kind.english for kind in Kind)


def test_the_keyword_gate_lets_every_keyword_of_detect_secrets_through():
    # find() skips the keyword plugin when no hint is in the text: an upgrade of the library
    # that adds a keyword without one of the hints would silently go unused.
    from detect_secrets.plugins.keyword import DENYLIST

    for keyword in DENYLIST:
        assert any(hint in keyword.replace("_?", "") for hint in secrets._KEYWORD_HINTS), keyword
