"""The one place that talks to a model: resolution (D10), one chat completion, typed errors.

Nothing else in the codebase imports `openai`, and this module only when a process first talks
to a model (`sdk`): the SDK takes ~0.5 s to import, which web processes and most commands never
need; a worker loads it in `warm_up`, before it forks. A client per endpoint, key and timeout is
kept in each process, with no retries of its own: retrying is the job's decision (transient
errors are retried with backoff by the queue, timeouts are abandoned).
"""

from __future__ import annotations

import functools
import logging
import os
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, cast

import certifi

from app import tracing
from app.database.batches import Read, Row, read
from app.extensions import db
from app.system.models import CHOSEN_MODEL, EXTRACTION_MODEL_KEY

if TYPE_CHECKING:
    import httpx2
    import openai
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger(__name__)

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_BASE_URL_ENV = "OPENAI_BASE_URL"


class LlmError(Exception):
    """A call that produced no usable answer; `reason` goes to the job outcome."""

    reason = "llm_error"


class LlmTransientError(LlmError):
    """Connection failure, 429 or 5xx: worth another attempt later."""

    reason = "llm_unavailable"


class LlmTimeout(LlmError):
    """No answer within MEMORY_LLM_TIMEOUT_S: the run is abandoned (seed §9)."""

    reason = "llm_timeout"


class LlmInvalidResponse(LlmError):
    """The endpoint answered, but not with a chat completion carrying text."""

    reason = "invalid_output"


class LlmRejected(LlmError):
    """The endpoint refused the request (4xx other than 429): configuration, not luck."""

    reason = "llm_rejected"


class LlmNotConfigured(LlmError):
    """No API key in the environment variable the model names (or OPENAI_API_KEY)."""

    reason = "llm_api_key_missing"


@dataclass(frozen=True)
class ChatModel:
    id: int
    name: str
    model: str
    base_url: str | None
    api_key_env: str | None


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


def model_from(rows: Sequence[Row]) -> ChatModel | None:
    """D10 from CHOSEN_MODEL's rows: the model `memory.extractionModelId` names, else the
    default; None when neither."""
    if not rows:
        return None
    model_id, name, model, base_url, key_env, named, configured = rows[0]
    if (configured or "").strip() and not named:
        log.warning("event=extraction.model_unknown setting=%s model_id=%r fallback=default",
                    EXTRACTION_MODEL_KEY, configured.strip())
    return ChatModel(model_id, name, model, base_url, key_env)


_CHOSEN_VALUES = {"setting_key": EXTRACTION_MODEL_KEY}
# D10 in a batch (the job's reads, `pipeline`).
EXTRACTION_MODEL: Read[ChatModel | None] = read(CHOSEN_MODEL, _CHOSEN_VALUES, model_from)


def resolve_model() -> ChatModel | None:
    """D10, read now in the caller's session."""
    return model_from([tuple(row) for row in db.session.execute(CHOSEN_MODEL, _CHOSEN_VALUES)])


def api_key_env(model: ChatModel) -> str:
    """The environment variable that holds the model's key."""
    return model.api_key_env or DEFAULT_KEY_ENV


def why_unusable(model: ChatModel | None) -> str | None:
    """Why `model` (as `resolve_model` found it) cannot be called — `no_model` (none registered
    or chosen) or `llm_api_key_missing` (its key variable is unset) — or None when it can."""
    if model is None:
        return "no_model"
    if not os.environ.get(api_key_env(model)):
        return "llm_api_key_missing"
    return None


def unavailable_reason() -> str | None:
    """Why no extraction can call a model now, or None when one can."""
    return why_unusable(resolve_model())


@functools.cache
def sdk() -> ModuleType:
    """The openai SDK, imported on first use."""
    import openai

    return openai


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The CA bundle, loaded once per process: loading it for each client cost 0.2–0.3 s a job."""
    return ssl.create_default_context(cafile=certifi.where())


def warm_up() -> None:
    """Load now what the SDK otherwise loads on a process's first call: the CA bundle, the HTTP
    transport, the chat resources and their response parsing (0.1–1.5 s here).

    The worker calls this before it forks, so every work horse starts with all of it loaded.
    One request goes through an in-memory transport: nothing leaves the process.
    """
    import encodings.idna  # noqa: F401  (host names; imported by the first real request)

    import httpx2

    openai = sdk()
    openai.DefaultHttpxClient(verify=tls_context()).close()

    # The answer as endpoints send it, token counts included: parsing `usage` builds a pydantic
    # validator on first use, which a forked horse would otherwise build again for every job.
    def canned(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={
            "id": "warm-up", "object": "chat.completion", "created": 0, "model": "warm-up",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "[]"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    in_memory = openai.DefaultHttpxClient(transport=httpx2.MockTransport(canned))
    # The transport logs each request at INFO: this one never left the process, and a line
    # `POST http://warm-up.invalid/… 200 OK` would read as a real call.
    transport_log = logging.getLogger("httpx2")
    level = transport_log.level
    transport_log.setLevel(logging.WARNING)
    try:
        with openai.OpenAI(api_key="warm-up", base_url="http://warm-up.invalid/v1",
                           http_client=in_memory) as client:
            # The messages a job sends (`prompt.build_messages`): a system and a user message.
            client.chat.completions.create(model="warm-up", messages=[
                {"role": "system", "content": "warm-up"}, {"role": "user", "content": "warm-up"}])
    finally:
        transport_log.setLevel(level)


_clients: dict[tuple[int, str | None, str, float], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def _client(base_url: str | None, api_key: str, timeout_s: float) -> openai.OpenAI:
    """One client per endpoint, key and timeout in each process, kept: its connections to the
    endpoint stay open between jobs (a new client per call cost each job its setup and a new
    connection). Keyed by process too: a forked work horse must not share its parent's sockets.
    No retries of its own: retrying is the job's decision."""
    key = (os.getpid(), base_url, api_key, timeout_s)
    openai = sdk()
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = openai.OpenAI(
                base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0,
                http_client=openai.DefaultHttpxClient(verify=tls_context()))
        return client


def complete(model: ChatModel, messages: Sequence[dict[str, str]],
             timeout_s: float) -> Completion:
    """One chat completion; every failure is an LlmError subclass."""
    key_env = api_key_env(model)
    api_key = os.environ.get(key_env)
    if not api_key:
        raise LlmNotConfigured(f"model {model.name!r}: {key_env} is not set")
    base_url = model.base_url or os.environ.get(DEFAULT_BASE_URL_ENV) or None
    client = _client(base_url, api_key, timeout_s)
    # The model call's span when tracing is on (GenAI semantic conventions: `app.otel`).
    with tracing.model_call(model.model, base_url) as call:
        completion, response = _create(client, model, messages)
        call.answered(response, completion.prompt_tokens, completion.completion_tokens)
    return completion


def _create(client: openai.OpenAI, model: ChatModel,
            messages: Sequence[dict[str, str]]) -> tuple[Completion, object]:
    openai = sdk()
    try:
        # `prompt.build_messages`' system and user messages: {role, content} each.
        sent = cast("list[ChatCompletionMessageParam]", list(messages))
        response = client.chat.completions.create(model=model.model, messages=sent)
    # APITimeoutError is an APIConnectionError: it must be told apart first.
    except openai.APITimeoutError as exc:
        raise LlmTimeout(str(exc)) from exc
    except (openai.APIConnectionError, openai.RateLimitError,
            openai.InternalServerError) as exc:
        raise LlmTransientError(f"{type(exc).__name__}: {exc}") from exc
    except openai.APIStatusError as exc:
        raise LlmRejected(f"HTTP {exc.status_code}") from exc
    except (openai.APIResponseValidationError, ValueError) as exc:
        raise LlmInvalidResponse(f"{type(exc).__name__}") from exc
    choices = getattr(response, "choices", None)
    text = choices[0].message.content if choices and choices[0].message else None
    if not isinstance(text, str):
        raise LlmInvalidResponse("the completion carries no text")
    usage = getattr(response, "usage", None)
    return Completion(
        text=text,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        total_tokens=getattr(usage, "total_tokens", None),
    ), response
