"""Issue 11: hivegate in front of the reference MCP server, ``@modelcontextprotocol/server-everything``, over stdio.

``hivegate serve`` runs ``node .../server-everything/dist/index.js stdio`` as the child of the agent
``everything`` (``page_size = 2``, so every list is paged). The official MCP client, in both eras
(2026-07-28 and the 2025-11-25 handshake), sees through the gateway what the same client sees when it
runs server-everything itself over stdio: the same tools, resources, templates and prompts (each item
once, over hivegate's own pages), the same tool results, reads, prompts and completions, progress on its
own token, and the log message the upstream sends during its call. A cancelled call is cancelled
upstream too (``notifications/cancelled``, seen on the stdin of the agent ``teed``, the same server behind
a logger), and the gateway and its one child go on serving. 200 calls are served by one child, and none is
left after the gateway stops (the process table, read from /proc).

The direct client declares what the gateway's upstream client declares (sampling, elicitation, roots):
server-everything lists some tools only to a client that has those capabilities.

server-everything (pinned) and Node 22 are installed by ``scripts/install-tools.sh`` (``make tools``) into
``.tools/``; without them the tests fail saying how to install them. No network is used.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import sys
import time
import warnings
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client as McpClient
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.e2e.registry_cli import create_user_with_key, run_cli
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

TIMEOUT = 60
MODERN = "2026-07-28"
MODES = [MODERN, "legacy"]
PAGE_SIZE = 2
NODE = ROOT / ".tools" / "node22" / "node_modules" / "node" / "bin" / "node"
EVERYTHING = ROOT / ".tools" / "server-everything" / "node_modules" / "@modelcontextprotocol" / "server-everything"
EVERYTHING_CLI = EVERYTHING / "dist" / "index.js"
GONE_SECONDS = 15.0
"""Bound on the wait for the gateway's child to be gone once the gateway has exited."""

CONDITIONAL_TOOLS = {"get-roots-list", "trigger-elicitation-request", "trigger-sampling-request"}
"""Tools server-everything lists only to a client with roots, elicitation and sampling."""


def _require_everything() -> None:
    if not (EVERYTHING_CLI.is_file() and NODE.is_file()):
        pytest.fail(
            f"@modelcontextprotocol/server-everything or Node 22 is missing ({EVERYTHING_CLI}, {NODE}): "
            "run `make tools` (or `bash scripts/install-tools.sh`)",
            pytrace=False,
        )


TEE_NAME = "stdin-tee.py"
TEE = """
import subprocess, sys
log = open(sys.argv[1], "ab", buffering=0)
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE)
for line in sys.stdin.buffer:
    log.write(line)
    child.stdin.write(line)
    child.stdin.flush()
child.terminate()  # server-everything does not exit when its stdin ends
child.wait()
"""
"""The agent ``teed`` runs server-everything behind this: each line the gateway writes to the child's stdin
is also written to a file, so a test can see what reached the upstream (its stdout is the child's own)."""


@dataclass
class World:
    gateway: GatewayProcess
    alice: str
    stdin_log: Path  # what the gateway wrote to the ``teed`` agent's child


def _start(folder: Path) -> tuple[str, str, Path]:
    """The agents file applied to a fresh registry in ``folder``: (database URL, alice's key, the ``teed``
    agent's stdin log)."""
    _require_everything()
    url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    tee = folder / TEE_NAME
    tee.write_text(TEE, encoding="utf-8")
    stdin_log = folder / "stdin.jsonl"
    command = [str(NODE), str(EVERYTHING_CLI), "stdio"]
    config = folder / "agents.toml"
    config.write_text(
        f"""
[[agents]]
id = "everything"
name = "Everything (stdio)"
owner = "alice"
page_size = {PAGE_SIZE}
backend = {{ type = "mcp", command = {json.dumps(command)} }}

[[agents]]
id = "teed"
name = "Everything (stdio), its stdin logged"
owner = "alice"
backend = {{ type = "mcp", command = {json.dumps([sys.executable, str(tee), str(stdin_log), *command])} }}
""",
        encoding="utf-8",
    )
    alice = create_user_with_key(url, "alice")
    run_cli(url, "agents", "apply", str(config))
    return url, alice, stdin_log


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url, alice, stdin_log = _start(tmp_path_factory.mktemp("mcp-everything"))
    with run_gateway(None, database_url=url) as gateway:
        yield World(gateway, alice, stdin_log)


# --- clients -------------------------------------------------------------------------------------------------


async def _decline(context: ClientRequestContext, params: Any) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="this test client answers no questions")


async def _no_roots(context: ClientRequestContext) -> types.ErrorData:
    return types.ErrorData(code=types.INVALID_REQUEST, message="this test client has no roots")


@asynccontextmanager
async def direct(logs: list[types.LoggingMessageNotificationParams] | None = None) -> AsyncGenerator[McpClient]:
    """The official client running server-everything itself over stdio, with the capabilities the
    gateway's upstream client declares (server-everything lists some tools only to such a client)."""

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if logs is not None:
            logs.append(params)

    parameters = StdioServerParameters(command=str(NODE), args=[str(EVERYTHING_CLI), "stdio"])
    async with McpClient(
        parameters,
        mode="legacy",
        cache=None,
        sampling_callback=_decline,
        elicitation_callback=_decline,
        list_roots_callback=_no_roots,
        logging_callback=on_log,
    ) as client:
        yield client


@asynccontextmanager
async def client_of(
    world: World,
    mode: str,
    logs: list[types.LoggingMessageNotificationParams] | None = None,
    agent: str = "everything",
) -> AsyncGenerator[McpClient]:
    """The official client on the agent's endpoint, in ``mode`` (a 2026-07-28 client opts in to debug logs)."""

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if logs is not None:
            logs.append(params)

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {world.alice}"}, timeout=TIMEOUT) as http,
        McpClient(
            streamable_http_client(f"{world.gateway.url}/{agent}/mcp", http_client=http),
            mode=mode,
            cache=None,
            logging_callback=on_log,
            log_level="debug" if mode == MODERN else None,
        ) as client,
    ):
        yield client


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


def dump(item: Any) -> dict[str, Any]:
    """An item as JSON, without the gateway's or upstream's ``_meta`` stamps."""
    data: dict[str, Any] = item.model_dump(mode="json", by_alias=True, exclude_none=True)
    data.pop("_meta", None)
    return data


_TIME = re.compile(r"created at .*$")


def _untimed(value: str) -> str:
    """server-everything's dynamic resources carry the time they were made (to the second): cut it off."""
    return _TIME.sub("created at <time>", value)


def _read_contents(result: types.ReadResourceResult) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    for content in result.contents:
        data = dump(content)
        if isinstance(content, types.BlobResourceContents):
            data["blob"] = _untimed(base64.b64decode(content.blob).decode())
        else:
            data["text"] = _untimed(data["text"])
        contents.append(data)
    return contents


async def _pages(client: McpClient, method: str) -> list[list[Any]]:
    """Every page of a list (``tools``, ``resources``, ``resource_templates`` or ``prompts``), by cursor."""
    session = client.session
    calls = {
        "tools": session.list_tools,
        "resources": session.list_resources,
        "resource_templates": session.list_resource_templates,
        "prompts": session.list_prompts,
    }
    pages: list[list[Any]] = []
    cursor: str | None = None
    for _ in range(200):
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await calls[method](params=params)
        pages.append(list(getattr(page, method)))
        cursor = page.next_cursor
        if not cursor:
            return pages
    raise AssertionError(f"the {method} pages never ended")


def _by_key(items: list[Any], key: str) -> dict[str, dict[str, Any]]:
    dumped = [dump(item) for item in items]
    keyed = {d[key]: d for d in dumped}
    assert len(keyed) == len(dumped), f"an item listed twice: {sorted(d[key] for d in dumped)}"
    return keyed


# --- the process table ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    started: int  # clock ticks after boot (/proc/PID/stat field 22): tells a reused pid apart


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of ``pid`` from /proc, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _everything_processes(root: int) -> list[Proc]:
    """The live descendants of ``root`` that run server-everything for the agent ``everything`` (zombies are
    not live; the ``teed`` agent's, started by its stdin logger, are left out)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[0] != "Z":
                parents[int(entry.name)] = stat[1]

    def descends(pid: int) -> bool:
        for _ in range(64):
            pid = parents.get(pid, 0)
            if pid == root:
                return True
            if pid <= 1:
                return False
        return False

    found: list[Proc] = []
    for pid in sorted(parents):
        if not descends(pid) or str(EVERYTHING_CLI).encode() not in _argv(pid):
            continue
        if any(arg.endswith(TEE_NAME.encode()) for arg in _argv(parents[pid])):
            continue
        stat = _stat(pid)
        if stat is not None:
            found.append(Proc(pid, stat[2]))
    return found


def _alive(proc: Proc) -> bool:
    stat = _stat(proc.pid)
    return stat is not None and stat[0] != "Z" and stat[2] == proc.started


def _the_one_child(world: World) -> Proc:
    pid = world.gateway.process.pid
    found = _everything_processes(pid)
    assert len(found) == 1, f"server-everything processes under the gateway: {found}"
    stat = _stat(found[0].pid)
    assert stat is not None
    assert stat[1] == pid, "server-everything is not the gateway's own child"
    return found[0]


# --- what the upstream answers directly ---------------------------------------------------------------------

TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "hello through hivegate"}),
    ("get-sum", {"a": 19, "b": 23}),
    ("get-sum", {"a": 1.5, "b": -4}),
    ("get-tiny-image", {}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-annotated-message", {"messageType": "debug", "includeImage": False}),
    ("get-structured-content", {"location": "New York"}),
    ("get-resource-links", {"count": 3}),
    ("get-sum", {"a": "one", "b": 2}),  # arguments its schema refuses: a tool error result
]
READS = [
    "demo://resource/static/document/features.md",  # a static text document
    "demo://resource/dynamic/text/7",  # a text made on the fly
    "demo://resource/dynamic/blob/3",  # a blob (base64) made on the fly
]
MISSING = "demo://resource/dynamic/text/0"
"""A resource the dynamic template refuses (its id must be a positive integer): the upstream's own error."""
PROMPTS: list[tuple[str, dict[str, str] | None]] = [
    ("simple-prompt", None),
    ("args-prompt", {"city": "Paris", "state": "Texas"}),
    ("args-prompt", {"city": "Lyon"}),
    ("completable-prompt", {"department": "Sales", "name": "Eve"}),
]
PROMPT_REF = types.PromptReference(type="ref/prompt", name="completable-prompt")
TEMPLATE_REF = types.ResourceTemplateReference(type="ref/resource", uri="demo://resource/dynamic/text/{resourceId}")
COMPLETIONS: list[
    tuple[types.PromptReference | types.ResourceTemplateReference, dict[str, str], dict[str, str] | None]
] = [
    (PROMPT_REF, {"name": "department", "value": "S"}, None),
    (PROMPT_REF, {"name": "name", "value": ""}, {"department": "Engineering"}),  # narrowed by another argument
    (TEMPLATE_REF, {"name": "resourceId", "value": "42"}, None),
    (TEMPLATE_REF, {"name": "resourceId", "value": "not a number"}, None),
]
LONG_RUNNING = {"duration": 0.4, "steps": 4}


@dataclass
class Upstream:
    """What the official client gets from server-everything run directly (one process for the module)."""

    lists: dict[str, list[Any]]
    calls: list[types.CallToolResult]
    reads: list[types.ReadResourceResult]
    missing: types.ErrorData
    prompts: list[types.GetPromptResult]
    completions: list[types.CompleteResult]
    progress: list[tuple[float, float | None]]
    long_running: types.CallToolResult
    logs_during_call: list[types.LoggingMessageNotificationParams]


async def _collect() -> Upstream:
    logs: list[types.LoggingMessageNotificationParams] = []
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with direct(logs) as client:
        with anyio.fail_after(TIMEOUT):
            lists = {
                method: [item for page in await _pages(client, method) for item in page]
                for method in ("tools", "resources", "resource_templates", "prompts")
            }
            calls = [await client.call_tool(name, arguments) for name, arguments in TOOL_CALLS]
            reads = [await client.read_resource(uri) for uri in READS]
            with pytest.raises(MCPError) as missing:
                await client.read_resource(MISSING)
            prompts = [await client.get_prompt(name, arguments) for name, arguments in PROMPTS]
            completions = [await client.complete(ref, arg, context) for ref, arg, context in COMPLETIONS]
            long_running = await client.call_tool(
                "trigger-long-running-operation", LONG_RUNNING, progress_callback=on_progress
            )
            with warnings.catch_warnings():  # logging is deprecated as of 2026-07-28 (SEP-2577), not gone
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level("debug")  # pyright: ignore[reportDeprecated]
            started = await client.call_tool("toggle-simulated-logging", {})
            logs_during_call = list(logs)
            await client.call_tool("toggle-simulated-logging", {})
    assert text(started).startswith("Started simulated"), text(started)
    return Upstream(
        lists, calls, reads, missing.value.error, prompts, completions, seen, long_running, logs_during_call
    )


@pytest.fixture(scope="module")
def upstream() -> Upstream:
    _require_everything()
    return anyio.run(_collect)


# --- the tests -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_lists_are_the_upstreams_own_over_hivegates_pages(
    world: World, upstream: Upstream, mode: str
) -> None:
    async with client_of(world, mode) as gateway:
        with anyio.fail_after(TIMEOUT):
            for method, key in (("tools", "name"), ("resource_templates", "uriTemplate"), ("prompts", "name")):
                want = upstream.lists[method]
                pages = await _pages(gateway, method)
                assert all(len(page) <= PAGE_SIZE for page in pages), (method, [len(p) for p in pages])
                if len(want) > PAGE_SIZE:
                    assert len(pages) > 1, method
                got = [item for page in pages for item in page]
                # the same items, each once, with the same names, titles, descriptions, schemas, annotations
                expected = _by_key(want, key)
                if mode == MODERN:  # tasks left the core spec in 2026-07-28: a tool has no `execution` there
                    for item in expected.values():
                        item.pop("execution", None)
                assert _by_key(got, key) == expected, method
            assert {tool.name for tool in upstream.lists["tools"]} >= {
                "echo",
                "get-sum",
                "trigger-long-running-operation",
                *CONDITIONAL_TOOLS,
            }

            want_resources = upstream.lists["resources"]
            pages = await _pages(gateway, "resources")
            assert all(len(page) <= PAGE_SIZE for page in pages), [len(p) for p in pages]
            assert len(want_resources) >= 5
            assert len(pages) >= (len(want_resources) + PAGE_SIZE - 1) // PAGE_SIZE
            got_resources = [item for page in pages for item in page]
            # the gateway's own hivegate:// documents, and every upstream resource once, none missing
            federated = [r for r in got_resources if not str(r.uri).startswith("hivegate://")]
            assert _by_key(federated, "uri") == _by_key(want_resources, "uri")


@pytest.mark.parametrize("mode", MODES)
async def test_tool_results_are_the_upstreams_own(world: World, upstream: Upstream, mode: str) -> None:
    async with client_of(world, mode) as gateway:
        with anyio.fail_after(TIMEOUT):
            await gateway.list_tools()
            for (name, arguments), want in zip(TOOL_CALLS, upstream.calls, strict=True):
                got = await gateway.call_tool(name, arguments)
                assert got.is_error == want.is_error, name
                assert [dump(c) for c in got.content] == [dump(c) for c in want.content], name
                assert got.structured_content == want.structured_content, name
    assert text(upstream.calls[0]) == "Echo: hello through hivegate"
    assert text(upstream.calls[1]) == "The sum of 19 and 23 is 42."
    assert upstream.calls[-1].is_error is True  # the refused arguments


@pytest.mark.parametrize("mode", MODES)
async def test_reads_prompts_and_completions_are_the_upstreams_own(world: World, upstream: Upstream, mode: str) -> None:
    async with client_of(world, mode) as gateway:
        with anyio.fail_after(TIMEOUT):
            for uri, want in zip(READS, upstream.reads, strict=True):
                got = await gateway.read_resource(uri, cache_mode="bypass")
                assert _read_contents(got) == _read_contents(want), uri
            with pytest.raises(MCPError) as missing:
                await gateway.read_resource(MISSING, cache_mode="bypass")
            assert missing.value.error.code == upstream.missing.code
            assert missing.value.error.message == upstream.missing.message

            for (name, arguments), want_prompt in zip(PROMPTS, upstream.prompts, strict=True):
                got_prompt = await gateway.get_prompt(name, arguments)
                assert [dump(m) for m in got_prompt.messages] == [dump(m) for m in want_prompt.messages], name
                assert got_prompt.description == want_prompt.description, name

            for (ref, argument, context), want_done in zip(COMPLETIONS, upstream.completions, strict=True):
                got_done = await gateway.complete(ref, argument, context)
                assert dump(got_done.completion) == dump(want_done.completion), (ref, argument)
    blob = upstream.reads[2].contents[0]
    assert isinstance(blob, types.BlobResourceContents)
    assert base64.b64decode(blob.blob).startswith(b"Resource 3: This is a base64 blob")
    content = upstream.prompts[1].messages[0].content
    assert isinstance(content, types.TextContent)
    assert content.text == "What's weather in Paris, Texas?"
    assert upstream.completions[0].completion.values == ["Sales", "Support"]
    assert upstream.completions[1].completion.values == ["Alice", "Bob", "Charlie"]


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_caller_on_its_own_token(world: World, upstream: Upstream, mode: str) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with client_of(world, mode) as gateway:
        with anyio.fail_after(TIMEOUT):
            await gateway.list_tools()
            got = await gateway.call_tool("trigger-long-running-operation", LONG_RUNNING, progress_callback=on_progress)
    assert upstream.progress == [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)]
    assert seen == upstream.progress
    assert [dump(c) for c in got.content] == [dump(c) for c in upstream.long_running.content]


@pytest.mark.parametrize("mode", MODES)
async def test_the_upstreams_log_message_during_a_call_reaches_its_caller(
    world: World, upstream: Upstream, mode: str
) -> None:
    """``toggle-simulated-logging`` sends one log message (a random level) before it answers, then one
    every 5 s until toggled off. Directly, the client has it when the call returns; so must the caller
    through the gateway (docs/backends.md: the upstream's log messages for a call reach that call's
    caller, filtered by the caller's level, here ``debug``: every level; a 2026-07-28 caller opts in)."""
    assert len(upstream.logs_during_call) >= 1, "server-everything sent no log message during the call"
    logs: list[types.LoggingMessageNotificationParams] = []
    async with client_of(world, mode, logs) as gateway:
        with anyio.fail_after(TIMEOUT):
            if mode != MODERN:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await gateway.set_logging_level("debug")  # pyright: ignore[reportDeprecated]
            await gateway.list_tools()
            toggled = await gateway.call_tool("toggle-simulated-logging", {})
            during = list(logs)  # what arrived before the call's result
            stopped = await gateway.call_tool("toggle-simulated-logging", {})  # the child's messages stop
    assert text(toggled).startswith("Started simulated"), text(toggled)
    assert text(stopped).startswith("Stopped simulated"), text(stopped)
    assert len(during) >= 1, "the upstream's log message sent during the call did not reach the caller"
    assert "message" in str(during[0].data), during[0]


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_leaves_the_gateway_and_its_child_serving(world: World, mode: str) -> None:
    async with client_of(world, mode) as gateway:
        with anyio.fail_after(TIMEOUT):
            await gateway.list_tools()
            child = _the_one_child(world)
            progressed = anyio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                progressed.set()

            finished: list[types.CallToolResult] = []

            async def long_call() -> None:
                finished.append(
                    await gateway.call_tool(
                        "trigger-long-running-operation", {"duration": 30, "steps": 60}, progress_callback=on_progress
                    )
                )

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_call)
                await progressed.wait()  # the upstream is running the operation
                tasks.cancel_scope.cancel()
            assert finished == []

            # the same client, and a new one, are served at once by the same child
            assert text(await gateway.call_tool("echo", {"message": "after"})) == "Echo: after"
            async with client_of(world, mode) as other:
                assert text(await other.call_tool("echo", {"message": "other"})) == "Echo: other"
                done = await other.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 2})
                assert text(done).startswith("Long running operation completed.")
            assert _the_one_child(world) == child
            assert _alive(child)
    assert "Traceback" not in world.gateway.output()


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_cancels_its_upstream_request(world: World, mode: str) -> None:
    """The caller cancels a long call: the gateway sends ``notifications/cancelled`` for that upstream
    request (seen on the ``teed`` child's stdin), and goes on serving."""
    async with client_of(world, mode, agent="teed") as gateway:
        with anyio.fail_after(TIMEOUT):
            await gateway.list_tools()
            progressed = anyio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                progressed.set()

            marker = f"cancel me ({mode})"

            async def long_call() -> None:
                await gateway.call_tool(
                    "trigger-long-running-operation",
                    {"duration": 30, "steps": 60},
                    progress_callback=on_progress,
                    meta={"marker": marker},
                )

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_call)
                await progressed.wait()
                tasks.cancel_scope.cancel()
            assert text(await gateway.call_tool("echo", {"message": "after"})) == "Echo: after"

            def cancelled_upstream() -> bool:
                sent = [json.loads(line) for line in world.stdin_log.read_text(encoding="utf-8").splitlines()]
                calls = [m for m in sent if (m.get("params") or {}).get("_meta", {}).get("marker") == marker]
                assert len(calls) == 1, calls
                return any(
                    m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == calls[0]["id"]
                    for m in sent
                )

            while True:  # a bounded poll (fail_after) of what the child was sent
                if cancelled_upstream():
                    break
                await anyio.sleep(0.05)


def test_one_child_serves_200_calls_and_none_is_left_after_the_gateway_stops(tmp_path: Path) -> None:
    url, alice, stdin_log = _start(tmp_path)
    with run_gateway(None, database_url=url) as gateway:
        world = World(gateway, alice, stdin_log)
        assert _everything_processes(gateway.process.pid) == []  # started by the first request, not before

        async def calls() -> Proc:
            async with client_of(world, MODERN) as modern, client_of(world, "legacy") as legacy:
                with anyio.fail_after(TIMEOUT):
                    await modern.list_tools()
                    await legacy.list_tools()
                    child = _the_one_child(world)

                    async def echo(client: McpClient, n: int) -> None:
                        assert text(await client.call_tool("echo", {"message": f"m{n}"})) == f"Echo: m{n}"

                    for round_ in range(10):  # 200 calls, 20 at a time, half in each era
                        async with anyio.create_task_group() as tasks:
                            for n in range(20):
                                tasks.start_soon(echo, modern if n % 2 else legacy, round_ * 20 + n)
                        assert _the_one_child(world) == child
                    return child

        child = anyio.run(calls)
        gateway.process.send_signal(signal.SIGTERM)
        gateway.process.wait(timeout=30)

    deadline = time.monotonic() + GONE_SECONDS
    while _alive(child) and time.monotonic() < deadline:  # a bounded poll of the process table
        time.sleep(0.05)
    assert not _alive(child), f"server-everything ({child.pid}) outlived the gateway"
