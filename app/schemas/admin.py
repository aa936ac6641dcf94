"""Requests and answers of the admin API (`/api/v1/admin`, SPEC §4 and §8)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field, StrictInt
from pydantic.json_schema import SkipJsonSchema

from app.extraction.outcomes import OutcomeStatus
from app.memory.rules import ID_MAX, Scope, Status
from app.schemas import Body, Paged, PageQuery, Text
from app.schemas.memory import Search
from app.system.service import MODEL_ID_DIGITS
from app.wire import ascii_id

# A user id in a query string: ASCII digits only (`wire.ascii_id`), a positive BIGINT.
UserId = Annotated[int, Field(ge=1, le=ID_MAX), BeforeValidator(ascii_id)]


class AuditQuery(PageQuery):
    userId: UserId
    scope: Scope | SkipJsonSchema[None] = None
    status: Status | SkipJsonSchema[None] = None
    q: Search | SkipJsonSchema[None] = None


class OutcomeQuery(PageQuery):
    userId: UserId | SkipJsonSchema[None] = None
    status: OutcomeStatus | SkipJsonSchema[None] = None
    kind: Annotated[Text, Field(max_length=32, description="extraction or consolidation")] \
        | SkipJsonSchema[None] = None


class SettingValue(Body):
    """memory.extractionModelId takes '' (the default model) or the id of a registered model,
    as a string of ASCII digits or a number; an id no model has is 3003."""

    value: Annotated[Text, Field(json_schema_extra={
        "pattern": f"^([0-9]{{1,{MODEL_ID_DIGITS}}})?$"})] \
        | Annotated[StrictInt, Field(json_schema_extra={
            "minimum": 1, "maximum": 10**MODEL_ID_DIGITS - 1})]


class Setting(BaseModel):
    key: str
    value: str
    category: str
    description: str
    editable: bool


class Model(BaseModel):
    id: int
    name: str
    model: str
    isDefault: bool


class JobOutcome(BaseModel):
    id: int
    kind: str
    jobId: str
    eventId: str | None
    userId: int
    sessionId: int | None
    status: OutcomeStatus
    reason: str
    attempts: int = Field(ge=1)
    model: str | None
    promptChars: int | None
    promptTokens: int | None
    completionTokens: int | None
    totalTokens: int | None
    inserted: int
    touched: int
    updated: int
    dropped: int
    demoted: int
    stale: int = Field(description="touches and updates not applied: the row had changed "
                       "since the model saw it (SPEC §11)")
    secretsDropped: int  # candidates or merges refused for holding a credential
    durationMs: int
    createdAt: datetime
    # Consolidation jobs only (null for extraction): the group and its rows.
    scope: Scope | None
    projectKey: str | None
    rowsIn: int | None
    rowsOut: int | None
    merges: int | None
    drops: int | None


OutcomePage = Paged[JobOutcome]
