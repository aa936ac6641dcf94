"""The worker loads the SDK's lazy parts before it forks, so no job pays for them."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import json, os, sys
    from app.extraction import llm
    llm.warm_up()
    loaded = set(sys.modules)
    model = llm.ChatModel(1, "scripted", "scripted-default", sys.argv[1], None)
    answer = llm.complete(model, [{"role": "user", "content": "hello"}], 5)
    print(json.dumps({"text": answer.text, "new": sorted(set(sys.modules) - loaded)}))
""")


def test_after_warm_up_an_llm_call_loads_no_module(llm):
    llm.reply("[]")
    result = subprocess.run([sys.executable, "-c", CHILD, llm.base_url], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    child = json.loads(result.stdout.strip().splitlines()[-1])
    assert child == {"text": "[]", "new": []}


def test_warm_up_sends_nothing_over_the_network(llm):
    from app.extraction import llm as client

    client.warm_up()
    assert llm.requests == []
