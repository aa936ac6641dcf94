"""What the domain refuses, and why: errors every caller (JSON API, pages, jobs) understands.

The domain raises these and knows nothing of HTTP. `app.envelope` maps each kind to its SPEC §4
code in one table; the pages choose the sentence a person reads by `reason`, a stable
snake_case name of the rule that refused (`content_too_long`, `project_key_bot`, …), while
`message` is the English explanation the JSON API sends.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


class DomainError(Exception):
    """A request the domain refuses; nothing was changed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class InvalidInput(DomainError):
    """A parameter is missing, of the wrong type, or outside what the rules allow."""


class InvalidContent(DomainError):
    """A memory's content is empty, too long, or holds characters a prompt must not carry."""


class MemoryNotFound(DomainError):
    """No such memory for this user (another user's memory is absent too, D4)."""

    def __init__(self) -> None:
        super().__init__("memory_not_found", "memory item not found")


class SecretContent(DomainError):
    """A memory's content holds a credential (a key, a token, a password stated as such): it is
    never stored (SPEC §11). `reason` names the kind (`content_secret_github`)."""


class DuplicateContent(DomainError):
    """Another memory of the user already says exactly this (dedup hash)."""

    def __init__(self) -> None:
        super().__init__("duplicate_content", "an identical memory already exists")


class VersionConflict(DomainError):
    """The memory is no longer the version the caller changed it from (SPEC §11 "No lost
    updates"): nothing was changed. `current` is the memory as it was read under the lock."""

    def __init__(self, current: Any, expected: Collection[int]) -> None:
        named = ", ".join(str(v) for v in sorted(expected))
        why = (f"was changed meanwhile: it is at version {current.version}, not {named}"
               if named else f"is at version {current.version}, which If-Match does not name")
        super().__init__("version_conflict", f"the memory {why}; nothing was changed (data "
                                             "holds the memory as it is now)")
        self.current = current


class LimitReached(DomainError):
    """The user already has the most ACTIVE memories the rules allow (D7)."""


class UnknownModel(DomainError):
    """A setting names a model that is not registered."""


class NotEditable(DomainError):
    """A setting that exists but may not be changed."""
