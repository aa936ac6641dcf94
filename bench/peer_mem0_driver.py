"""mem0 (open source, PyPI `mem0ai`) side of the peer benchmark; runs in bench/.venv-mem0.

Fully offline: LLM and embeddings from the bench stub, a local on-disk Qdrant, history in a
local SQLite file. Prints one JSON object with per-call timings in milliseconds.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

os.environ["MEM0_TELEMETRY"] = "False"

from mem0 import Memory  # noqa: E402

from bench.turns import USERS, turns  # noqa: E402


def main() -> None:
    base_url = sys.argv[1]
    workdir = tempfile.mkdtemp(prefix="mem0-bench-")
    os.environ["MEM0_DIR"] = workdir
    memory = Memory.from_config({
        "llm": {"provider": "openai", "config": {
            "model": "bench-model", "api_key": "bench", "openai_base_url": base_url}},
        "embedder": {"provider": "openai", "config": {
            "model": "bench-embed", "api_key": "bench", "openai_base_url": base_url,
            "embedding_dims": 64}},
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "bench", "path": os.path.join(workdir, "qdrant"),
            "embedding_model_dims": 64, "on_disk": True}},
        "history_db_path": os.path.join(workdir, "history.db"),
    })
    add_ms = []
    for user, said, answered in turns():
        began = time.perf_counter()
        memory.add([{"role": "user", "content": said},
                    {"role": "assistant", "content": answered}], user_id=f"user-{user}")
        add_ms.append((time.perf_counter() - began) * 1000)
    get_all_ms, search_ms, sizes = [], [], []
    for _ in range(20):
        for user in range(USERS):
            began = time.perf_counter()
            found = memory.get_all(filters={"user_id": f"user-{user}"}, top_k=200)
            get_all_ms.append((time.perf_counter() - began) * 1000)
            sizes.append(len(found["results"]))
            began = time.perf_counter()
            memory.search("报告用什么语言写?", filters={"user_id": f"user-{user}"}, top_k=20)
            search_ms.append((time.perf_counter() - began) * 1000)
    print(json.dumps({
        "add_mean_ms": statistics.fmean(add_ms), "add_p50_ms": statistics.median(add_ms),
        "get_all_p50_ms": statistics.median(get_all_ms),
        "search_p50_ms": statistics.median(search_ms),
        "memories_per_user": statistics.fmean(sizes),
    }))


if __name__ == "__main__":
    main()
