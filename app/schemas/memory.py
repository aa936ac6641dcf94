"""Requests and answers of the user API (`/api/v1/memory`, SPEC §4 and §8)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictBool, StrictStr
from pydantic.json_schema import SkipJsonSchema

from app.memory.rules import MANUAL_CONTENT_MAX, PROJECT_KEY_MAX, Scope, Source, Status
from app.schemas import Body, Paged, PageQuery, ProjectKey, Query, Text

# Content is checked by the domain (trimmed length, control characters: 3034); the schema only
# says what it takes, so both checks cannot disagree.
Content = Annotated[StrictStr, Field(json_schema_extra={"minLength": 1,
                                                       "maxLength": MANUAL_CONTENT_MAX})]
Search = Annotated[Text, Field(max_length=MANUAL_CONTENT_MAX,
                               description="a case-insensitive substring of the content")]


class NewMemory(Body):
    scope: Scope
    content: Content
    projectKey: Annotated[ProjectKey | None, Field(json_schema_extra={
        "maxLength": PROJECT_KEY_MAX})] = None


class MemoryChange(Body):
    """Content (status kept, D12), status, or both."""

    model_config = {"json_schema_extra": {"minProperties": 1}}

    content: Content | None = None
    status: Status | None = None


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


class MemoryItem(BaseModel):
    id: int
    userId: int
    scope: Scope
    projectKey: str | None
    content: str
    source: Source
    status: Status
    originSessionId: int | None
    createdAt: datetime
    updatedAt: datetime


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


MemoryPage = Paged[MemoryItem]
AccessPage = Paged[AccessRecord]
