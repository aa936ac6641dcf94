"""Operator CLI (SPEC §7)."""

from datetime import timedelta

import pytest

from app.auth.models import ApiToken, User
from app.auth.service import hash_token
from app.db_types import utcnow
from app.extensions import db
from app.system.models import LlmModel


def test_users_create_with_id_password_and_admin(app, runner):
    result = runner.invoke(args=["users", "create", "root", "--id", "77", "--password", "pw-of-8+",
                                 "--admin"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        user = db.session.get(User, 77)
        assert user.username == "root" and user.is_admin and user.password_hash != "pw-of-8+"


def test_users_create_names_a_user_first_seen_through_the_platform(app, runner, as_service):
    as_service(4242).patch("/api/v1/memory/settings", {"autoCaptureEnabled": False})
    result = runner.invoke(args=["users", "create", "dana", "--id", "4242", "--no-password"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert db.session.get(User, 4242).username == "dana"


def test_users_create_refuses_a_taken_name(runner):
    runner.invoke(args=["users", "create", "root", "--no-password"])
    result = runner.invoke(args=["users", "create", "root", "--no-password"])
    assert result.exit_code != 0 and "already exists" in result.output


def test_users_grant(app, runner):
    runner.invoke(args=["users", "create", "auditor", "--no-password"])
    result = runner.invoke(args=["users", "grant", "auditor", "memory:read"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert User.by_username("auditor").has_permission("memory:read")


def test_users_grant_refuses_unknown_permission(runner):
    runner.invoke(args=["users", "create", "auditor", "--no-password"])
    result = runner.invoke(args=["users", "grant", "auditor", "memory:write"])
    assert result.exit_code != 0 and "memory:read" in result.output


def test_users_token_prints_the_token_alone_on_the_last_line(app, runner, client):
    runner.invoke(args=["users", "create", "alice", "--no-password"])
    result = runner.invoke(args=["users", "token", "alice"])
    assert result.exit_code == 0, result.output
    token = result.output.rstrip("\n").splitlines()[-1]
    with app.app_context():
        assert db.session.scalar(db.select(ApiToken.token_hash)) == hash_token(token)
    response = client.get("/api/v1/memory", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200


def test_models_add_and_list(app, runner):
    assert runner.invoke(args=["models", "add", "fast", "--model", "gpt-fast",
                               "--default"]).exit_code == 0
    result = runner.invoke(args=["models", "add", "smart", "--model", "gpt-smart", "--base-url",
                                 "http://llm.internal/v1", "--api-key-env", "SMART_API_KEY",
                                 "--default"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        rows = {m.name: m for m in db.session.scalars(db.select(LlmModel))}
        assert not rows["fast"].is_default and rows["smart"].is_default
        assert (rows["smart"].base_url, rows["smart"].api_key_env) == \
            ("http://llm.internal/v1", "SMART_API_KEY")
    listing = runner.invoke(args=["models", "list"]).output
    assert "smart\tgpt-smart\thttp://llm.internal/v1\tSMART_API_KEY [default]" in listing


def _token(runner, *options: str) -> str:
    result = runner.invoke(args=["users", "token", "alice", *options])
    assert result.exit_code == 0, result.output
    return result.output.rstrip("\n").splitlines()[-1]


def _calls(client, token: str) -> int:
    return client.get("/api/v1/memory",
                      headers={"Authorization": f"Bearer {token}"}).status_code


def test_users_tokens_lists_id_prefix_created_last_used_and_expiry(app, runner, client):
    runner.invoke(args=["users", "create", "alice", "--no-password"])
    kept = _token(runner)
    expiring = _token(runner, "--days", "30")
    assert _calls(client, kept) == 200
    result = runner.invoke(args=["users", "tokens", "alice"])
    assert result.exit_code == 0, result.output
    header, first, second = result.output.strip().splitlines()
    assert header.split("\t") == ["id", "prefix", "created", "last used", "expires"]
    first, second = first.split("\t"), second.split("\t")
    assert first[1] == kept[:8] and second[1] == expiring[:8]
    assert first[3].endswith("UTC") and second[3] == "never"
    assert first[4] == "never" and second[4].endswith("UTC")
    assert kept not in result.output and expiring not in result.output


def test_users_revoke_token_is_401_at_once(app, runner, client):
    runner.invoke(args=["users", "create", "alice", "--no-password"])
    token = _token(runner)
    other = _token(runner)
    assert _calls(client, token) == 200
    with app.app_context():
        token_id = db.session.scalar(db.select(ApiToken.id).where(
            ApiToken.token_hash == hash_token(token)))
    result = runner.invoke(args=["users", "revoke-token", "alice", str(token_id)])
    assert result.exit_code == 0, result.output
    assert _calls(client, token) == 401
    assert _calls(client, other) == 200
    again = runner.invoke(args=["users", "revoke-token", "alice", str(token_id)])
    assert again.exit_code != 0 and "no token" in again.output


def test_users_token_days_expires_and_an_expired_token_is_401_at_once(app, runner, client):
    runner.invoke(args=["users", "create", "alice", "--no-password"])
    token = _token(runner, "--days", "1")
    assert _calls(client, token) == 200
    with app.app_context():
        row = db.session.scalar(db.select(ApiToken))
        assert timedelta(hours=23) < row.expires_at - row.created_at <= timedelta(days=1)
        row.expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    assert _calls(client, token) == 401


def test_users_create_works_after_the_platform_reported_the_highest_id(app, runner, as_service):
    top = 2**63 - 1
    assert as_service(top).patch("/api/v1/memory/settings",
                                 {"autoCaptureEnabled": False})[0] == 200
    for name in ("dave", "erin"):
        result = runner.invoke(args=["users", "create", name, "--no-password"])
        assert result.exit_code == 0, result.output
    with app.app_context():
        ids = {User.by_username(name).id for name in ("dave", "erin")}
        assert len(ids) == 2 and top not in ids


@pytest.mark.parametrize("variable", ["SECRET_KEY", "MEMORY_SERVICE_TOKEN",
                                      "MEMORY_WEBHOOK_SECRET", "DATABASE_URL", "REDIS_URL",
                                      "secret_key", "MEMORY_ANYTHING", "NOT A NAME",
                                      "MEMORY_OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "HOME",
                                      "openai_api_key", "_API_KEY", "OPENAI_API_KEY_FILE"])
def test_models_add_takes_only_an_api_key_variable_never_another_secret(app, runner,
                                                                         variable):
    result = runner.invoke(args=["models", "add", "evil", "--model", "m", "--base-url",
                                 "https://llm.example/v1", "--api-key-env", variable])
    assert result.exit_code != 0
    with app.app_context():
        assert db.session.scalar(db.select(LlmModel)) is None


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "ftp://llm.example", "llm.example/v1",
    "http://169.254.169.254/latest", "http://[fe80::1]/v1",
    # SPEC §9: every spelling of a link-local, loopback-mapped or metadata address.
    "http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/", "http://2852039166/",
    "http://0251.0376.0251.0376/", "http://0xa9fea9fe/", "http://0xa9.0xfe.0xa9.0xfe/",
    "http://169.254.43518/", "http://169.254.169.254./", "http://[::ffff:127.0.0.1]/",
    "http://[2002:a9fe:a9fe::]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[fd00:ec2::254]/",
    "http://100.100.100.200/", "http://metadata.google.internal/computeMetadata/v1",
    "http://[fe80::1%25eth0]/v1"])
def test_models_add_refuses_every_form_of_a_link_local_or_metadata_address(app, runner, url):
    result = runner.invoke(args=["models", "add", "odd", "--model", "m", "--base-url", url])
    assert result.exit_code != 0
    with app.app_context():
        assert db.session.scalar(db.select(LlmModel)) is None


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "http://[::1]:8000/v1",
                                 "http://10.1.2.3/v1", "https://api.deepseek.com/v1",
                                 "http://llm.internal:4000"])
def test_models_add_takes_ordinary_and_local_endpoints(app, runner, url):
    result = runner.invoke(args=["models", "add", "ok", "--model", "m", "--base-url", url,
                                 "--api-key-env", "DEEPSEEK_API_KEY"])
    assert result.exit_code == 0, result.output


def test_users_create_refuses_a_password_under_8_characters(app, runner):
    for password in ("x", "1234567", ""):
        result = runner.invoke(args=["users", "create", "eve", "--password", password])
        assert result.exit_code != 0 and "8 characters" in result.output, result.output
    with app.app_context():
        assert User.by_username("eve") is None


def test_users_create_makes_a_token_only_account_only_when_asked(app, runner):
    assert runner.invoke(args=["users", "create", "bot"]).exit_code != 0
    both = runner.invoke(args=["users", "create", "bot", "--password", "long enough",
                               "--no-password"])
    assert both.exit_code != 0
    result = runner.invoke(args=["users", "create", "bot", "--no-password"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert User.by_username("bot").password_hash is None


def test_users_password_refuses_a_password_under_8_characters(app, runner, users):
    users.user("alice")
    result = runner.invoke(args=["users", "password", "alice", "--password", "short"])
    assert result.exit_code != 0 and "8 characters" in result.output


def test_models_add_help_says_which_keys_and_urls_it_refuses(runner):
    text = " ".join(runner.invoke(args=["models", "add", "--help"]).output.split())
    assert "http(s)" in text and "SECRET_KEY" in text and "MEMORY_SERVICE_TOKEN" in text
