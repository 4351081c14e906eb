"""Loopback load test: hivegate's ``echo`` agent against a bare official-SDK server.

    python bench/run.py [--duration S] [--connections N] [--rounds R] [--only hivegate|sdk]
                        [--workloads NAME,...] [--out bench/results/NAME.json] [--sdk-sse]
                        [--gate] [--servers NAME,...]
                        [--hivegate-tree DIR] [--label TEXT] [--profile] [--enforce]

Both servers run as subprocesses pinned to core 1 (``taskset -c 1``); wrk (one thread, with
``bench/wrk/mcp.lua``) runs pinned to core 0. For every workload and server: a sample of
responses is checked with httpx first (status 200 and the expected result, else the run
stops), then wrk runs a warm-up (2 s, discarded) and the timed run (``--duration``, default
10 s). wrk checks every timed response too; any bad response fails the run. The server's CPU
time during the timed run is read from /proc (CPU per request, how busy the server core was,
and how much of that core other processes took: a disturbed run is retried).

Rounds (default 3) interleave the servers workload by workload, so each hivegate/SDK pair
runs back to back; rows report the median over the rounds and the ratios are the median of
the per-round ratios (this VM's speed drifts by ±25% over minutes).

Workloads (2026-07-28 requests carry MCP-Protocol-Version, Mcp-Method, Mcp-Name and the
``params._meta`` protocol stamp; legacy ones run in an initialized session):

    tools_list          2026-07-28 tools/list                 hivegate, sdk
    tools_call          2026-07-28 tools/call echo("hello")   hivegate, sdk
    resources_read      2026-07-28 resources/read of hivegate://agent/config   hivegate
    legacy_tools_call   legacy-session tools/call echo("hello")                hivegate, sdk
    tools_call_keyed    tools_call with a fresh idempotency_key per request    gate-* (not gate-none)
    a2a_send            A2A JSON-RPC SendMessage "hello" (blocking) at /echo/a2a   hivegate, a2a-sdk

``a2a_send`` runs with ``bench/wrk/a2a.lua`` (A2A-Version 1.0, a fresh messageId per request; every
response must be a COMPLETED task whose ``response`` artifact is the echoed text) against
``a2a-sdk`` (``bench/a2a_sdk_echo_server.py``: the a2a-sdk's Starlette routes and in-memory task
store, the same echo executor); ``--gate --servers gate-oag,a2a-sdk --workloads a2a_send`` checks
the issue 9 target (>= 5x the bare server's req/s with an ``oag_`` key and the tasks in SQLite).
Every row records the server's resident memory before and after its timed run.

``--gate`` adds hivegate serving the same echo agent behind the credential gate, each from a
SQLite database in a temporary directory (``bench/gate_setup.py``: the echo agent with
``owner = "bench"``, user ``bench``, one ``oag_`` key, one OAuth grant for ``agent:echo``):

    gate-none            auth = "none" (the baseline of the gate ratios; same SQLite set-up)
    gate-oag             credentials required; Authorization: Bearer oag_... (cache 1 s, the default)
    gate-oag-limited     gate-oag with the rate limit on (1,000,000 calls a minute: never refused; the others
                         run with rate_limits.enabled = false): ``--gate --servers gate-oag,gate-oag-limited
                         --workloads tools_call`` checks the issue 10 target (limited >= 0.85x plain)
    gate-oag-nocache     the same with security.credential_cache_seconds = 0 (every request asks SQLite)
    gate-oauth           an OAuth access token (HS256 JWT minted for the server's URL after it starts)
    gate-oauth-nocache   the same with security.credential_cache_seconds = 0
    gate-user            gate-oag's server and key, on the user-level endpoint /mcp (the echo
                         agent is the tool ``echo`` there too); tools_list, tools_call, legacy_tools_call

wrk gets the credential through ``MCP_BENCH_HEADER`` (see ``bench/wrk/mcp.lua``); the ratios
(req/s, p50, p99) of every gate server to ``gate-none`` are the medians of per-round ratios.
``--servers floor,floor-spin40`` adds ``bench/floor_server.py``: canned replies on hivegate's HTTP
stack, with no MCP work (``floor``) and with 40 µs of CPU burnt per request (``floor-spin40``), so a
run shows what HTTP, the event loop and the kernel cost per request at the load a server meets.

``--servers`` picks the servers to start (default hivegate,sdk,a2a-sdk, plus sdk-sse with
``--sdk-sse`` and the gate-* ones with ``--gate``). Every server's req/s is also put over the
SDK's when ``sdk`` runs too: ``--gate --servers gate-oag,sdk --workloads tools_call`` checks the
issue 7 target (tools/call >= 4x the SDK with an ``oag_`` key on an agent that requires credentials);
``--gate --servers gate-oag,gate-user --workloads tools_call,legacy_tools_call`` the issue 8 one
(/mcp tools/call >= 0.9x the agent endpoint with the same key, both eras).

``--hivegate-tree`` benches another checkout (e.g. ``git archive COMMIT | tar -x -C DIR``);
``--baseline-tree DIR`` also runs each selected hivegate server from DIR (``NAME@baseline``) in
the same rounds, so a change and its parent are compared under the same machine conditions.
``--profile`` attaches py-spy to the server (hivegate unless ``--profile-servers``) during
each first-round timed run and writes a flame graph and collapsed stacks per workload under
``--profile-dir`` (see ``bench/profile.sh``). ``--enforce`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import queue
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from importlib.metadata import version as pkg_version
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
LUA = BENCH / "wrk" / "mcp.lua"
A2A_LUA = BENCH / "wrk" / "a2a.lua"
A2A_PATH = "/echo/a2a"
"""The echo agent's A2A JSON-RPC binding, on hivegate and on the bare a2a-sdk server alike."""

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
CONFIG_URI = "hivegate://agent/config"
SERVER_CORE = "1"
LOAD_CORE = "0"
READY_TIMEOUT_S = 60.0
WARMUP_S = 2
SAMPLE_SIZE = 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
QUIET_CORES = 0.15  # before a timed run, wait until other processes use less than this much CPU
DISTURBED = 0.05  # a run whose server core gave more than this share to others is retried

# Targets from the issue: hivegate/SDK req/s ratios and hivegate's tail at the benchmark's load.
TARGET_MODERN_CALL_RATIO = 4.0
TARGET_LEGACY_CALL_RATIO = 2.0
TARGET_P99_OVER_P50 = 3.0
TARGET_USER_OVER_AGENT = 0.9
TARGET_A2A_SEND_RATIO = 5.0
TARGET_CONTRACT_RATIO = 0.85
"""Issue 10: a keyed call, and a rate-limited one, keep at least this share of the plain call's req/s."""


# --- workloads -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    label: str
    method: str
    params: dict[str, Any]
    mcp_name: str | None  # the Mcp-Name header (2026-07-28 only)
    legacy: bool
    expect: str  # substring every response body must contain (checked by wrk)
    check: Callable[[dict[str, Any]], str | None]  # full check of a sampled result: error or None
    a2a: bool = False  # an A2A JSON-RPC request to A2A_PATH (bench/wrk/a2a.lua), not MCP
    expect_more: tuple[str, ...] = ()  # more substrings every response must contain (A2A workloads)


def _check_tools_list(result: dict[str, Any]) -> str | None:
    names = [tool.get("name") for tool in result.get("tools", [])]
    return None if "echo" in names else f"no tool named echo in {names}"


def _check_echo(result: dict[str, Any]) -> str | None:
    if result.get("isError"):
        return "isError is true"
    content = result.get("content") or [{}]
    if content[0].get("type") != "text" or content[0].get("text") != "hello":
        return f"content is {content!r}, expected one text block 'hello'"
    return None


def _check_config(result: dict[str, Any]) -> str | None:
    contents = result.get("contents") or [{}]
    if contents[0].get("uri") != CONFIG_URI:
        return f"contents[0].uri is {contents[0].get('uri')!r}"
    try:
        config = json.loads(contents[0].get("text", ""))
    except ValueError:
        return "contents[0].text is not JSON"
    return None if config.get("id") == "echo" else f"config id is {config.get('id')!r}"


def _check_a2a_task(result: dict[str, Any]) -> str | None:
    task = result.get("task") or {}
    state = (task.get("status") or {}).get("state")
    if state != "TASK_STATE_COMPLETED":
        return f"task state is {state!r}"
    artifacts = task.get("artifacts") or [{}]
    if len(artifacts) != 1 or artifacts[0].get("parts") != [{"text": "hello"}]:
        return f"artifacts are {artifacts!r}, expected one with the one text part 'hello'"
    return None


_ECHO_ARGS = {"name": "echo", "arguments": {"message": "hello"}}
# wrk's mcp.lua puts a string unique per request and run in place of @N@ (a fresh idempotency key every time)
_KEYED_ECHO_ARGS = {"name": "echo", "arguments": {"message": "hello", "idempotency_key": "bench-@N@"}}
# wrk's a2a.lua puts a number unique per request in place of @N@ (a fresh messageId every time)
_A2A_MESSAGE = {"message": {"messageId": "bench-@N@", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}

WORKLOADS = {
    w.name: w
    for w in (
        Workload(
            "tools_list", "2026-07-28 tools/list", "tools/list", {}, None, False, '"name":"echo"', _check_tools_list
        ),
        Workload(
            "tools_call",
            "2026-07-28 tools/call",
            "tools/call",
            _ECHO_ARGS,
            "echo",
            False,
            '"text":"hello"',
            _check_echo,
        ),
        Workload(
            "tools_call_keyed",
            "2026-07-28 tools/call, a fresh idempotency_key",
            "tools/call",
            _KEYED_ECHO_ARGS,
            "echo",
            False,
            '"text":"hello"',
            _check_echo,
        ),
        Workload(
            "resources_read",
            "2026-07-28 resources/read",
            "resources/read",
            {"uri": CONFIG_URI},
            CONFIG_URI,
            False,
            f'"uri":"{CONFIG_URI}"',
            _check_config,
        ),
        Workload(
            "legacy_tools_call",
            "legacy tools/call (session)",
            "tools/call",
            _ECHO_ARGS,
            None,
            True,
            '"text":"hello"',
            _check_echo,
        ),
        Workload(
            "a2a_send",
            "A2A SendMessage (blocking)",
            "SendMessage",
            _A2A_MESSAGE,
            None,
            False,
            '"state":"TASK_STATE_COMPLETED"',
            _check_a2a_task,
            a2a=True,
            # the artifact's whole reply (the message's own text part in the history has no name)
            expect_more=('"name":"response","parts":[{"text":"hello"}]',),
        ),
    )
}


# --- servers ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ServerSpec:
    name: str
    argv: list[str]
    ready_prefix: str  # the stdout line announcing the URL
    path: str  # the MCP endpoint path
    workloads: tuple[str, ...]
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # on top of the bench's environment
    # the Authorization header value every request carries, given the server's base URL (after start)
    auth: Callable[[str], str] | None = None


SERVERS = {
    "hivegate": ServerSpec(
        "hivegate",
        [
            sys.executable,
            "-m",
            "hivegate",
            "serve",
            "--config",
            "examples/hivegate.toml",
            "--port",
            "0",
            "--dev",
            "--database-url",
            "memory://",
        ],
        "hivegate listening on ",
        "/echo/mcp",
        ("tools_list", "tools_call", "resources_read", "legacy_tools_call", "a2a_send"),
    ),
    "sdk": ServerSpec(
        "sdk",
        [sys.executable, str(BENCH / "sdk_echo_server.py"), "0"],
        "sdk listening on ",
        "/mcp",
        ("tools_list", "tools_call", "legacy_tools_call"),
    ),
    # The SDK in its default mode (SSE replies), as hivegate answers legacy POSTs: only with --sdk-sse.
    "sdk-sse": ServerSpec(
        "sdk-sse",
        [sys.executable, str(BENCH / "sdk_echo_server.py"), "0", "--sse"],
        "sdk listening on ",
        "/mcp",
        ("tools_call", "legacy_tools_call"),
    ),
    # The A2A baseline (bench/a2a_sdk_echo_server.py): the a2a-sdk's Starlette routes, the same echo
    # executor, the SDK's in-memory task store, no authentication.
    "a2a-sdk": ServerSpec(
        "a2a-sdk",
        [sys.executable, str(BENCH / "a2a_sdk_echo_server.py"), "0"],
        "a2a-sdk listening on ",
        A2A_PATH,
        ("a2a_send",),
    ),
    # What a request costs with no MCP work (bench/floor_server.py): canned replies on hivegate's HTTP
    # stack; floor-spin40 also burns 40 µs of CPU per request, standing for an application of that cost.
    "floor": ServerSpec(
        "floor",
        [sys.executable, str(BENCH / "floor_server.py"), "0"],
        "floor listening on ",
        "/echo/mcp",
        ("tools_list", "tools_call"),
    ),
    "floor-spin40": ServerSpec(
        "floor-spin40",
        [sys.executable, str(BENCH / "floor_server.py"), "0", "--spin-us", "40"],
        "floor listening on ",
        "/echo/mcp",
        ("tools_list", "tools_call"),
    ),
}


class BenchError(RuntimeError):
    """The run cannot produce valid numbers: a server failed or a response was wrong."""


GATE_BASELINE = "gate-none"
GATE_SERVERS = (
    GATE_BASELINE,
    "gate-oag",
    "gate-oag-limited",
    "gate-oag-nocache",
    "gate-oauth",
    "gate-oauth-nocache",
    "gate-user",
)
USER_WORKLOADS = ("tools_list", "tools_call", "legacy_tools_call")
"""What the user-level endpoint serves alike (the echo agent's resources are renamed there)."""
HIVEGATE_WORKLOADS = SERVERS["hivegate"].workloads
GATE_ONLY_WORKLOADS = ("tools_call_keyed",)
"""Workloads of a signed-in caller only (an idempotency key needs one: issue 10 item 2)."""


def gate_specs(tmp: Path, tree: Path) -> dict[str, ServerSpec]:
    """The gate-* servers: ``bench/gate_setup.py setup`` writes their configs and credentials into ``tmp``."""
    done = subprocess.run(
        [sys.executable, str(BENCH / "gate_setup.py"), "setup", str(tmp), str(tree)],
        capture_output=True,
        text=True,
        env=_server_env(tree),
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"gate_setup.py setup failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    made = json.loads(done.stdout)
    signing_key = os.urandom(32).hex()

    def serve(config: str, database_url: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "hivegate",
            "serve",
            "--config",
            str(tmp / config),
            "--port",
            "0",
            "--dev",
            "--database-url",
            database_url,
        ]

    def key(_: str) -> str:
        return f"Bearer {made['key']}"

    def token(base_url: str) -> str:
        argv = [sys.executable, str(BENCH / "gate_setup.py"), "token", base_url, signing_key]
        argv += [made["user_id"], made["grant_id"], made["client_id"]]
        minted = subprocess.run(argv, capture_output=True, text=True, env=_server_env(tree), timeout=60, check=False)
        if minted.returncode != 0 or not minted.stdout.strip():
            raise BenchError(f"gate_setup.py token failed ({minted.returncode}):\n{minted.stderr}")
        return f"Bearer {minted.stdout.strip()}"

    def spec(
        name: str,
        config: str,
        url: str,
        auth: Callable[[str], str] | None,
        cache_s: str,
        path: str = "/echo/mcp",
        rate_limit: int | None = None,
    ) -> ServerSpec:
        env = {
            "HIVEGATE_SECURITY__TOKEN_SIGNING_KEY": signing_key,
            "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": cache_s,
            # the plain call has no rate limit; gate-oag-limited has one it never reaches (issue 10 item 4)
            "HIVEGATE_RATE_LIMITS__ENABLED": "true" if rate_limit is not None else "false",
            "HIVEGATE_RATE_LIMITS__CALLS_PER_MINUTE": str(rate_limit or 60),
        }
        signed_in = GATE_ONLY_WORKLOADS if auth is not None else ()
        workloads = HIVEGATE_WORKLOADS + signed_in if path != "/mcp" else USER_WORKLOADS
        return ServerSpec(name, serve(config, url), "hivegate listening on ", path, workloads, env, auth)

    gate_url, none_url = made["gate_database_url"], made["none_database_url"]
    specs = [
        spec("gate-none", "none.toml", none_url, None, "1"),
        spec("gate-oag", "gate.toml", gate_url, key, "1"),
        spec("gate-oag-limited", "gate.toml", gate_url, key, "1", rate_limit=1_000_000),
        spec("gate-oag-nocache", "gate.toml", gate_url, key, "0"),
        spec("gate-oauth", "gate.toml", gate_url, token, "1"),
        spec("gate-oauth-nocache", "gate.toml", gate_url, token, "0"),
        spec("gate-user", "gate.toml", gate_url, key, "1", path="/mcp"),
    ]
    return {s.name: s for s in specs}


def _server_env(tree: Path) -> dict[str, str]:
    """The server's environment: ``tree/src`` first on the path, so a checkout other than the
    installed (editable) one can be benched with ``--hivegate-tree``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if tree != ROOT:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree / "src"), env.get("PYTHONPATH")) if p)
    return env


class Server:
    """A server subprocess pinned to one core, with its URL read from its ready line."""

    def __init__(self, spec: ServerSpec, pin: bool, tree: Path) -> None:
        self.spec = spec
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server
            mode="w+", prefix=f"bench-{spec.name}-", suffix=".log", delete=False
        )
        argv = (["taskset", "-c", SERVER_CORE] if pin else []) + spec.argv
        self.proc = subprocess.Popen(
            argv,
            cwd=tree,
            stdout=subprocess.PIPE,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
            text=True,
            env=_server_env(tree) | spec.env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.base_url = self._wait_ready()
        self.url = self.base_url + spec.path
        try:
            self.auth = spec.auth(self.base_url) if spec.auth is not None else None
        except BenchError:
            self.stop()
            raise

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
            self.log.write(line)
        self._lines.put(None)

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise BenchError(f"{self.spec.name} exited before it was ready:\n{self.log_tail()}")
            if line.startswith(self.spec.ready_prefix):
                return line[len(self.spec.ready_prefix) :].strip()
        tail = self.log_tail()
        self.stop()
        raise BenchError(f"{self.spec.name} not ready after {READY_TIMEOUT_S:.0f} s:\n{tail}")

    def url_for(self, workload: Workload) -> str:
        """Where the workload's requests go: the agent's A2A binding for A2A workloads, else the MCP endpoint."""
        return self.base_url + A2A_PATH if workload.a2a else self.url

    def rss_kib(self) -> int:
        """The server's resident memory (VmRSS), KiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime

    def log_tail(self, lines: int = 40) -> str:
        self.log.flush()
        return "".join(Path(self.log.name).read_text().splitlines(keepends=True)[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        os.unlink(self.log.name)


# --- requests --------------------------------------------------------------------------------


def request_headers(workload: Workload, session_id: str | None, auth: str | None = None) -> dict[str, str]:
    """The workload's headers; ``auth`` (an Authorization value) is added for httpx only: wrk gets it
    from ``MCP_BENCH_HEADER`` (:func:`run_wrk`)."""
    if workload.a2a:  # bench/wrk/a2a.lua sends these two itself
        headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
        return headers | ({"Authorization": auth} if auth is not None else {})
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    if workload.legacy:
        headers["MCP-Protocol-Version"] = LEGACY
        if session_id:
            headers["Mcp-Session-Id"] = session_id
    else:
        headers["MCP-Protocol-Version"] = MODERN
        headers["Mcp-Method"] = workload.method
        if workload.mcp_name is not None:
            headers["Mcp-Name"] = workload.mcp_name
    return headers


def request_params(workload: Workload) -> dict[str, Any]:
    return workload.params if workload.legacy or workload.a2a else {**workload.params, "_meta": META}


def body_tail(workload: Workload) -> str:
    """The request object after its id (wrk prepends ``{"jsonrpc":"2.0","id":N``)."""
    rest = json.dumps({"method": workload.method, "params": request_params(workload)}, separators=(",", ":"))
    return "," + rest[1:]


def decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or single-event SSE response."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(d) for d in data if d]
        if len(messages) != 1:
            raise BenchError(f"expected one SSE message, got {len(messages)}: {response.text[:300]!r}")
        return messages[0]
    return response.json()


def open_session(client: httpx.Client, url: str, auth: str | None = None) -> str:
    """Initialize a legacy session; returns its Mcp-Session-Id."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    }
    response = client.post(url, json=init, headers=headers)
    session_id = response.headers.get("mcp-session-id")
    if response.status_code != 200 or not session_id:
        raise BenchError(f"initialize failed: {response.status_code} {response.text[:300]!r}")
    version = decode(response).get("result", {}).get("protocolVersion")
    if version != LEGACY:
        raise BenchError(f"initialize negotiated {version!r}, expected {LEGACY}")
    headers |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY}
    note = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    if note.status_code != 202:
        raise BenchError(f"notifications/initialized answered {note.status_code} {note.text[:300]!r}")
    return session_id


def verify(client: httpx.Client, url: str, workload: Workload, session_id: str | None, auth: str | None) -> None:
    """Send a sample of the workload's requests; every one must be 200 with the expected result."""
    headers = request_headers(workload, session_id, auth)
    for i in range(1, SAMPLE_SIZE + 1):
        body = {"jsonrpc": "2.0", "id": i, "method": workload.method, "params": request_params(workload)}
        # a2a.lua's per-request number, mcp.lua's per-request key (unique per run here too)
        content = json.dumps(body).replace("@N@", f"sample-{os.getpid()}-{time.time_ns()}-{i}")
        response = client.post(url, content=content, headers=headers)
        where = f"{workload.name} sample {i} at {url}"
        if response.status_code != 200:
            raise BenchError(f"{where}: HTTP {response.status_code} {response.text[:300]!r}")
        message = decode(response)
        if message.get("id") != i or "result" not in message:
            raise BenchError(f"{where}: not a result for id {i}: {json.dumps(message)[:300]}")
        if problem := workload.check(message["result"]):
            raise BenchError(f"{where}: {problem}: {json.dumps(message)[:300]}")
        for expect in (workload.expect, *workload.expect_more):
            if expect not in response.text:
                raise BenchError(f"{where}: body lacks {expect!r}, wrk's check would fail")


# --- wrk -------------------------------------------------------------------------------------


def run_wrk(
    url: str,
    workload: Workload,
    session_id: str | None,
    seconds: int,
    connections: int,
    pin: bool,
    auth: str | None = None,
):
    """wrk's result and command; ``auth`` goes in ``MCP_BENCH_HEADER``, not on the command line."""
    env = {**os.environ, "MCP_BENCH_HEADER": f"Authorization: {auth}"} if auth else None
    argv = (["taskset", "-c", LOAD_CORE] if pin else []) + [
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "--latency",
        "-s",
        str(A2A_LUA if workload.a2a else LUA),
        url,
        "--",
        *(
            [body_tail(workload), workload.expect, *workload.expect_more]
            if workload.a2a
            else [
                workload.expect,
                body_tail(workload),
                *(f"{k}: {v}" for k, v in request_headers(workload, session_id).items()),
            ]
        ),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_JSON ")]
    if done.returncode != 0 or not lines:
        raise BenchError(f"wrk failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    result = json.loads(lines[-1][len("BENCH_JSON ") :])
    result["wrk_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3)
    if auth:  # the recorded command shows the credential's kind and first characters only
        argv = ["env", f"MCP_BENCH_HEADER=Authorization: {auth[:19]}…", *argv]
    return result, argv


def core_jiffies(core: str) -> tuple[int, int, int]:
    """(busy, total, steal) jiffies of one core, from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in line.split()[1:9])
            total = user + nice + system + idle + iowait + irq + softirq + steal
            return total - idle - iowait, total, steal
    raise BenchError(f"no cpu{core} line in /proc/stat")


def foreign_load(server: Server, seconds: float = 1.0) -> float:
    """CPU used by processes other than the (idle) server over both cores, in cores."""
    cores = (SERVER_CORE, LOAD_CORE)
    before = [core_jiffies(c) for c in cores]
    cpu0 = server.cpu_seconds()
    time.sleep(seconds)
    after = [core_jiffies(c) for c in cores]
    busy = sum(a[0] - b[0] for a, b in zip(after, before, strict=True)) / CLK_TCK
    return max(0.0, busy - (server.cpu_seconds() - cpu0)) / seconds


def wait_quiet(server: Server, args: argparse.Namespace) -> dict[str, float]:
    """Wait (bounded by --quiet-wait) until other processes use less than QUIET_CORES of CPU."""
    waited, deadline = 0.0, time.monotonic() + args.quiet_wait
    while (load := foreign_load(server)) > QUIET_CORES and time.monotonic() < deadline:
        time.sleep(2)
        waited = args.quiet_wait - (deadline - time.monotonic())
    return {"foreign_cores_before": round(load, 3), "waited_for_quiet_s": round(waited, 1)}


def timed_run(
    server: Server, workload: Workload, session_id: str | None, args: argparse.Namespace, profile: bool
) -> dict[str, Any]:
    quiet = wait_quiet(server, args) if args.pin else {}
    profiler = start_profiler(server, workload, args) if profile else None
    rss0 = server.rss_kib()
    cpu0, wall0, core0 = server.cpu_seconds(), time.monotonic(), core_jiffies(SERVER_CORE)
    url = server.url_for(workload)
    result, argv = run_wrk(url, workload, session_id, args.duration, args.connections, args.pin, server.auth)
    cpu, wall, core1 = server.cpu_seconds() - cpu0, time.monotonic() - wall0, core_jiffies(SERVER_CORE)
    rss1 = server.rss_kib()
    if profiler is not None:
        finish_profiler(profiler)
    errors = sum(result["errors"].values())
    if result["bad"] or errors or not result["requests"]:
        raise BenchError(
            f"{server.spec.name} {workload.name}: {result['bad']} bad responses, {errors} socket/status errors "
            f"out of {result['requests']} (first bad: {result['bad_sample']!r})"
        )
    core_busy = (core1[0] - core0[0]) / max(1, core1[1] - core0[1])
    result |= {
        "server": server.spec.name,
        "workload": workload.name,
        "label": workload.label,
        "connections": args.connections,
        "server_cpu_s": round(cpu, 3),
        "server_cpu_us_per_request": round(cpu / result["requests"] * 1e6, 1),
        # share of the server core the server used; the rest of what the core did was others' work
        "server_core_busy": round(cpu / wall, 3),
        "server_core_foreign": round(max(0.0, core_busy - cpu / wall), 3),
        "server_core_steal": round((core1[2] - core0[2]) / max(1, core1[1] - core0[1]), 3),
        "wrk_core_busy": round(result["wrk_cpu_s"] / wall, 3),
        # the server's resident memory before and after the timed run: growth with every request shows here
        "server_rss_mib": {"before": round(rss0 / 1024, 1), "after": round(rss1 / 1024, 1)},
        **quiet,
        "loadavg_1m": round(os.getloadavg()[0], 2),  # the machine's, at the end of the run
        "profiled": profiler is not None,
        "wrk_command": shlex.join(argv),
    }
    return result


def bench_workload(server: Server, workload: Workload, args: argparse.Namespace, profile: bool) -> dict[str, Any]:
    """Verify a sample, warm up, then time the workload; retry a run other processes disturbed."""
    with httpx.Client(timeout=10) as client:
        session_id = open_session(client, server.url, server.auth) if workload.legacy else None
        verify(client, server.url_for(workload), workload, session_id, server.auth)
    run_wrk(server.url_for(workload), workload, session_id, WARMUP_S, args.connections, args.pin, server.auth)
    profile = profile and server.spec.name in args.profile_servers.split(",")
    attempts: list[dict[str, Any]] = []
    for attempt in range(1 + args.retries):
        row = timed_run(server, workload, session_id, args, profile and attempt == 0)
        attempts.append(row)
        if row["server_core_foreign"] + row["server_core_steal"] <= DISTURBED or not args.pin:
            break
        print(
            f"#     disturbed: {row['server_core_foreign']:.0%} of the server core went to other processes, "
            f"{row['server_core_steal']:.0%} stolen; {'retrying' if attempt < args.retries else 'keeping it'}",
            file=sys.stderr,
        )
    best = min(attempts, key=lambda r: r["server_core_foreign"] + r["server_core_steal"])
    best["attempts"] = len(attempts)
    best["disturbed"] = args.pin and best["server_core_foreign"] + best["server_core_steal"] > DISTURBED
    if profile and not best["profiled"]:
        best["profile_from_attempt"] = 1
    return best


# --- profiling -------------------------------------------------------------------------------


def start_profiler(server: Server, workload: Workload, args: argparse.Namespace) -> list[subprocess.Popen[bytes]]:
    """py-spy on the server for the timed run, from the load core.

    py-spy pauses the server for each sample (200 Hz): ``--nonblocking`` broke about half the
    stacks of this asyncio server, so the small pause is the price of whole stacks.

    Writes ``profile-{server}-{workload}.svg`` (flame graph) and ``.stacks.txt`` (collapsed stacks,
    summarized by ``bench/profile_top.py``) under --profile-dir.
    """
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out = Path(args.profile_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds = max(1, args.duration - 1)
    procs = []
    stem = out / f"profile-{server.spec.name}-{workload.name}"
    for fmt, path in (("flamegraph", stem.with_suffix(".svg")), ("raw", stem.with_suffix(".stacks.txt"))):
        argv = (["taskset", "-c", LOAD_CORE] if args.pin else []) + [
            py_spy,
            "record",
            "--pid",
            str(server.proc.pid),
            "--duration",
            str(seconds),
            "--rate",
            "200",
            "--format",
            fmt,
            "--output",
            str(path),
        ]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    return procs


def finish_profiler(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        _, stderr = proc.communicate(timeout=60)
        if proc.returncode != 0:
            raise BenchError(f"py-spy failed ({proc.returncode}): {stderr.decode(errors='replace')}")


# --- report ----------------------------------------------------------------------------------


def hivegate_revision(args: argparse.Namespace) -> dict[str, Any]:
    """Which hivegate was benched: the tree, its commit (or --label) and whether src/ was dirty."""
    tree: Path = args.hivegate_tree
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True)
    in_git = commit.returncode == 0 and tree.resolve() == Path(
        subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--show-toplevel"], capture_output=True, text=True
        ).stdout.strip()
        or "/nonexistent"
    )
    return {
        "tree": str(tree),
        "commit": commit.stdout.strip() if in_git else None,
        "src_dirty": _src_dirty(tree) if in_git else None,
        "label": args.label,
    }


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )

    def version(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "unknown"

    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {p: pkg_version(p) for p in ("mcp", "uvicorn", "uvloop", "httptools", "hivegate")},
        "wrk": version(["wrk", "-v"]),
    }


def _src_dirty(tree: Path) -> bool | None:
    """Whether src/ differs from the commit (others edit it concurrently): the numbers are then not its."""
    try:
        out = subprocess.run(
            ["git", "-C", str(tree), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        )
    except OSError:
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def combine_rounds(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per server and workload: the medians over the rounds (each round's row kept)."""
    if len(rounds) == 1:
        return rounds[0]
    combined = []
    for first in rounds[0]:
        key = (first["server"], first["workload"])
        runs = [row for rows in rounds for row in rows if (row["server"], row["workload"]) == key]
        row = dict(sorted(runs, key=lambda r: r["rps"])[len(runs) // 2])  # the median-throughput round
        row["rps"] = statistics.median(r["rps"] for r in runs)
        row["latency_ms"] = {
            **row["latency_ms"],
            **{p: statistics.median(r["latency_ms"][p] for r in runs) for p in ("p50", "p90", "p99")},
        }
        row["server_cpu_us_per_request"] = statistics.median(r["server_cpu_us_per_request"] for r in runs)
        row["disturbed"] = any(r["disturbed"] for r in runs)
        row["rounds"] = [{"rps": r["rps"], "p50": r["latency_ms"]["p50"], "p99": r["latency_ms"]["p99"]} for r in runs]
        combined.append(row)
    return combined


def ratios(rows: list[dict[str, Any]], rounds: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """hivegate/SDK req/s per workload: the median of the per-round ratios (each round's pair ran
    back to back), with their range; p99/p50 per row; and whether the issue's targets are met."""
    out: dict[str, Any] = {}
    for server in dict.fromkeys(r["server"] for r in rows if r["server"] != "sdk"):  # ratios to JSON-mode SDK
        for name in ("tools_list", "tools_call", "legacy_tools_call"):
            per_round = []
            for round_rows in rounds:
                by = {(r["server"], r["workload"]): r for r in round_rows}
                hg, sdk = by.get((server, name)), by.get(("sdk", name))
                if hg and sdk:
                    per_round.append(hg["rps"] / sdk["rps"])
            if per_round:
                out[f"{name}_rps_{server}_over_sdk"] = round(statistics.median(per_round), 2)
                out[f"{name}_rps_{server}_over_sdk_rounds"] = [round(r, 2) for r in per_round]
    for server in dict.fromkeys(r["server"] for r in rows if r["server"] != "a2a-sdk"):  # A2A: to the a2a-sdk
        per_round = []
        for round_rows in rounds:
            by = {(r["server"], r["workload"]): r for r in round_rows}
            hg, bare = by.get((server, "a2a_send")), by.get(("a2a-sdk", "a2a_send"))
            if hg and bare:
                per_round.append(hg["rps"] / bare["rps"])
        if per_round:
            out[f"a2a_send_rps_{server}_over_a2a-sdk"] = round(statistics.median(per_round), 2)
            out[f"a2a_send_rps_{server}_over_a2a-sdk_rounds"] = [round(r, 2) for r in per_round]
    for r in rows:
        out[f"{r['server']}_{r['workload']}_p99_over_p50"] = round(r["latency_ms"]["p99"] / r["latency_ms"]["p50"], 2)
    out |= user_ratios(rounds)
    out |= contract_ratios(rounds)
    out["targets_met"] = targets_met(out)
    if gate := gate_ratios(rounds):
        out["over_gate_none"] = gate
    return out


# (summary key, target, bound, whether the value must be at least the bound)
TARGETS = (
    ("tools_call_rps_hivegate_over_sdk", "modern tools/call >= 4x SDK", TARGET_MODERN_CALL_RATIO, True),
    ("hivegate_tools_call_p99_over_p50", "hivegate modern tools/call p99 <= 3x p50", TARGET_P99_OVER_P50, False),
    ("legacy_tools_call_rps_hivegate_over_sdk", "legacy tools/call >= 2x SDK", TARGET_LEGACY_CALL_RATIO, True),
    # issue 7: the modern target holds behind the credential gate, with an oag_ key
    (
        "tools_call_rps_gate-oag_over_sdk",
        "gate-oag (oag_ key, credentials required) modern tools/call >= 4x SDK",
        TARGET_MODERN_CALL_RATIO,
        True,
    ),
    ("gate-oag_tools_call_p99_over_p50", "gate-oag modern tools/call p99 <= 3x p50", TARGET_P99_OVER_P50, False),
    # issue 9: A2A SendMessage (blocking) with tasks persisted, behind the gate with an oag_ key
    (
        "a2a_send_rps_gate-oag_over_a2a-sdk",
        "gate-oag (oag_ key, tasks in SQLite) A2A SendMessage >= 5x the bare a2a-sdk server",
        TARGET_A2A_SEND_RATIO,
        True,
    ),
    ("gate-oag_a2a_send_p99_over_p50", "gate-oag A2A SendMessage p99 <= 3x p50", TARGET_P99_OVER_P50, False),
    # issue 8: the user-level endpoint /mcp on the lean paths, with the same oag_ key
    (
        "tools_call_rps_gate-user_over_gate-oag",
        "/mcp modern tools/call >= 0.9x the agent endpoint (same oag_ key)",
        TARGET_USER_OVER_AGENT,
        True,
    ),
    (
        "legacy_tools_call_rps_gate-user_over_gate-oag",
        "/mcp legacy tools/call >= 0.9x the agent endpoint (same oag_ key)",
        TARGET_USER_OVER_AGENT,
        True,
    ),
    # issue 10: an idempotency key, and the rate limit on, each cost at most 15% of the plain call's req/s
    (
        "gate-oag_tools_call_keyed_rps_over_tools_call",
        "gate-oag tools/call with a fresh idempotency_key >= 0.85x the plain call",
        TARGET_CONTRACT_RATIO,
        True,
    ),
    (
        "tools_call_rps_gate-oag-limited_over_gate-oag",
        "gate-oag-limited (rate limit on) tools/call >= 0.85x gate-oag",
        TARGET_CONTRACT_RATIO,
        True,
    ),
)


def contract_ratios(rounds: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Issue 10: gate-oag's keyed tools/call over its plain one, and gate-oag-limited's tools/call over
    gate-oag's, each the median of the per-round ratios (the pair ran in the same round), with each round's."""
    pairs = {
        "gate-oag_tools_call_keyed_rps_over_tools_call": (("gate-oag", "tools_call_keyed"), ("gate-oag", "tools_call")),
        "tools_call_rps_gate-oag-limited_over_gate-oag": (
            ("gate-oag-limited", "tools_call"),
            ("gate-oag", "tools_call"),
        ),
    }
    out: dict[str, Any] = {}
    for key, (top, bottom) in pairs.items():
        per_round = []
        for round_rows in rounds:
            by = {(r["server"], r["workload"]): r for r in round_rows}
            if top in by and bottom in by:
                per_round.append(by[top]["rps"] / by[bottom]["rps"])
        if per_round:
            out[key] = round(statistics.median(per_round), 2)
            out[f"{key}_rounds"] = [round(r, 2) for r in per_round]
    return out


def user_ratios(rounds: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """gate-user's req/s over gate-oag's per workload (same server set-up and key, ``/mcp`` against
    ``/echo/mcp``): the median of the per-round ratios, with each round's."""
    out: dict[str, Any] = {}
    for name in USER_WORKLOADS:
        per_round = []
        for round_rows in rounds:
            by = {(r["server"], r["workload"]): r for r in round_rows}
            user, agent = by.get(("gate-user", name)), by.get(("gate-oag", name))
            if user and agent:
                per_round.append(user["rps"] / agent["rps"])
        if per_round:
            out[f"{name}_rps_gate-user_over_gate-oag"] = round(statistics.median(per_round), 2)
            out[f"{name}_rps_gate-user_over_gate-oag_rounds"] = [round(r, 2) for r in per_round]
    return out


def targets_met(summary: dict[str, Any]) -> dict[str, bool]:
    """Each target whose value the run measured: met or not."""
    return {
        name: (summary[key] >= bound) if at_least else (summary[key] <= bound)
        for key, name, bound, at_least in TARGETS
        if key in summary
    }


def gate_ratios(rounds: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Every other server's req/s, p50 and p99 over gate-none's in the same round, per workload:
    the median of the per-round ratios and each round's ratio (the pair ran in the same round)."""
    out: dict[str, Any] = {}
    for name in WORKLOADS:
        per_server: dict[str, dict[str, list[float]]] = {}
        for round_rows in rounds:
            by = {(r["server"], r["workload"]): r for r in round_rows}
            base = by.get((GATE_BASELINE, name))
            if base is None:
                continue
            for row in round_rows:
                if row["workload"] != name or row["server"] in (GATE_BASELINE, "sdk", "sdk-sse", "a2a-sdk"):
                    continue
                ratios_of = per_server.setdefault(row["server"], {"rps": [], "p50": [], "p99": []})
                ratios_of["rps"].append(row["rps"] / base["rps"])
                for p in ("p50", "p99"):
                    ratios_of[p].append(row["latency_ms"][p] / base["latency_ms"][p])
        if per_server:
            out[name] = {
                server: {
                    **{k: round(statistics.median(v), 3) for k, v in ratios_of.items()},
                    **{f"{k}_rounds": [round(x, 3) for x in v] for k, v in ratios_of.items()},
                }
                for server, ratios_of in per_server.items()
            }
    return out


def _spread(row: dict[str, Any]) -> str:
    if "rounds" not in row:
        return ""
    rps = [r["rps"] for r in row["rounds"]]
    return f" ({min(rps):,.0f}–{max(rps):,.0f})"


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    head = ("server", "workload", "conns", "req/s", "p50 ms", "p99 ms", "p99/p50", "CPU µs/req", "core busy", "others")
    table = [head] + [
        (
            r["server"],
            r["label"],
            str(r["connections"]),
            f"{r['rps']:,.0f}" + _spread(r),
            f"{r['latency_ms']['p50']:.2f}",
            f"{r['latency_ms']['p99']:.2f}",
            f"{r['latency_ms']['p99'] / r['latency_ms']['p50']:.1f}",
            f"{r['server_cpu_us_per_request']:.0f}",
            f"{r['server_core_busy']:.0%}",
            f"{r['server_core_foreign'] + r['server_core_steal']:.0%}" + ("!" if r["disturbed"] else ""),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for n, row in enumerate(table):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print()
    print("core busy: the server's CPU / wall time; others: the share of its core other processes took")
    if any("rounds" in r for r in rows):
        print("req/s, p50, p99: medians over the rounds; (min–max req/s)")
    if any(r["disturbed"] for r in rows):
        print("!: still disturbed after the retries; treat that row with care")
    for key, value in summary.items():
        if key.endswith(("_over_sdk", "_over_a2a-sdk", "_over_tools_call", "_over_gate-oag")):
            spread = summary.get(f"{key}_rounds", [])
            extra = f"  (rounds: {', '.join(f'{r:.2f}' for r in spread)})" if len(spread) > 1 else ""
            print(f"{key}: {value:.2f}x{extra}")
    for target, met in summary["targets_met"].items():
        print(f"target {target}: {'MET' if met else 'MISSED'}")
    for workload, servers in summary.get("over_gate_none", {}).items():
        print(f"\n{workload}, ratio to {GATE_BASELINE} (median of per-round ratios; rounds):")
        for server, r in servers.items():
            print(
                "  "
                + f"{server:<20}"
                + "  ".join(
                    f"{k} {r[k]:.2f}x ({', '.join(f'{x:.2f}' for x in r[f'{k}_rounds'])})"
                    for k in ("rps", "p50", "p99")
                )
            )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per timed run (default 10)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default 16)")
    parser.add_argument("--only", choices=sorted([*SERVERS, *GATE_SERVERS]), help="bench one server only")
    parser.add_argument("--workloads", help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--out", default=str(BENCH / "results" / "latest.json"), help="results JSON path")
    parser.add_argument("--profile", action="store_true", help="py-spy each timed run (first attempt)")
    parser.add_argument("--profile-servers", default="hivegate", help="servers --profile applies to (default hivegate)")
    parser.add_argument("--profile-dir", default=str(BENCH / "results"), help="where --profile writes")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of every workload on every server, interleaved; medians reported (default 3)",
    )
    parser.add_argument("--retries", type=int, default=2, help="re-runs of a disturbed timed run (default 2)")
    parser.add_argument(
        "--quiet-wait", type=float, default=60, help="max seconds to wait for other processes to go quiet"
    )
    parser.add_argument(
        "--hivegate-tree",
        type=Path,
        default=ROOT,
        help="a hivegate checkout to bench (its src/ goes first on PYTHONPATH; default: this repo)",
    )
    parser.add_argument(
        "--sdk-sse", action="store_true", help="also bench the SDK in its default SSE mode (server 'sdk-sse')"
    )
    parser.add_argument(
        "--gate", action="store_true", help="also bench the echo agent behind the credential gate (servers gate-*)"
    )
    parser.add_argument(
        "--servers",
        help="comma-separated servers to start, in this order (default: hivegate,sdk,a2a-sdk, "
        "plus sdk-sse with --sdk-sse and the gate-* servers with --gate)",
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="also run every selected hivegate server from this checkout (named NAME@baseline) in the "
        "same rounds, e.g. the commit before a change",
    )
    parser.add_argument("--label", help="a note stored with the results, e.g. 'before the fast path, <commit>'")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin with taskset")
    parser.add_argument("--enforce", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    if not (1 <= args.duration <= 600 and 1 <= args.connections <= 1024 and 1 <= args.rounds <= 10):
        parser.error("--duration must be 1..600 s, --connections 1..1024, --rounds 1..10")
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed (apt-get install wrk)")
    if args.pin and (shutil.which("taskset") is None or (os.cpu_count() or 1) < 2):
        print("warning: no taskset or fewer than 2 cores; running unpinned", file=sys.stderr)
        args.pin = False
    args.wanted = set(args.workloads.split(",")) if args.workloads else set(WORKLOADS)
    if unknown := args.wanted - set(WORKLOADS):
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    if args.servers:
        args.server_names = args.servers.split(",")
        if unknown := set(args.server_names) - {*SERVERS, *GATE_SERVERS}:
            parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    else:
        args.server_names = [
            "hivegate",
            "sdk",
            "a2a-sdk",
            *(["sdk-sse"] if args.sdk_sse else []),
            *(GATE_SERVERS if args.gate else ()),
        ]
    if args.only:
        args.server_names = [args.only]
    args.hivegate_tree = args.hivegate_tree.resolve()
    if not (args.hivegate_tree / "src" / "hivegate").is_dir():
        parser.error(f"no src/hivegate under {args.hivegate_tree}")
    if args.baseline_tree is not None:
        args.baseline_tree = args.baseline_tree.resolve()
        if not (args.baseline_tree / "src" / "hivegate").is_dir():
            parser.error(f"no src/hivegate under {args.baseline_tree}")
    return args


BASELINE_SUFFIX = "@baseline"


def server_plan(args: argparse.Namespace, tmp: Path) -> list[tuple[ServerSpec, Path]]:
    """Each server to start with the tree it runs from: the selected ones, then (``--baseline-tree``)
    every selected hivegate server again from the baseline tree, named ``NAME@baseline``."""
    plan: list[tuple[ServerSpec, Path]] = []
    trees = [(args.hivegate_tree, "")]
    if args.baseline_tree is not None:
        trees.append((args.baseline_tree, BASELINE_SUFFIX))
    for tree, suffix in trees:
        specs = dict(SERVERS)
        if any(name in GATE_SERVERS for name in args.server_names):
            specs |= gate_specs(Path(tempfile.mkdtemp(prefix="bench-gate-", dir=tmp)), tree)
        for name in args.server_names:
            if name.startswith(("sdk", "floor", "a2a-sdk")):  # not hivegate: run once, from this checkout
                if not suffix:
                    plan.append((specs[name], ROOT))
                continue
            plan.append((dataclasses.replace(specs[name], name=name + suffix), tree))
    return plan


def run_rounds(args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    """Start the selected servers (all pinned to the server core; only the one under load is
    busy), then per round and workload bench each server in turn (the order flips every round),
    so the hivegate and SDK rows of a pair run back to back under the same machine conditions."""
    servers: list[Server] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-"))
    try:
        for spec, tree in server_plan(args, tmp):
            servers.append(Server(spec, args.pin, tree))
            print(f"# {spec.name} at {servers[-1].url} (pid {servers[-1].proc.pid})", file=sys.stderr)
        rounds = []
        for n in range(args.rounds):
            rows = []
            for name in (w for w in WORKLOADS if w in args.wanted):
                # alternate who goes first, so neither server always runs on the other's heels
                for server in [s for s in servers if name in s.spec.workloads][:: 1 if n % 2 == 0 else -1]:
                    print(
                        f"# round {n + 1}/{args.rounds} {server.spec.name} {name}: verify, "
                        f"warm up {WARMUP_S} s, run {args.duration} s",
                        file=sys.stderr,
                    )
                    rows.append(bench_workload(server, WORKLOADS[name], args, profile=args.profile and n == 0))
                    if server.proc.poll() is not None:
                        raise BenchError(f"{server.spec.name} died:\n{server.log_tail()}")
            rounds.append(rows)
        return rounds
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    args = parse_args()
    started = datetime.datetime.now(datetime.UTC)
    revision = hivegate_revision(args)
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        rounds = run_rounds(args)
        rows = combine_rounds(rounds)
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 2

    summary = ratios(rows, rounds)
    report = {
        "started": started.isoformat(timespec="seconds"),
        "command": shlex.join(["python", *sys.argv]),
        "settings": {
            "duration_s": args.duration,
            "warmup_s": WARMUP_S,
            "connections": args.connections,
            "rounds": args.rounds,
            "wrk_threads": 1,
            "pinned": {"server_core": SERVER_CORE, "load_core": LOAD_CORE} if args.pin else None,
            "sample_checked_per_workload": SAMPLE_SIZE,
            "retries": args.retries,
            "quiet_threshold_cores": QUIET_CORES,
            "disturbed_threshold": DISTURBED,
        },
        "hivegate": revision,
        "baseline_tree": str(args.baseline_tree) if args.baseline_tree is not None else None,
        "machine": machine(),
        "servers": args.server_names,
        "loadavg_1_5_15": {"start": load_before, "end": [round(x, 2) for x in os.getloadavg()]},
        "results": rows,
        "summary": summary,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print_table(rows, summary)
    print(f"\nresults: {out}")
    if args.enforce and not all(summary["targets_met"].values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
