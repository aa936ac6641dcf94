"""A scripted OpenAI-compatible HTTP server: the only stand-in in the suite.

It serves `POST /v1/chat/completions` (and `/chat/completions`) on 127.0.0.1 to the real
`openai` client. Each test scripts the replies in order — content, delay, HTTP status, a garbage
body, a dropped connection, usage numbers — and reads back every request it received (path,
headers, model, messages, and when it started and ended). A request with nothing scripted is
answered 418, so an unexpected LLM call fails the job loudly.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
DEFAULT_USAGE = {"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333}


@dataclass(frozen=True)
class Reply:
    content: str | None = "[]"
    status: int = 200
    delay: float = 0.0
    body: bytes | None = None  # sent as is instead of a chat completion
    disconnect: bool = False  # close the connection without answering
    usage: dict[str, int] | None = None


@dataclass
class Request:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]
    started: float
    ended: float = float("inf")  # until the answer is sent

    @property
    def model(self) -> str:
        return self.body.get("model")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def prompt(self) -> str:
        """The user message of an extraction call (the second message)."""
        return self.messages[-1]["content"]


@dataclass
class _Script:
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    served: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.served = threading.Condition(self.lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the recorded requests are the log."""

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        started = time.monotonic()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path not in CHAT_PATHS:
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        script = self.server.script
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = Request(self.path, headers, json.loads(raw or b"{}"), started)
        with script.served:
            reply = script.replies.popleft() if script.replies else None
            script.requests.append(request)
            script.served.notify_all()
        try:
            self._answer(request, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (a timeout): what the test wanted
        finally:
            request.ended = time.monotonic()

    def _answer(self, request: Request, reply: Reply | None) -> None:
        if reply is None:
            self._send(418, b'{"error": {"message": "no scripted reply left"}}')
            return
        if reply.delay:
            time.sleep(reply.delay)
        if reply.disconnect:
            self.close_connection = True
            return
        if reply.body is not None:
            self._send(reply.status, reply.body)
            return
        if reply.status != 200:
            error = {"error": {"message": f"scripted {reply.status}", "type": "scripted"}}
            self._send(reply.status, json.dumps(error).encode())
            return
        completion = {
            "id": f"chatcmpl-scripted-{len(self.server.script.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.content}}],
            "usage": reply.usage or DEFAULT_USAGE,
        }
        self._send(200, json.dumps(completion, ensure_ascii=False).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: _Script


class ScriptedLlm:
    """Start, script, inspect, close."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.script = _Script()
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ---- scripting -------------------------------------------------------------------

    def reply(self, content: str | None = "[]", **options: Any) -> None:
        """Queue one reply; options are the fields of `Reply`."""
        with self._server.script.lock:
            self._server.script.replies.append(Reply(content=content, **options))

    def reply_items(self, items: list[Any], **options: Any) -> None:
        """Queue a reply whose content is these items as a JSON array."""
        self.reply(json.dumps(items, ensure_ascii=False), **options)

    @property
    def pending(self) -> int:
        with self._server.script.lock:
            return len(self._server.script.replies)

    # ---- inspecting ------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        with self._server.script.lock:
            return list(self._server.script.requests)

    def wait_for_requests(self, count: int, timeout_s: float = 10) -> list[Request]:
        script = self._server.script
        with script.served:
            if not script.served.wait_for(lambda: len(script.requests) >= count, timeout_s):
                raise AssertionError(f"{len(script.requests)} LLM requests, expected {count}")
            return list(script.requests)
