"""An OpenAI-compatible stub that answers instantly: chat completions and embeddings.

Run as its own process (`python -m bench.llm_stub PORT`) so the load it serves does not share a
GIL with what is measured. Chat answers are derived from the prompt, so every conversation turn
yields a distinct fact:
- a request with `response_format: json_object` is mem0's extraction call → `{"memory": [...]}`;
- anything else is our extraction call → a JSON array with one `insert`.
Embeddings are deterministic vectors of EMBEDDING_DIMS floats from a hash of the text.

By hand (README, "Try it"), `--reply TEXT` makes every chat completion answer exactly TEXT, e.g.
a fixed extraction reply, so a walkthrough shows a known memory being learnt.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBEDDING_DIMS = 64
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


def fact_for(prompt: str) -> str:
    digest = hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:10]
    return f"用户偏好 {digest}:报告用中文写,仓库用 pnpm"


def embedding(text: str) -> list[float]:
    raw = b""
    seed = text.encode("utf-8")
    while len(raw) < EMBEDDING_DIMS * 4:
        seed = hashlib.sha256(seed).digest()
        raw += seed
    values = struct.unpack(f"<{EMBEDDING_DIMS}I", raw[:EMBEDDING_DIMS * 4])
    return [v / 2**32 - 0.5 for v in values]


class Handler(BaseHTTPRequestHandler):
    # Every chat answer's content when set (`--reply`); else derived from the prompt.
    fixed_reply: str | None = None
    protocol_version = "HTTP/1.1"
    # http.server writes headers and body separately; without this every call waits ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.endswith("/embeddings"):
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs
            payload = {"object": "list", "model": body.get("model"),
                       "data": [{"object": "embedding", "index": i, "embedding": embedding(t)}
                                for i, t in enumerate(inputs)],
                       "usage": {"prompt_tokens": 10, "total_tokens": 10}}
        else:
            prompt = json.dumps(body.get("messages", []), ensure_ascii=False)
            fact = fact_for(prompt)
            if self.fixed_reply is not None:
                content = self.fixed_reply
            elif (body.get("response_format") or {}).get("type") == "json_object":
                content = json.dumps({"memory": [{"id": "0", "text": fact}]}, ensure_ascii=False)
            else:
                content = json.dumps([{"type": "user", "action": "insert", "content": fact}],
                                     ensure_ascii=False)
            payload = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0,
                       "model": body.get("model"),
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": USAGE}
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description="An OpenAI-compatible stub on 127.0.0.1.")
    parser.add_argument("port", type=int)
    parser.add_argument("--reply", help="answer every chat completion with exactly this text "
                                        "(e.g. a JSON array of extraction items)")
    args = parser.parse_args()
    Handler.fixed_reply = args.reply
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"LLM stub: base URL http://127.0.0.1:{args.port}/v1", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
