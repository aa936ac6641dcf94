"""Operator CLI (SPEC §7)."""

from app.auth.models import ApiToken, User
from app.auth.service import hash_token
from app.extensions import db
from app.system.models import LlmModel


def test_users_create_with_id_password_and_admin(app, runner):
    result = runner.invoke(args=["users", "create", "root", "--id", "77", "--password", "pw",
                                 "--admin"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        user = db.session.get(User, 77)
        assert user.username == "root" and user.is_admin and user.password_hash != "pw"


def test_users_create_names_a_user_first_seen_through_the_platform(app, runner, as_service):
    as_service(4242).get("/api/v1/memory")
    result = runner.invoke(args=["users", "create", "dana", "--id", "4242"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert db.session.get(User, 4242).username == "dana"


def test_users_create_refuses_a_taken_name(runner):
    runner.invoke(args=["users", "create", "root"])
    result = runner.invoke(args=["users", "create", "root"])
    assert result.exit_code != 0 and "already exists" in result.output


def test_users_grant(app, runner):
    runner.invoke(args=["users", "create", "auditor"])
    result = runner.invoke(args=["users", "grant", "auditor", "memory:read"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert User.by_username("auditor").has_permission("memory:read")


def test_users_grant_refuses_unknown_permission(runner):
    runner.invoke(args=["users", "create", "auditor"])
    result = runner.invoke(args=["users", "grant", "auditor", "memory:write"])
    assert result.exit_code != 0 and "memory:read" in result.output


def test_users_token_prints_the_token_alone_on_the_last_line(app, runner, client):
    runner.invoke(args=["users", "create", "alice"])
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
                                 "http://llm.internal/v1", "--api-key-env", "SMART_KEY",
                                 "--default"])
    assert result.exit_code == 0, result.output
    with app.app_context():
        rows = {m.name: m for m in db.session.scalars(db.select(LlmModel))}
        assert not rows["fast"].is_default and rows["smart"].is_default
        assert (rows["smart"].base_url, rows["smart"].api_key_env) == \
            ("http://llm.internal/v1", "SMART_KEY")
    listing = runner.invoke(args=["models", "list"]).output
    assert "smart\tgpt-smart\thttp://llm.internal/v1\tSMART_KEY [default]" in listing
