"""Extension objects, created unbound and attached to the app in `create_app`."""

from typing import TYPE_CHECKING

from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect

db = SQLAlchemy()
if TYPE_CHECKING:
    from sqlalchemy.orm import DeclarativeBase

    class Model(DeclarativeBase):
        """What a type checker is shown of `db.Model`, a class made at run time that it cannot
        follow as a base (Flask-SQLAlchemy #1186, mypy #8603): a declarative base."""
else:
    Model = db.Model  # the base class of every model
# Both are wired by `app.auth.sessions.init_app` without their app-wide request hooks (see
# there): the platform's hot paths must not pay for a browser's login.
login_manager = LoginManager()
csrf = CSRFProtect()
