"""Requests and answers of the user API (`/api/v1/memory`, SPEC §4 and §8)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictBool, StrictStr, field_validator
from pydantic.json_schema import SkipJsonSchema

from app.memory.rules import (
    CONTENT_PATTERN,
    DEFAULT_BOT_PROJECT_KEYS,
    MANUAL_CONTENT_MAX,
    PROJECT_KEY_MAX,
    PROJECT_PATTERN,
    Scope,
    Source,
    Status,
)
from app.schemas import Body, Paged, PageQuery, ProjectKey, Query, Text

# Content is checked by the domain (trimmed length, control characters: 3034); the document
# states the same rules (`rules.CONTENT_PATTERN`: something besides whitespace, no control
# character) and validation is left to the domain alone, so the two cannot disagree.
Content = Annotated[StrictStr, Field(json_schema_extra={
    "minLength": 1, "maxLength": MANUAL_CONTENT_MAX, "pattern": CONTENT_PATTERN})]
Search = Annotated[Text, Field(max_length=MANUAL_CONTENT_MAX,
                               description="a case-insensitive substring of the content")]


class NewMemory(Body):
    """A PROJECT memory names its project: a key with something besides whitespace, at most 128
    characters, not a bot channel's (MEMORY_BOT_PROJECT_KEYS, `feishu-chat-<n>-…`)."""

    model_config = {"json_schema_extra": {
        "if": {"properties": {"scope": {"const": Scope.PROJECT.value}}, "required": ["scope"]},
        "then": {"required": ["projectKey"], "properties": {"projectKey": {
            "type": "string", "pattern": PROJECT_PATTERN, "maxLength": PROJECT_KEY_MAX,
            "not": {"anyOf": [{"enum": list(DEFAULT_BOT_PROJECT_KEYS)},
                              {"pattern": "^\\s*feishu-chat-[0-9]+-"}]}}}},
    }}

    scope: Scope
    content: Content
    # A USER memory has no project: its key is only checked for what no key may hold.
    projectKey: ProjectKey | None = None


class MemoryChange(Body):
    """Content (status kept, D12), status, or both; a field sent is a value, never null."""

    model_config = {"json_schema_extra": {
        "anyOf": [{"required": ["content"]}, {"required": ["status"]}]}}

    # Status first: a body wrong in both is refused for it (2001), as it always was.
    status: Status | SkipJsonSchema[None] = None
    content: Content | SkipJsonSchema[None] = None

    @field_validator("status", "content", mode="before")
    @classmethod
    def _null_is_not_a_value(cls, value: object) -> object:
        # Absent fields keep their default without validation; an explicit null lands here.
        if value is None:
            raise ValueError("must not be null: leave the field out instead")
        return value


class AutoCapture(Body):
    autoCaptureEnabled: StrictBool


class MemoryListQuery(PageQuery):
    scope: Scope | SkipJsonSchema[None] = None
    projectKey: Annotated[ProjectKey, Field(max_length=PROJECT_KEY_MAX)] \
        | SkipJsonSchema[None] = None
    status: Status | SkipJsonSchema[None] = None
    q: Search | SkipJsonSchema[None] = None


class PreviewQuery(Query):
    projectKey: ProjectKey | SkipJsonSchema[None] = None


class MemoryItemOut(BaseModel):
    """A memory as the JSON API answers it (the row is `app.memory.models.MemoryItem`)."""

    id: int
    userId: int
    scope: Scope
    projectKey: str | None
    content: str
    source: Source
    status: Status
    version: int = Field(description="raised by one on every change of content, status, scope "
                         "or project key; `ETag` and `If-Match` carry it")
    originSessionId: int | None
    createdAt: datetime
    updatedAt: datetime


class Preconditions(BaseModel):
    """The request headers of a change to one memory (SPEC §11 "No lost updates")."""

    ifMatch: str | SkipJsonSchema[None] = Field(
        None, alias="If-Match",
        description='the version the change is made from, as the item\'s ETag: "3" (or W/"3"). '
                    "When the memory is at another version nothing changes and the answer is "
                    "412 (3037) with the item as it is now; without it the last write wins.")


class VersionConflict(BaseModel):
    """412 MEMORY_VERSION_CONFLICT: the one failure envelope that carries `data` — the item as
    it is now (its version also in `ETag`)."""

    code: Literal[3037]
    message: str
    data: MemoryItemOut
    timestamp: int


class MemoryEvent(BaseModel):
    id: int
    type: Literal["CREATED", "EDITED", "TOUCHED", "UPDATED", "DISMISSED", "RESTORED",
                  "DEMOTED", "CONSOLIDATED"]
    at: datetime
    actor: Literal["USER", "EXTRACTION", "CONSOLIDATION"]
    sessionId: int | None
    before: str | list[str] | None = Field(
        description="content before; CONSOLIDATED: the merged contents")
    after: str | None


class Person(BaseModel):
    id: int
    username: str | None


class AccessRecord(BaseModel):
    at: datetime
    viewer: Person
    subject: Person | None = Field(None, description="admins' log only: whose memories")
    what: str


class Projects(BaseModel):
    projects: list[str]


class ContextLine(BaseModel):
    scope: Scope
    projectKey: str | None
    content: str


class MemoryContext(BaseModel):
    """The memories to inject and the exact `## 长期记忆` block ('' when there are none)."""

    memories: list[ContextLine]
    prompt: str


MemoryPage = Paged[MemoryItemOut]
AccessPage = Paged[AccessRecord]
