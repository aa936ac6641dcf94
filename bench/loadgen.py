"""A small asyncio HTTP/1.1 load generator: a fixed list of requests over keep-alive connections.

wrk runs for a duration and cannot sign bodies; this sends exactly the requests it is given
(pre-built, e.g. HMAC-signed) at a fixed concurrency and returns every status and body.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


@dataclass
class Run:
    seconds: float
    latencies_ms: list[float]
    statuses: list[int]
    bodies: list[bytes]

    @property
    def rps(self) -> float:
        return len(self.statuses) / self.seconds

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def request(method: str, path: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _worker(port: int, queue: asyncio.Queue, out: Run) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while True:
            try:
                index, raw = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            began = time.perf_counter()
            writer.write(raw)
            await writer.drain()
            status_line = await reader.readline()
            length, close = 0, False
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "connection" and value.strip().lower() == "close":
                    close = True
            body = await reader.readexactly(length)
            out.latencies_ms[index] = (time.perf_counter() - began) * 1000
            out.statuses[index] = int(status_line.split()[1])
            out.bodies[index] = body
            if close:
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
    finally:
        writer.close()


async def _run(port: int, requests: list[bytes], concurrency: int) -> Run:
    queue: asyncio.Queue = asyncio.Queue()
    for item in enumerate(requests):
        queue.put_nowait(item)
    n = len(requests)
    out = Run(0.0, [0.0] * n, [0] * n, [b""] * n)
    began = time.perf_counter()
    await asyncio.gather(*(_worker(port, queue, out) for _ in range(concurrency)))
    out.seconds = time.perf_counter() - began
    return out


def send(port: int, requests: list[bytes], concurrency: int) -> Run:
    """Send every request once; returns timings, statuses and bodies in request order."""
    return asyncio.run(_run(port, requests, concurrency))
