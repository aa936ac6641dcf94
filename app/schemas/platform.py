"""Requests and answers of the platform's endpoints: the context read and the completion webhook
(SPEC §4, §5). Both are hot paths, so their routes validate with these models directly
(`model_validate`), not through a per-request wrapper."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, StrictInt, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.extraction import intake
from app.extraction.models import EVENT_ID_MAX, REASONS
from app.memory.rules import ID_MAX
from app.schemas import Body, ProjectKey, Text, not_blank
from app.schemas.admin import UserId

PositiveId = Annotated[StrictInt, Field(gt=0, le=ID_MAX)]
# Something besides whitespace; the document says so too.
Required = Annotated[Text, AfterValidator(not_blank), Field(json_schema_extra={"pattern": r"\S"})]


class ContextQuery(BaseModel):
    """The context read's query. Not a `Query`: an empty projectKey or workspace is just no
    project (the rules ignore it), and the hot path is spared a validator per field."""

    userId: UserId
    projectKey: ProjectKey | SkipJsonSchema[None] = None
    workspace: Text | SkipJsonSchema[None] = None


class Part(Body):
    """A part of a message; only text parts count (D8)."""

    type: Text
    text: Text | None = None

    @model_validator(mode="after")
    def _text_part_has_text(self) -> Part:
        if self.type == "text" and self.text is None:
            raise ValueError("a text part must carry a string text")
        return self


Message = Annotated[Text | list[Part] | None, Field(
    description="A string, or parts of which only the text parts count.")]


def _text_of(message: str | list[Part] | None) -> str | None:
    if message is None or isinstance(message, str):
        return message
    return "\n".join(part.text or "" for part in message if part.type == "text")


class TaskCompleted(Body):
    """A finished task, as the platform reports it."""

    eventId: Annotated[Required, Field(min_length=1, max_length=EVENT_ID_MAX, description=(
        "Unique per completion; a repeat enqueues nothing."))]
    sessionId: PositiveId
    userId: PositiveId
    projectKey: Annotated[ProjectKey, Field(max_length=255)] | None = None
    workspace: Annotated[Text, Field(max_length=512)] | None = None
    sessionType: Annotated[Text, Field(
        max_length=32, description="SUBAGENT and SIDE_TASK are never extracted.")] | None = None
    channel: Annotated[Text, Field(max_length=32)] | None = None
    phase: Annotated[Required, Field(max_length=32, description="Only COMPLETED is extracted.")]
    lastUserMessage: Message = None
    lastAssistantMessage: Message = None

    def event(self) -> intake.CompletedTask:
        """What intake records and decides on: messages reduced to their text parts."""
        return intake.CompletedTask(
            event_id=self.eventId, session_id=self.sessionId, user_id=self.userId,
            project_key=self.projectKey, workspace=self.workspace,
            session_type=self.sessionType, channel=self.channel, phase=self.phase,
            user_message=_text_of(self.lastUserMessage),
            assistant_message=_text_of(self.lastAssistantMessage))


class WebhookAck(BaseModel):
    accepted: Literal[True]
    enqueued: bool
    # The reasons, from one tuple (pydantic accepts it; a type checker wants literals spelled out).
    reason: Literal[REASONS]  # type: ignore[valid-type]
