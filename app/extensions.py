"""Extension objects, created unbound and attached to the app in `create_app`."""

from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect

db = SQLAlchemy()
migrate = Migrate()
# Both are wired by `app.auth.sessions.init_app` without their app-wide request hooks (see
# there): the platform's hot paths must not pay for a browser's login.
login_manager = LoginManager()
csrf = CSRFProtect()
