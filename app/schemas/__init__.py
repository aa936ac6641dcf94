"""The JSON API's requests and responses as pydantic models: one schema per request and
response, from which both the validation (`app.apispec`) and `/api/openapi.json` come.

Bodies take JSON's own types strictly (a "5" is not an id, a 1 is not a boolean), as the service
always has; query strings are text, so their numbers are read from digits, and an empty value
means "not given". Every field that ends up in the database or a prompt refuses lone surrogates
(no UTF-8 encoding exists for them); project keys and memory content are checked by the
domain's own rules (`app.memory.rules`), so every path refuses the same characters.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, field_validator
from pydantic_core import PydanticUseDefault

from app.memory import rules
from app.paging import DEFAULT_SIZE, MAX_PAGE, MAX_SIZE

T = TypeVar("T")

ERROR_CODES = (1001, 1002, 2001, 3003, 3033, 3034, 3035, 3036, 3038, 5001)


# In a str every surrogate is lone: a valid pair decodes to one character.
_SURROGATE = re.compile("[\ud800-\udfff]")


def no_lone_surrogates(value: str) -> str:
    if _SURROGATE.search(value):
        raise ValueError("must not contain lone surrogates")
    return value


def not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Text = Annotated[StrictStr, AfterValidator(no_lone_surrogates)]
# Any project key a caller sends; PROJECT memories then also need a real project (rules). The
# document states the same rule as a pattern (rules.PROJECT_KEY_PATTERN).
ProjectKey = Annotated[StrictStr, AfterValidator(rules.reported_project_key),
                       Field(json_schema_extra={"pattern": rules.PROJECT_KEY_PATTERN})]


class Body(BaseModel):
    """A JSON request body; unknown fields are ignored. Its fields use the strict types (Text,
    StrictInt, StrictBool), so no JSON value is coerced into another type."""


def _blank_is_documented(schema: dict[str, Any]) -> None:
    """The document says what `Query._blank_is_absent` does: an optional parameter may also be
    sent empty (`?scope=&page=`), meaning not given."""
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        if name not in required:
            schema["properties"][name] = {"anyOf": [prop, {"type": "string", "maxLength": 0}]}


class Query(BaseModel):
    """A query string: an empty value is a parameter not given."""

    model_config = ConfigDict(json_schema_extra=_blank_is_documented)

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_absent(cls, value: Any) -> Any:
        if value == "":
            raise PydanticUseDefault()
        return value


class PageQuery(Query):
    page: int = Field(1, ge=1, le=MAX_PAGE)
    pageSize: int = Field(DEFAULT_SIZE, ge=1, le=MAX_SIZE)


class Envelope(BaseModel, Generic[T]):
    """The success envelope of SPEC §4."""

    code: Literal[0]
    message: str
    data: T
    timestamp: int


class Error(BaseModel):
    """The failure envelope of SPEC §4: never a `data` key."""

    model_config = ConfigDict(json_schema_extra={"not": {"required": ["data"]}})

    # The codes, from one tuple (pydantic accepts it; a type checker wants literals spelled out).
    code: Literal[ERROR_CODES]  # type: ignore[valid-type]
    message: str
    timestamp: int


class Paged(BaseModel, Generic[T]):
    """A page: `{records, total, current, size}`."""

    records: list[T]
    total: int = Field(ge=0)
    current: int = Field(ge=1)
    size: int = Field(ge=1)
