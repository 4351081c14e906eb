"""Issue 10 items 3 and 4 on a real server: uploads, attachments by ``file_id`` on every plane, rate limits.

One gateway on SQLite (the files' bytes in ``files/`` next to the database), users alice, bob and carol
with ``oag_`` keys (alice has two), alice's ``bak_`` key for ``inspect``. Agents: alice's ``inspect`` and
``inspect2`` (a callable that records each call in a marker file and replies with JSON describing its
attachments), ``echo``; bob's ``bobinspect``; alice's ``lim_mcp``, ``lim_rest``, ``lim_a2a``, ``lim_mix``
(echo with ``rate_limit_per_minute = 3``). Files: at most 64 KiB each, 300,000 bytes per user.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import httpx2
import pytest
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway_process import ROOT, GatewayProcess, run_gateway

INSPECT = '''
import hashlib
import json
import pathlib

MARKS = pathlib.Path(__file__).parent / "marks"


def reply(invocation):
    """Record the call; describe each attachment (the bytes' digest, not the bytes)."""
    (MARKS / f"called-{invocation.message}").write_text("", encoding="utf-8")
    return json.dumps([
        {
            "file_id": a.file_id,
            "name": a.name,
            "mime_type": a.mime_type,
            "size": a.size,
            "sha256": a.sha256,
            "content_sha256": hashlib.sha256(a.content).hexdigest() if a.content is not None else None,
            "content_size": len(a.content) if a.content is not None else None,
        }
        for a in invocation.attachments
    ])
'''

CONFIG = """
[[agents]]
id = "inspect"
name = "Inspect"
owner = "alice"
backend = { type = "python", callable = "inspect_agent:reply" }

[[agents]]
id = "inspect2"
name = "Inspect two"
owner = "alice"
backend = { type = "python", callable = "inspect_agent:reply" }

[[agents]]
id = "bobinspect"
name = "Bob's inspect"
owner = "bob"
backend = { type = "python", callable = "inspect_agent:reply" }
""" + "".join(
    f"""
[[agents]]
id = "{agent_id}"
name = "{agent_id}"
owner = "alice"
rate_limit_per_minute = 3
backend = {{ type = "python", callable = "echo_agent:reply" }}
"""
    for agent_id in ("lim_mcp", "lim_rest", "lim_a2a", "lim_rpc", "lim_mix")
)

MAX_FILE_BYTES = 65536
QUOTA_BYTES = 300_000
TIMEOUT = 30
V1 = {"A2A-Version": "1.0"}


@dataclass(frozen=True)
class Served:
    gateway: GatewayProcess
    folder: Path
    alice: str
    alice2: str
    bob: str
    carol: str
    alice_bak: str

    @property
    def files_url(self) -> str:
        return f"{self.gateway.url}/api/v1/files"

    @property
    def blobs(self) -> Path:
        return self.folder / "files"


def _cli(database_url: str, *args: str, stdin: str = "", path: str = "") -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT / "src"), path)), "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "hivegate", *args, "--database-url", database_url],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.stdout


def _key(database_url: str, user: str, *extra: str) -> str:
    return _cli(database_url, "keys", "create", "--user", user, *extra).splitlines()[0].strip()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("files")
    (folder / "marks").mkdir()
    (folder / "inspect_agent.py").write_text(INSPECT, encoding="utf-8")
    config = folder / "agents.toml"
    config.write_text(CONFIG, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    path = os.pathsep.join((str(ROOT / "examples"), str(folder)))
    for user in ("alice", "bob", "carol"):
        _cli(database_url, "users", "create", user, "--password-stdin", stdin=f"{user}'s password\n")
    keys = {user: _key(database_url, user) for user in ("alice", "bob", "carol")}
    alice2 = _key(database_url, "alice")
    _cli(database_url, "agents", "apply", str(config), path=path)
    bak = _key(database_url, "alice", "--agent", "inspect")
    env = {
        "PYTHONPATH": path,
        "HIVEGATE_FILES__MAX_FILE_BYTES": str(MAX_FILE_BYTES),
        "HIVEGATE_FILES__MAX_BYTES_PER_USER": str(QUOTA_BYTES),
    }
    with run_gateway(config, database_url=database_url, env=env) as running:
        yield Served(running, folder, keys["alice"], alice2, keys["bob"], keys["carol"], bak)


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _upload(
    served: Served, key: str, content: bytes, name: str = "data.bin", kind: str = "application/octet-stream"
) -> dict[str, Any]:
    response = httpx.post(
        served.files_url,
        params={"filename": name},
        content=content,
        headers={**_auth(key), "Content-Type": kind},
        timeout=TIMEOUT,
    )
    assert response.status_code == 201, response.text
    return response.json()


def _rest_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code, body
    return body["error"]


def _blobs(served: Served) -> set[str]:
    return {path.name for path in served.blobs.iterdir() if path.name.startswith("file_")}


def _called(served: Served, message: str) -> bool:
    return (served.folder / "marks" / f"called-{message}").exists()


@asynccontextmanager
async def _mcp(served: Served, agent_id: str, key: str, mode: str = "2026-07-28") -> AsyncGenerator[McpClient]:
    async with (
        httpx2.AsyncClient(headers=_auth(key), timeout=TIMEOUT) as http,
        McpClient(
            streamable_http_client(f"{served.gateway.url}/{agent_id}/mcp", http_client=http), mode=mode
        ) as client,  # type: ignore[arg-type]
    ):
        yield client


async def _call(served: Served, agent_id: str, key: str, arguments: dict[str, Any], mode: str = "2026-07-28") -> Any:
    async with _mcp(served, agent_id, key, mode) as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool(agent_id, arguments)
    assert not result.is_error, result
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def _mcp_error(
    served: Served, agent_id: str, key: str, arguments: dict[str, Any], mode: str = "2026-07-28"
) -> MCPError:
    async with _mcp(served, agent_id, key, mode) as client:
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
            await client.call_tool(agent_id, arguments)
    return caught.value


def _invoke(served: Served, agent_id: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{served.gateway.url}/{agent_id}/v1/invoke", json=body, headers=_auth(key), timeout=TIMEOUT)


def _a2a_message(text: str, files: list[str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text}]
    parts += [
        {"url": f"hivegate:file/{file_id}", "filename": f"a2a-{n}.bin", "mediaType": "application/x-test"}
        for n, file_id in enumerate(files)
    ]
    return {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}}


def _a2a_rpc(served: Served, agent_id: str, key: str, params: dict[str, Any]) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params}
    return httpx.post(f"{served.gateway.url}/{agent_id}/a2a", json=body, headers={**_auth(key), **V1}, timeout=TIMEOUT)


def _a2a_rest(served: Served, agent_id: str, key: str, params: dict[str, Any]) -> httpx.Response:
    url = f"{served.gateway.url}/{agent_id}/a2a/message:send"
    return httpx.post(url, json=params, headers={**_auth(key), **V1}, timeout=TIMEOUT)


def _a2a_reply(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    task = body["result"]["task"] if "result" in body else body["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return json.loads(task["artifacts"][0]["parts"][0]["text"])


# --- uploads -------------------------------------------------------------------------------------


def test_raw_and_multipart_uploads_read_back_identical(served: Served) -> None:
    content = os.urandom(40_000)
    made = _upload(served, served.alice, content, "report.pdf", "application/pdf")
    assert made["file_id"].startswith("file_")
    assert (made["size"], made["sha256"], made["content_type"]) == (
        40_000,
        hashlib.sha256(content).hexdigest(),
        "application/pdf",
    )
    meta = httpx.get(f"{served.files_url}/{made['file_id']}", headers=_auth(served.alice), timeout=TIMEOUT)
    assert meta.status_code == 200
    assert meta.json() == made
    assert meta.headers["cache-control"] == "private, no-store"
    got = httpx.get(made["download_url"], headers=_auth(served.alice), timeout=TIMEOUT)
    assert got.status_code == 200
    assert got.content == content
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''report.pdf"
    assert got.headers["x-content-type-options"] == "nosniff"
    # multipart, a UTF-8 name in the X-Filename header of a raw upload
    form = httpx.post(
        served.files_url,
        files={"file": ("notes ü.txt", b"hello", "text/plain")},
        headers=_auth(served.alice),
        timeout=TIMEOUT,
    )
    assert form.status_code == 201, form.text
    assert (form.json()["filename"], form.json()["content_type"], form.json()["size"]) == (
        "notes ü.txt",
        "text/plain",
        5,
    )
    raw = httpx.post(
        served.files_url, content=b"x", headers={**_auth(served.alice), "X-Filename": "caf%C3%A9.txt"}, timeout=TIMEOUT
    )
    assert (raw.status_code, raw.json()["filename"], raw.json()["content_type"]) == (
        201,
        "café.txt",
        "application/octet-stream",
    )


def test_uploads_need_a_credential_and_a_name(served: Served) -> None:
    anonymous = httpx.post(served.files_url, params={"filename": "a"}, content=b"x", timeout=TIMEOUT)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer ")
    _rest_error(
        httpx.post(served.files_url, content=b"x", headers=_auth(served.alice), timeout=TIMEOUT), 400, "invalid_params"
    )
    bad_type = httpx.post(
        served.files_url,
        params={"filename": "a"},
        content=b"x",
        headers={**_auth(served.alice), "Content-Type": "nonsense"},
        timeout=TIMEOUT,
    )
    _rest_error(bad_type, 400, "invalid_params")
    _rest_error(httpx.get(served.files_url, headers=_auth(served.alice), timeout=TIMEOUT), 405, "method_not_allowed")
    _rest_error(
        httpx.get(f"{served.gateway.url}/api/v2/other", headers=_auth(served.alice), timeout=TIMEOUT), 404, "not_found"
    )


def test_another_users_file_is_not_found_and_does_not_leak(served: Served) -> None:
    made = _upload(served, served.alice, b"alice's secret")
    unknown = "file_" + "0" * 32
    for key, file_id in ((served.bob, made["file_id"]), (served.bob, unknown), (served.alice, unknown)):
        for url in (f"{served.files_url}/{file_id}", f"{served.files_url}/{file_id}/content"):
            error = _rest_error(httpx.get(url, headers=_auth(key), timeout=TIMEOUT), 404, "not_found")
            assert error["message"] == "File not found"
        _rest_error(
            httpx.delete(f"{served.files_url}/{file_id}", headers=_auth(key), timeout=TIMEOUT), 404, "not_found"
        )
    # alice's bak_ key (bound to inspect) sees only files uploaded with it
    _rest_error(
        httpx.get(f"{served.files_url}/{made['file_id']}", headers=_auth(served.alice_bak), timeout=TIMEOUT),
        404,
        "not_found",
    )
    assert (
        httpx.get(f"{served.files_url}/{made['file_id']}", headers=_auth(served.alice2), timeout=TIMEOUT).status_code
        == 200
    )


def test_delete_frees_the_file(served: Served) -> None:
    made = _upload(served, served.alice, b"short-lived")
    assert made["file_id"] in _blobs(served)
    response = httpx.delete(f"{served.files_url}/{made['file_id']}", headers=_auth(served.alice), timeout=TIMEOUT)
    assert response.status_code == 204
    assert made["file_id"] not in _blobs(served)
    _rest_error(
        httpx.get(f"{served.files_url}/{made['file_id']}", headers=_auth(served.alice), timeout=TIMEOUT),
        404,
        "not_found",
    )


def _raw_request(served: Served, head: str, body: bytes) -> bytes:
    """Send one HTTP/1.1 request as written (a lying Content-Length, chunked framing) and read the reply."""
    address = urlsplit(served.gateway.url)
    with socket.create_connection((address.hostname, address.port), timeout=TIMEOUT) as sock:
        sock.sendall(head.encode("latin-1") + body)  # no half-close: the server takes it for the client leaving
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_oversized_uploads_and_the_quota_store_nothing(served: Served) -> None:
    before = _blobs(served)
    too_big = httpx.post(
        served.files_url,
        params={"filename": "big"},
        content=b"x" * (MAX_FILE_BYTES + 1),
        headers=_auth(served.carol),
        timeout=TIMEOUT,
    )
    _rest_error(too_big, 413, "payload_too_large")
    # Content-Length announcing more than the limit: refused before a byte is read
    head = (
        f"POST /api/v1/files?filename=lie HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {served.carol}\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {MAX_FILE_BYTES * 100}\r\nConnection: close\r\n\r\n"
    )
    assert _raw_request(served, head, b"tiny").startswith(b"HTTP/1.1 413")
    # chunked (no Content-Length) past the limit: refused while streaming (the limit is passed by the last data
    # chunk, so the server has read the body when it answers: unread bytes would make the close a reset)
    chunks = (b"y" * 40_000, b"y" * (MAX_FILE_BYTES - 40_000 + 1))
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    head = (
        f"POST /api/v1/files?filename=chunked HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {served.carol}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    assert _raw_request(served, head, chunked).startswith(b"HTTP/1.1 413")
    # multipart past the limit
    form = httpx.post(
        served.files_url,
        files={"file": ("big", b"z" * (MAX_FILE_BYTES + 10), "text/plain")},
        headers=_auth(served.carol),
        timeout=TIMEOUT,
    )
    _rest_error(form, 413, "payload_too_large")
    assert _blobs(served) == before
    # the quota: 4 files of 64 KiB fit in 300,000 bytes, a fifth does not; bob is not affected
    stored = [_upload(served, served.carol, os.urandom(MAX_FILE_BYTES))["file_id"] for _ in range(4)]
    over = httpx.post(
        served.files_url,
        params={"filename": "q"},
        content=b"q" * MAX_FILE_BYTES,
        headers=_auth(served.carol),
        timeout=TIMEOUT,
    )
    error = _rest_error(over, 413, "quota_exceeded")
    assert "300000" in error["message"]
    assert _blobs(served) == before | set(stored)
    assert not any((served.blobs / "tmp").iterdir())
    _upload(served, served.bob, b"bob still has room")
    for file_id in stored:  # give carol's room back
        assert (
            httpx.delete(f"{served.files_url}/{file_id}", headers=_auth(served.carol), timeout=TIMEOUT).status_code
            == 204
        )


# --- attachments ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_attachment_reaches_the_backend_byte_identical_over_mcp(served: Served, mode: str) -> None:
    content = os.urandom(50_000)
    made = _upload(served, served.alice, content, "photo.jpg", "image/jpeg")
    inline = {"name": "inline.txt", "mimeType": "text/plain", "data": "aGk="}
    seen = await _call(
        served,
        "inspect",
        served.alice,
        {"message": f"mcp-{mode}", "attachments": [{"file_id": made["file_id"]}, inline]},
        mode,
    )
    digest = hashlib.sha256(content).hexdigest()
    assert seen[0] == {
        "file_id": made["file_id"],
        "name": "photo.jpg",
        "mime_type": "image/jpeg",
        "size": 50_000,
        "sha256": digest,
        "content_sha256": digest,
        "content_size": 50_000,
    }
    assert (seen[1]["name"], seen[1]["content_sha256"]) == ("inline.txt", None)  # inline attachments keep working
    # the caller's filename and content_type win; the user-level endpoint /mcp serves the same call
    arguments = {
        "message": f"user-{mode}",
        "attachments": [{"file_id": made["file_id"], "filename": "x.jpg", "content_type": "image/x"}],
    }
    async with (
        httpx2.AsyncClient(headers=_auth(served.alice), timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(f"{served.gateway.url}/mcp", http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        result = await client.call_tool("inspect", arguments)
    described = json.loads(result.content[0].text)[0]  # type: ignore[union-attr]
    assert (described["name"], described["mime_type"], described["content_sha256"]) == ("x.jpg", "image/x", digest)


def test_an_attachment_reaches_the_backend_over_rest_and_a2a(served: Served) -> None:
    content = os.urandom(10_000)
    digest = hashlib.sha256(content).hexdigest()
    made = _upload(served, served.alice, content, "table.csv", "text/csv")
    response = _invoke(
        served, "inspect", served.alice, {"message": "rest", "attachments": [{"file_id": made["file_id"]}]}
    )
    assert response.status_code == 200, response.text
    assert json.loads(response.json()["text"])[0]["content_sha256"] == digest
    for send in (_a2a_rpc, _a2a_rest):
        seen = _a2a_reply(
            send(served, "inspect", served.alice, _a2a_message(f"a2a-{send.__name__}", [made["file_id"]]))
        )
        assert (seen[0]["content_sha256"], seen[0]["name"], seen[0]["mime_type"]) == (
            digest,
            "a2a-0.bin",
            "application/x-test",
        )


async def test_a_foreign_or_missing_file_is_invalid_params_everywhere_and_nothing_is_invoked(served: Served) -> None:
    alices = _upload(served, served.alice, b"not for bob")["file_id"]
    for file_id in (alices, "file_" + "0" * 32, "nonsense"):
        tag = f"{file_id[:12]}"
        error = await _mcp_error(
            served, "bobinspect", served.bob, {"message": f"mcp-{tag}", "attachments": [{"file_id": file_id}]}
        )
        assert (error.code, error.data) == (-32602, {"code": "invalid_params", "param": "attachments[0].file_id"})
        rest = _invoke(
            served, "bobinspect", served.bob, {"message": f"rest-{tag}", "attachments": [{"file_id": file_id}]}
        )
        assert _rest_error(rest, 400, "invalid_params")["param"] == "attachments[0].file_id"
        rpc = _a2a_rpc(served, "bobinspect", served.bob, _a2a_message(f"rpc-{tag}", [file_id]))
        assert rpc.json()["error"]["code"] == -32602, rpc.text
        rest_a2a = _a2a_rest(served, "bobinspect", served.bob, _a2a_message(f"a2a-{tag}", [file_id]))
        assert rest_a2a.status_code == 400, rest_a2a.text
        for plane in ("mcp", "rest", "rpc", "a2a"):
            assert not _called(served, f"{plane}-{tag}")
    # the same error text for a file that exists and one that does not
    foreign = await _mcp_error(
        served, "bobinspect", served.bob, {"message": "m1", "attachments": [{"file_id": alices}]}
    )
    missing = await _mcp_error(
        served, "bobinspect", served.bob, {"message": "m2", "attachments": [{"file_id": "file_" + "1" * 32}]}
    )
    assert foreign.message == missing.message


async def test_a_bak_keys_file_serves_its_agent_only(served: Served) -> None:
    made = _upload(served, served.alice_bak, b"uploaded by a machine")
    assert (
        await _call(
            served, "inspect", served.alice_bak, {"message": "bak-own", "attachments": [{"file_id": made["file_id"]}]}
        )
    )[0]["size"] == 21
    assert (
        await _call(
            served, "inspect", served.alice, {"message": "bak-oag", "attachments": [{"file_id": made["file_id"]}]}
        )
    )[0]["size"] == 21
    error = await _mcp_error(
        served, "inspect2", served.alice, {"message": "bak-other", "attachments": [{"file_id": made["file_id"]}]}
    )
    assert error.code == -32602
    assert not _called(served, "bak-other")


async def test_a_thousand_attachments_are_invalid_params_on_every_plane(served: Served) -> None:
    made = _upload(served, served.alice, b"one")["file_id"]
    many = [{"file_id": made}] * 1000
    error = await _mcp_error(served, "inspect", served.alice, {"message": "many-mcp", "attachments": many})
    assert error.code == -32602
    inline = await _mcp_error(
        served, "inspect", served.alice, {"message": "many-inline", "attachments": [{"data": "aGk="}] * 1000}
    )
    assert inline.code == -32602
    _rest_error(
        _invoke(served, "inspect", served.alice, {"message": "many-rest", "attachments": many}), 400, "invalid_params"
    )
    assert (
        _a2a_rpc(served, "inspect", served.alice, _a2a_message("many-rpc", [made] * 1000)).json()["error"]["code"]
        == -32602
    )
    for message in ("many-mcp", "many-inline", "many-rest", "many-rpc"):
        assert not _called(served, message)
    sixteen = await _call(
        served, "inspect", served.alice, {"message": "sixteen", "attachments": [{"file_id": made}] * 16}
    )
    assert len(sixteen) == 16


# --- rate limits ---------------------------------------------------------------------------------


async def test_rate_limit_over_mcp_per_key(served: Served) -> None:
    """The 4th call within a minute on an agent limited to 3 is rate_limited with a retry-after; another key of
    the same user has its own bucket; the key's bucket on another agent is untouched."""
    for key in (served.alice, served.alice2):
        async with _mcp(served, "lim_mcp", key) as client:
            for n in range(3):
                result = await client.call_tool("lim_mcp", {"message": f"call {n}"})
                assert not result.is_error
            with pytest.raises(MCPError) as caught:
                await client.call_tool("lim_mcp", {"message": "one too many"})
            await client.list_tools()  # lists are not counted
    error = caught.value
    assert error.code == -32603
    assert error.data["code"] == "rate_limited"
    assert error.data["limit"] == 3
    assert 1 <= error.data["retryAfterSeconds"] <= 20
    async with _mcp(served, "lim_mix", served.alice, "legacy") as client:
        assert not (await client.call_tool("lim_mix", {"message": "other agent"})).is_error


def test_rate_limit_over_rest_is_429_with_retry_after(served: Served) -> None:
    for key in (served.alice, served.alice2):
        for n in range(3):
            assert _invoke(served, "lim_rest", key, {"message": f"r{n}"}).status_code == 200
        refused = _invoke(served, "lim_rest", key, {"message": "r3"})
        error = _rest_error(refused, 429, "rate_limited")
        assert error["type"] == "rate_limit_error"
        assert 1 <= int(refused.headers["retry-after"]) <= 20


def test_rate_limit_over_a2a_bindings(served: Served) -> None:
    for key in (served.alice, served.alice2):
        for n in range(3):
            assert _a2a_rest(served, "lim_a2a", key, _a2a_message(f"a{n}", [])).status_code == 200
        refused = _a2a_rest(served, "lim_a2a", key, _a2a_message("a3", []))
        assert refused.status_code == 429, refused.text
        retry_after = int(refused.headers["retry-after"])
        assert 1 <= retry_after <= 20
        info = refused.json()["error"]["details"][0]
        assert info["metadata"] == {"code": "rate_limited", "retryAfterSeconds": str(retry_after)}
        listed = httpx.get(f"{served.gateway.url}/lim_a2a/a2a/tasks", headers={**_auth(key), **V1}, timeout=TIMEOUT)
        assert listed.status_code == 200  # reads are not counted
    for n in range(3):
        assert "result" in _a2a_rpc(served, "lim_rpc", served.alice, _a2a_message(f"j{n}", [])).json()
    refused = _a2a_rpc(served, "lim_rpc", served.alice, _a2a_message("j3", []))
    assert refused.status_code == 429
    body = refused.json()
    assert body["id"] == 7
    assert body["error"]["data"][0]["metadata"]["code"] == "rate_limited"
    assert refused.headers["retry-after"] == body["error"]["data"][0]["metadata"]["retryAfterSeconds"]


async def test_one_bucket_across_planes(served: Served) -> None:
    """A call counts once whichever plane carries it: MCP, REST and A2A share the credential × agent bucket."""
    async with _mcp(served, "lim_mix", served.alice2) as client:
        assert not (await client.call_tool("lim_mix", {"message": "mcp"})).is_error
    assert _invoke(served, "lim_mix", served.alice2, {"message": "rest"}).status_code == 200
    assert _a2a_rest(served, "lim_mix", served.alice2, _a2a_message("a2a", [])).status_code == 200
    _rest_error(_invoke(served, "lim_mix", served.alice2, {"message": "over"}), 429, "rate_limited")
    assert "Traceback" not in served.gateway.output()
