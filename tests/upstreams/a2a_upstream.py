"""A remote A2A 1.0 agent for tests: an a2a-sdk server that hivegate's tests put behind the gateway.

``python tests/upstreams/a2a_upstream.py PORT [--streaming|--no-streaming] [--require-bearer TOKEN] [--log FILE]``

serves one agent, ``Upstream``, on ``127.0.0.1``: its card at ``/agent/.well-known/agent-card.json``
(always public), the JSON-RPC binding at ``POST /agent/a2a`` and the HTTP+JSON binding under
``/agent/rest``, over the SDK's ``DefaultRequestHandler`` and ``InMemoryTaskStore``. Port 0 picks a
free port; once the server accepts connections it prints ``a2a-upstream listening on URL``.

The first word of the user message's text picks what the agent does (the rest is the payload):

- ``echo X``: WORKING, the ``response`` artifact ``X`` (word by word when streaming), COMPLETED.
- ``shout X``: the same with ``X`` upper-cased, in one chunk.
- ``status``: a ``working`` status message ``looking it up``, then the reply ``found it``.
- ``context``: ``context=<contextId> turns=<n>``, ``n`` the number of earlier tasks seen in that context.
- ``data``: a data part ``{"answer": 42, "items": ["a", "b"]}`` and a text part ``see data``.
- ``file``: a file part (``u.pdf``, ``application/pdf``, raw bytes) and a text part ``see file``.
- ``attachments``: one line ``filename|media_type|sha256hex|size`` per file part of the user message
  (raw bytes, or the bytes its URL serves).
- ``slow N``: WORKING, N seconds, then ``slept``; cancelling it makes it CANCELED (and is logged).
- ``ask``: INPUT_REQUIRED with the agent message ``what is your name?``; a follow-up ``name Bob`` on the
  same task completes it with ``hello Bob`` (anything else asks again).
- ``fail``: FAILED, with the agent status message ``upstream failure``.
- ``big N``: a text artifact of N bytes of ``x``.
- ``auth``: the ``Authorization`` header the request carried, or ``none``.
- anything else: the whole text, as ``echo`` does.

``--require-bearer TOKEN``: every request but the card's without ``Authorization: Bearer TOKEN`` gets
HTTP 401. ``--log FILE``: one JSON line per ``execute`` and ``cancel`` of the executor, with the
task and context ids, the message text and the ``Authorization`` header (or null) that reached it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import secrets
import socket
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import uvicorn
from a2a.helpers import new_data_part, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role, Task, TaskState
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AGENT", "DATA", "FILE_BYTES", "agent_card", "build_app", "main"]

AGENT = "agent"
HOST = "127.0.0.1"
LABEL = "a2a-upstream"
DATA = {"answer": 42, "items": ["a", "b"]}
FILE_BYTES = b"%PDF-1.4 upstream"
FILE_NAME = "u.pdf"
FILE_MEDIA_TYPE = "application/pdf"
QUESTION = "what is your name?"
FAILURE = "upstream failure"
DOWNLOAD_TIMEOUT_SECONDS = 10.0


def agent_card(base_url: str, *, streaming: bool) -> AgentCard:
    """The card of the agent served under ``{base_url}/agent``."""
    return AgentCard(
        name="Upstream",
        description="A remote A2A agent for tests",
        version="1.2.3",
        supported_interfaces=[
            AgentInterface(url=f"{base_url}/{AGENT}/a2a", protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=f"{base_url}/{AGENT}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=False, extended_agent_card=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Echoes its input", tags=["demo"]),
            AgentSkill(id="shout", name="Shout", description="Echoes its input in capitals", tags=["demo"]),
        ],
    )


class RequestLog:
    """Appends one JSON line per executor call to a file (or nowhere)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path

    def write(self, method: str, task_id: str, context_id: str, text: str, authorization: str | None) -> None:
        if self._path is None:
            return
        record = {
            "method": method,
            "task_id": task_id,
            "context_id": context_id,
            "text": text,
            "authorization": authorization,
        }
        with self._path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")


def _authorization(context: RequestContext) -> str | None:
    """The request's ``Authorization`` header: ``DefaultServerCallContextBuilder`` puts the headers
    (a dict with lower-case names) in ``call_context.state["headers"]``."""
    headers = context.call_context.state.get("headers")
    if not isinstance(headers, dict):
        return None
    value = headers.get("authorization")
    return value if isinstance(value, str) else None


def _split(text: str) -> tuple[str, str]:
    """The first word of ``text`` and the rest."""
    words = text.split(None, 1)
    if not words:
        return "", ""
    return words[0], words[1] if len(words) > 1 else ""


async def _download(url: str) -> bytes:
    async with httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT_SECONDS, follow_redirects=True) as http:
        response = await http.get(url)
        response.raise_for_status()
        return response.content


@dataclass
class Turn:
    """One execution of the agent: the task, its updater, the message and what it asks for."""

    task: Task
    updater: TaskUpdater
    message: Message
    text: str
    payload: str
    authorization: str | None
    earlier_turns: int

    async def reply(self, parts: list[Part]) -> None:
        """The ``response`` artifact in one chunk, then COMPLETED."""
        await self.updater.add_artifact(parts, artifact_id=self.artifact_id, name="response", last_chunk=True)
        await self.updater.complete()

    @property
    def artifact_id(self) -> str:
        return f"{self.task.id}-response"


Command = Callable[[Turn], Awaitable[None]]


class UpstreamExecutor(AgentExecutor):
    """The agent: the first word of the message picks the behaviour (see the module's docstring)."""

    def __init__(self, *, streaming: bool, log: RequestLog) -> None:
        self._streaming = streaming
        self._log = log
        self._contexts: dict[str, list[str]] = {}  # context id -> the ids of the tasks seen in it
        self._commands: dict[str, Command] = {
            "echo": self._echo,
            "shout": self._shout,
            "status": self._status,
            "context": self._context,
            "data": self._data,
            "file": self._file,
            "attachments": self._attachments,
            "slow": self._slow,
            "ask": self._ask,
            "fail": self._fail,
            "big": self._big,
            "auth": self._auth,
        }

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is None:
            raise ValueError("execute without a message")
        task = context.current_task
        # read now: the SDK updates the stored task (this very object) in place as events are processed
        answering = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        text = context.get_user_input()
        authorization = _authorization(context)
        self._log.write("execute", task.id, task.context_id, text, authorization)
        seen = self._contexts.setdefault(task.context_id, [])
        earlier = sum(1 for task_id in seen if task_id != task.id)
        if task.id not in seen:
            seen.append(task.id)
        command, payload = _split(text)
        turn = Turn(
            task=task,
            updater=TaskUpdater(event_queue, task.id, task.context_id),
            message=message,
            text=text,
            payload=payload,
            authorization=authorization,
            earlier_turns=earlier,
        )
        await turn.updater.start_work()
        if answering:
            await self._answer(turn, command)
            return
        handler = self._commands.get(command)
        if handler is None:
            turn.payload = text
            handler = self._echo
        await handler(turn)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        self._log.write("cancel", task_id, context_id, "", _authorization(context))
        await TaskUpdater(event_queue, task_id, context_id).cancel()

    async def _echo(self, turn: Turn) -> None:
        chunks = re.findall(r"\s*\S+\s*", turn.payload)  # the words, each with the spaces around it
        if not self._streaming or len(chunks) < 2:
            await turn.reply([Part(text=turn.payload)])
            return
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            await turn.updater.add_artifact(
                [Part(text=chunk)], artifact_id=turn.artifact_id, name="response", append=index > 0, last_chunk=last
            )
        await turn.updater.complete()

    async def _status(self, turn: Turn) -> None:
        """A ``working`` status message ("looking it up"), then the reply ("found it")."""
        note = new_text_message(
            "looking it up", context_id=turn.task.context_id, task_id=turn.task.id, role=Role.ROLE_AGENT
        )
        await turn.updater.update_status(TaskState.TASK_STATE_WORKING, message=note)
        await turn.reply([Part(text="found it")])

    async def _shout(self, turn: Turn) -> None:
        await turn.reply([Part(text=turn.payload.upper())])

    async def _context(self, turn: Turn) -> None:
        await turn.reply([Part(text=f"context={turn.task.context_id} turns={turn.earlier_turns}")])

    async def _data(self, turn: Turn) -> None:
        await turn.reply([new_data_part(DATA), Part(text="see data")])

    async def _file(self, turn: Turn) -> None:
        await turn.reply([Part(raw=FILE_BYTES, filename=FILE_NAME, media_type=FILE_MEDIA_TYPE), Part(text="see file")])

    async def _attachments(self, turn: Turn) -> None:
        lines: list[str] = []
        for part in turn.message.parts:
            if part.HasField("raw"):
                body = part.raw
            elif part.HasField("url"):
                try:
                    body = await _download(part.url)
                except httpx.HTTPError as exc:
                    lines.append(f"{part.filename}|{part.media_type}|unreadable {part.url}: {exc!r}|-1")
                    continue
            else:
                continue
            lines.append(f"{part.filename}|{part.media_type}|{hashlib.sha256(body).hexdigest()}|{len(body)}")
        await turn.reply([Part(text="\n".join(lines) if lines else "no attachments")])

    async def _slow(self, turn: Turn) -> None:
        try:
            seconds = float(turn.payload or "1")
        except ValueError:
            seconds = 1.0
        await anyio.sleep(seconds)
        await turn.reply([Part(text="slept")])

    async def _ask(self, turn: Turn) -> None:
        await turn.updater.requires_input(turn.updater.new_agent_message([Part(text=QUESTION)]))

    async def _answer(self, turn: Turn, command: str) -> None:
        if command == "name" and turn.payload:
            await turn.reply([Part(text=f"hello {turn.payload}")])
        else:
            await self._ask(turn)

    async def _fail(self, turn: Turn) -> None:
        await turn.updater.failed(turn.updater.new_agent_message([Part(text=FAILURE)]))

    async def _big(self, turn: Turn) -> None:
        try:
            size = max(0, int(turn.payload))
        except ValueError:
            size = 0
        await turn.reply([Part(text="x" * size)])

    async def _auth(self, turn: Turn) -> None:
        await turn.reply([Part(text=turn.authorization or "none")])


class RequireBearer:
    """HTTP 401 for every request without ``Authorization: Bearer TOKEN``, but the agent card's."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope["path"]).endswith(AGENT_CARD_WELL_KNOWN_PATH):
            await self._app(scope, receive, send)
            return
        given = Headers(scope=scope).get("authorization", "").encode()
        if secrets.compare_digest(given, self._expected):
            await self._app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="upstream"'}
        )
        await response(scope, receive, send)


def build_app(
    base_url: str, *, streaming: bool = True, require_bearer: str | None = None, log: Path | None = None
) -> Starlette:
    """The Starlette app of the agent, whose card names ``base_url``."""
    card = agent_card(base_url, streaming=streaming)
    handler = DefaultRequestHandler(
        agent_executor=UpstreamExecutor(streaming=streaming, log=RequestLog(log)),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    routes = (
        create_agent_card_routes(card)
        + create_jsonrpc_routes(handler, rpc_url="/a2a")
        + create_rest_routes(handler, path_prefix="/rest")
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            await handler.aclose()  # ends the tasks still running

    middleware = [Middleware(RequireBearer, token=require_bearer)] if require_bearer else []
    return Starlette(routes=[Mount(f"/{AGENT}", routes=routes)], middleware=middleware, lifespan=lifespan)


async def _serve(port: int, *, streaming: bool, require_bearer: str | None, log: Path | None) -> None:
    # Bind first, so that the card names the port really bound (port 0 picks a free one).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    base_url = f"http://{HOST}:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        build_app(base_url, streaming=streaming, require_bearer=require_bearer, log=log),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            await serving
            return
        await asyncio.sleep(0.05)
    print(f"{LABEL} listening on {base_url}", flush=True)
    await serving


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A remote A2A 1.0 agent for hivegate's tests.")
    parser.add_argument("port", type=int, help="the loopback port to listen on (0: a free one)")
    parser.add_argument("--streaming", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--require-bearer", metavar="TOKEN", help="answer 401 unless Authorization: Bearer TOKEN")
    parser.add_argument("--log", metavar="FILE", type=Path, help="append one JSON line per executor call")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.port, streaming=args.streaming, require_bearer=args.require_bearer, log=args.log))


if __name__ == "__main__":
    main()
