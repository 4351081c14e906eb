"""mcp-remote (the stdio bridge Claude Desktop uses) signs in to a real hivegate server and calls a tool.

Issue 7 item 11: mcp-remote 0.15 asked ``/mcp`` for ``openid email profile`` — its fallback when the
protected-resource metadata has no ``scopes_supported`` and the challenge no ``scope`` — and hivegate
answered ``invalid_scope``. Here mcp-remote runs over stdio, as an MCP host runs it, against an agent's
endpoint and against ``/mcp``: it gets the 401, discovers the metadata, registers (RFC 7591) and opens the
authorization URL in "the browser", which is a tiny ``BROWSER`` script that hands the URL to the test over a
loopback socket. Headless Chromium then signs in as alice and allows what the consent page pre-ticks; the
browser lands on mcp-remote's own callback port (given on its command line), mcp-remote redeems the code,
and the test sends ``initialize``, ``tools/list`` and ``tools/call`` over mcp-remote's stdin and reads the
answers from its stdout. Every wait is bounded.

mcp-remote is installed by ``scripts/install-tools.sh`` (``make tools``) into ``.tools/mcp-remote``, and runs
on the Node 22 there; without it the test fails saying how to install it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from playwright.sync_api import expect

from tests.browser import chromium_page, require_chromium
from tests.e2e.registry_seed import create_users
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

pytestmark = pytest.mark.browser

MCP_REMOTE_CLI = ROOT / ".tools" / "mcp-remote" / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node" / "bin" / "node"
AGENTS = """
[[agents]]
id = "alpha"
name = "Alpha"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "gamma"
name = "Gamma"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "beta"
name = "Beta"
owner = "bob"
backend = { type = "python", callable = "echo_agent:reply" }
"""
ALICE_PASSWORD = "correct horse battery staple"
URL_TIMEOUT_SECONDS = 60.0
"""Bound on mcp-remote's start, discovery and registration, until it opens the authorization URL."""
REPLY_TIMEOUT_SECONDS = 60.0
"""Bound on each JSON-RPC answer over stdio (the first one waits for the code redemption and connection)."""
STOP_TIMEOUT_SECONDS = 10.0


def _require_mcp_remote() -> None:
    if not (MCP_REMOTE_CLI.is_file() and NODE.is_file()):
        pytest.fail(
            f"mcp-remote or Node 22 is missing ({MCP_REMOTE_CLI}, {NODE}): run `make tools` "
            "(or `bash scripts/install-tools.sh`)",
            pytrace=False,
        )


async def _seed(database_url: str) -> None:
    await create_users(database_url, {"alice": ALICE_PASSWORD, "bob": "bob's own password"})


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    require_chromium()
    _require_mcp_remote()
    folder = tmp_path_factory.mktemp("mcp-remote")
    config = folder / "agents.toml"
    config.write_text(AGENTS, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    env = {"PYTHONPATH": str(ROOT / "examples"), "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0"}
    with run_gateway(config, database_url=database_url, env=env) as running:
        anyio.run(_seed, database_url)
        yield running


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@dataclass
class McpRemote:
    """One ``mcp-remote`` process: its stdio, what it logged, and the URL its "browser" was handed."""

    process: subprocess.Popen[str]
    stdout: queue.Queue[str | None]
    stderr: list[str]
    handover: socket.socket
    callback_port: int
    pumps: list[threading.Thread]

    def log(self) -> str:
        return "".join(self.stderr)

    def authorization_url(self) -> str:
        """The URL mcp-remote asked the browser to open (the ``BROWSER`` script sends it here)."""
        self.handover.settimeout(URL_TIMEOUT_SECONDS)
        try:
            connection, _ = self.handover.accept()
        except TimeoutError:
            raise AssertionError(f"mcp-remote opened no authorization URL in time:\n{self.log()}") from None
        with connection:
            connection.settimeout(URL_TIMEOUT_SECONDS)
            data = b""
            while not data.endswith(b"\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                data += chunk
        return data.decode().strip()

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def reply(self, request_id: int) -> dict[str, Any]:
        """The JSON-RPC response with ``request_id`` from mcp-remote's stdout (notifications are skipped)."""
        while True:
            try:
                line = self.stdout.get(timeout=REPLY_TIMEOUT_SECONDS)
            except queue.Empty:
                raise AssertionError(f"no answer to request {request_id} in time:\n{self.log()}") from None
            if line is None:
                raise AssertionError(f"mcp-remote exited before answering {request_id}:\n{self.log()}")
            message = cast(dict[str, Any], json.loads(line))
            if message.get("id") == request_id:
                return message

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()  # end of input: a stdio server exits
        try:
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT_SECONDS)
        for pump in self.pumps:
            pump.join(timeout=STOP_TIMEOUT_SECONDS)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        self.handover.close()


_BROWSER_SCRIPT = """\
#!{python}
# mcp-remote's "browser": hand the URL to the test over loopback instead of opening anything.
import os, socket, sys
with socket.create_connection(("127.0.0.1", int(os.environ["HIVEGATE_TEST_HANDOVER_PORT"])), timeout=10) as s:
    s.sendall(sys.argv[1].encode() + b"\\n")
"""


def _start(url: str, folder: Path, *, host: str) -> McpRemote:
    """``node proxy.js URL PORT --host HOST`` with a private config folder and the handover ``BROWSER``."""
    browser = folder / "browser"
    browser.write_text(_BROWSER_SCRIPT.format(python=sys.executable), encoding="utf-8")
    browser.chmod(0o755)
    handover = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    handover.bind(("127.0.0.1", 0))
    handover.listen(4)
    callback_port = _free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "MCP_REMOTE_CONFIG_DIR": str(folder / "mcp-auth"),
        "BROWSER": str(browser),
        "HIVEGATE_TEST_HANDOVER_PORT": str(handover.getsockname()[1]),
    }  # no DISPLAY or desktop: xdg-open falls back to $BROWSER
    process = subprocess.Popen(
        [str(NODE), str(MCP_REMOTE_CLI), url, str(callback_port), "--host", host],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=folder,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    errors: queue.Queue[str | None] = queue.Queue()
    stderr: list[str] = []
    pumps = [
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, errors), daemon=True),
        threading.Thread(target=_collect, args=(errors, stderr), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    return McpRemote(process, lines, stderr, handover, callback_port, pumps)


def _collect(lines: queue.Queue[str | None], into: list[str]) -> None:
    while (line := lines.get()) is not None:
        into.append(line)


def _sign_in_and_allow(authorization_url: str, base: str, callback: str, ticked: dict[str, bool]) -> None:
    """Sign in as alice, check which agents the consent page pre-ticks, allow; land on mcp-remote's callback."""
    with chromium_page() as page:
        page.goto(authorization_url)
        expect(page).to_have_url(re.compile(re.escape(f"{base}/oauth/login?request=") + r"[^&]+$"))
        page.locator("input[name=username]").fill("alice")
        page.locator("input[name=password]").fill(ALICE_PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(re.compile(re.escape(f"{base}/oauth/consent?request=") + r"[^&]+$"))
        for agent, checked in ticked.items():
            box = page.locator(f"input[name=agent][value={agent}]")
            if checked:
                expect(box).to_be_checked()
            else:
                expect(box).not_to_be_checked()
        expect(page.locator("input[name=agent][value=beta]")).to_have_count(0)  # bob's
        page.get_by_role("button", name="Allow").click()
        page.wait_for_url(re.compile(re.escape(callback) + r"\?"))


def _text(result: dict[str, Any]) -> str:
    return "".join(item["text"] for item in result["content"] if item.get("type") == "text")


def _granted_scope(config_dir: Path) -> str:
    """The ``scope`` of the token response mcp-remote stored (``…_tokens.json`` in its config folder)."""
    [tokens] = list(config_dir.rglob("*_tokens.json"))
    return str(json.loads(tokens.read_text(encoding="utf-8"))["scope"])


@pytest.mark.parametrize(
    ("path", "host", "scope", "ticked", "granted"),
    [
        ("/alpha/mcp", "localhost", "agent:alpha", {"alpha": True, "gamma": False}, "agent:alpha"),
        ("/mcp", "127.0.0.1", "mcp", {"alpha": True, "gamma": True}, "agent:alpha agent:gamma"),
    ],
    ids=["agent-endpoint", "user-endpoint"],
)
def test_mcp_remote_signs_in_and_calls_a_tool(
    gateway: GatewayProcess,
    tmp_path: Path,
    path: str,
    host: str,
    scope: str,
    ticked: dict[str, bool],
    granted: str,
) -> None:
    """Issue 7 item 11: mcp-remote over stdio signs in (DCR, PKCE, consent in Chromium) and calls ``alpha``."""
    base = gateway.url
    remote = _start(f"{base}{path}", tmp_path, host=host)
    try:
        authorization_url = remote.authorization_url()
        asked = parse_qs(urlsplit(authorization_url).query)
        assert authorization_url.startswith(f"{base}/oauth/authorize?"), authorization_url
        assert asked["scope"] == [scope]  # from the challenge / scopes_supported, not "openid email profile"
        assert asked["resource"] == [f"{base}{path}"]
        callback = f"http://{host}:{remote.callback_port}/oauth/callback"
        assert asked["redirect_uri"] == [callback]
        _sign_in_and_allow(authorization_url, base, callback, ticked)

        remote.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "mcp-remote-e2e", "version": "0"},
                },
            }
        )
        initialized = remote.reply(1)
        assert "result" in initialized, initialized
        remote.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        remote.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        listed = remote.reply(2)
        names = {tool["name"] for tool in listed["result"]["tools"]}
        assert "alpha" in names, listed
        message = f"hello through mcp-remote at {path}"
        remote.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "alpha", "arguments": {"message": message}},
            }
        )
        called = remote.reply(3)
        assert called["result"]["isError"] is False, called
        assert _text(called["result"]) == message
        assert _granted_scope(tmp_path / "mcp-auth") == granted  # RFC 6749 §3.3: the scope issued
    finally:
        remote.stop()
    log = remote.log()
    assert "invalid_scope" not in log, log
