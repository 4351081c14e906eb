"""The A2A JavaScript SDK's client (``@a2a-js/sdk``) fetches a card and sends and streams a message (issue 9).

A real hivegate with the demo echo agent (``examples/echo_agent.py``, streaming its reply word by word) owned
by alice and served with credentials, a SQLite registry and alice's ``oag_`` key. ``tests/e2e/a2a_js_client.mjs``
runs on the Node 22 of ``.tools/``: from the card URL alone it fetches the card, sends the message
(``SendMessage``, blocking) and streams it (``SendStreamingMessage``) over the card's JSON-RPC interface, and
again over its HTTP+JSON one, with the key as a bearer token, and prints what it got as JSON. The SDK and
Node are installed by ``scripts/install-tools.sh`` (``make tools``); without them the test fails saying how
to install them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

NODE = ROOT / ".tools" / "node22" / "node_modules" / "node" / "bin" / "node"
A2A_JS_DIR = ROOT / ".tools" / "a2a-js"
A2A_JS_CLIENT = A2A_JS_DIR / "node_modules" / "@a2a-js" / "sdk" / "dist" / "client" / "index.js"
SCRIPT = ROOT / "tests" / "e2e" / "a2a_js_client.mjs"
RUN_TIMEOUT_SECONDS = 90.0
"""Bound on the whole Node run: Node's start, the card, one send and one stream (each call has 30 s)."""

CONFIG = """
[[agents]]
id = "echo"
name = "Echo"
description = "Replies with the message it receives, streamed word by word."
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }
visibility = "public"  # its card is public; calling it still takes alice's credential
"""
MESSAGE = "hello from the a2a-js client"
EXAMPLES = (str(ROOT / "examples"),)


@dataclass(frozen=True)
class Served:
    gateway: GatewayProcess
    alice: str


def _require_a2a_js() -> None:
    if not (A2A_JS_CLIENT.is_file() and NODE.is_file()):
        pytest.fail(
            f"@a2a-js/sdk or Node 22 is missing ({A2A_JS_CLIENT}, {NODE}): run `make tools` "
            "(or `bash scripts/install-tools.sh`)",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    _require_a2a_js()
    folder = tmp_path_factory.mktemp("a2a-js")
    config = folder / "agents.toml"
    config.write_text(CONFIG, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    alice = create_user_with_key(database_url, "alice", pythonpath=EXAMPLES)
    assert alice.startswith("oag_"), alice
    run_cli(database_url, "agents", "apply", str(config), pythonpath=EXAMPLES)
    with run_gateway(config, database_url=database_url, env={"PYTHONPATH": str(ROOT / "examples")}) as running:
        yield Served(running, alice)


def _run_client(served: Served, key: str, binding: str = "JSONRPC") -> subprocess.CompletedProcess[str]:
    card_url = f"{served.gateway.url}/echo/.well-known/agent-card.json"
    return subprocess.run(
        [str(NODE), str(SCRIPT), str(A2A_JS_DIR), card_url, key, MESSAGE, binding],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a2a_js_client_fetches_the_card_then_sends_and_streams(served: Served, binding: str) -> None:
    result = _run_client(served, served.alice, binding)
    assert result.returncode == 0, f"{result.stdout}{result.stderr}\n{served.gateway.output()}"
    out = cast(dict[str, Any], json.loads(result.stdout.strip().splitlines()[-1]))
    assert out["binding"] == binding
    assert out["card"]["name"] == "Echo"
    assert [binding, f"{served.gateway.url}/echo/a2a", "1.0"] in out["card"]["interfaces"]
    assert out["send"] == {"kind": "task", "state": "TASK_STATE_COMPLETED", "text": MESSAGE}
    stream = out["stream"]
    assert stream["kinds"][0] == "task"
    assert stream["kinds"].count("artifactUpdate") == len(MESSAGE.split(" ")) + 1  # each word, then the whole
    assert (stream["state"], stream["text"]) == ("TASK_STATE_COMPLETED", MESSAGE)


def test_a2a_js_client_with_a_bad_key_is_refused(served: Served) -> None:
    result = _run_client(served, "oag_not-a-real-key")
    assert result.returncode != 0, result.stdout
    # the JSON-RPC error the gate answers with reaches the SDK's caller as an error naming the reason
    assert "reason: 'UNAUTHORIZED'" in result.stderr, result.stderr
