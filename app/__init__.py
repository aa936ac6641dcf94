"""The long-term memory service.

`create_app` (`app.factory`) builds the Flask app. Importing this package imports nothing else,
so a module of the domain (`app.memory`, `app.extraction`) is imported without the factory, the
configuration or the engines: the unit tier (tests/unit) starts in a second.

Comments across the code cite the design decisions D1–D15 and the contract's sections ("SPEC §5",
"seed §5.6"); each is explained, what it decides, why and where, in docs/decisions.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The app, built from the environment; `config` overrides it (tests use this)."""
    # Imported here, not above: importing the package must stay as light as its docstring says.
    from app.factory import create_app as build

    return build(config)
