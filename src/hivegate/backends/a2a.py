"""The ``a2a`` backend: an agent that fronts a remote A2A 1.0 agent, found by its agent card.

Spec: A2A 1.0 §3 (operations ``SendMessage``, ``SendStreamingMessage``, ``CancelTask``), §4 (the data
model: tasks, messages, parts, artifacts, task states); the a2a-sdk 1.3.0 client
(``/work/shared/reference/a2a-and-oauth.md`` §2.8). TOML: ``backend = { type = "a2a", card_url = … }``
(:class:`~hivegate.agents.model.A2ABackendSpec`); ``docs/backends.md``.

One call of the agent is one message to the upstream:

- **the message**: the caller's text as a text part, its attachments as file parts (an uploaded
  file's bytes as ``raw``, a link as ``url``), the call's conversation id as ``contextId`` (the
  upstream keeps its own context under the gateway's id: a conversation continues across calls and
  planes); a call that answers an upstream task left ``input-required`` in the same conversation
  goes to that task (``taskId``), so the upstream's question and the caller's answer stay one task;
- **streaming**: with ``SendStreamingMessage`` when the card says the agent streams (or the spec
  forces it): each text chunk of an artifact update reaches the caller as a reply delta (MCP
  progress, A2A artifact updates), and each ``working`` status message as a status note (MCP
  progress, an A2A ``working`` status, a REST ``status`` frame; not part of the reply); without
  streaming, one ``SendMessage`` and its final task or message;
- **the reply**: the final task's artifacts' parts (or the message's, when the upstream answered with
  a message), or its status message's text when it has none. Text alone is the reply text; with data
  or file parts it is a :class:`~hivegate.calls.events.Reply` of the parts: hivegate's A2A surface
  passes them on as parts, MCP callers get data as ``structuredContent`` and files as content blocks,
  and the text (data as compact JSON, files as a one-line description) is what conversations keep;
  ``failed``, ``rejected``, ``canceled`` and ``auth-required`` are the agent's failure
  (``AgentError``) with the upstream's status text; ``input-required`` is a reply (the upstream's
  question), and the next call in the conversation answers it;
- **cancel**: a call cancelled by its caller, or past its deadline, sends ``CancelTask`` for the
  upstream task it started (streaming: the task id arrives with the first event; a blocking
  ``SendMessage`` names no task before it ends, so only its connection is dropped);
- **failures** (the catalogue, ``docs/errors.md``): an upstream that cannot be reached, answers an
  HTTP error, a JSON-RPC error or something that is not A2A, or drops its stream is
  ``agent_service_unavailable``; one that does not answer within ``timeout_seconds`` is
  ``service_timeout``; one whose response passes ``max_result_bytes`` is cut off
  (``agent_service_unavailable``) without reading the rest.

Credentials: the upstream gets the agent's own (``headers``, ``bearer_env``, ``oauth`` client
credentials: :class:`UpstreamAuth`), never the caller's token (MCP authorization: no token passthrough).
One HTTP client per agent, reused by every call (one connection pool, one TLS context).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import re
import threading
import unicodedata
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.abc
import httpx
from a2a.client import A2AClientError, A2AClientTimeoutError, Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard, CancelTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict, ParseError
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from hivegate.agents.model import A2ABackendSpec, UpstreamOAuthSpec
from hivegate.backends.base import Attachment, DeltaSink, Invocation, Reply, ReplyPart, failure_line
from hivegate.backends.upstream_auth import UpstreamCredentials
from hivegate.calls.events import StatusNote, render_parts
from hivegate.errors import AgentError, AgentServiceUnavailableError, ServiceTimeoutError

__all__ = [
    "CANCEL_TIMEOUT_SECONDS",
    "MAX_AWAITING_INPUT",
    "A2ABackend",
    "ResultTooLargeError",
    "UpstreamAuth",
    "origin_of",
    "reply_text",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

CANCEL_TIMEOUT_SECONDS = 5.0
"""How long a ``CancelTask`` sent for a cancelled call may take (it runs shielded, after the call ended)."""

MAX_RENDERED_DATA_BYTES = 256 * 1024
"""A data part larger than this (protobuf bytes) is described in the reply text, not rendered as JSON."""

MAX_AWAITING_INPUT = 10_000
"""The most conversations one agent remembers an upstream task ``input-required`` for (the oldest goes first)."""

_FAILED_STATES = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected the message",
    TaskState.TASK_STATE_CANCELED: "canceled the task",
    TaskState.TASK_STATE_AUTH_REQUIRED: "needs an authorization the gateway cannot give",
}


class ResultTooLargeError(httpx.ReadError):
    """The upstream's response passed the backend's ``max_result_bytes`` (the rest is not read)."""


class _LimitedStream(httpx.AsyncByteStream):
    """A response body that raises :class:`ResultTooLargeError` once more than ``limit`` bytes arrived."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int, request: httpx.Request) -> None:
        self._stream = stream
        self._limit = limit
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise ResultTooLargeError(f"the response passed {self._limit} bytes", request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class _LimitedTransport(httpx.AsyncBaseTransport):
    """The HTTP transport of one backend: every response body is cut off past ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx.AsyncHTTPTransport(retries=0)
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _LimitedStream(response.stream, self._limit, request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class UpstreamLoop:
    """An event loop in a thread of its own, where one a2a backend talks to its upstream.

    The a2a-sdk parses what an upstream sends (its JSON-RPC replies, its streamed events) in Python,
    per JSON value, on the loop that awaits it: a hostile upstream's megabyte of small values costs
    seconds. On this loop, that time is taken from that agent's upstream calls only; the gateway's own
    loop goes on serving every other request (the interpreter switches threads every few milliseconds).
    Started by the first call, stopped by :meth:`stop` (a daemon thread: it never holds up an exit).
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The upstream loop (started on first use)."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=_run_until_stopped, args=(loop,), name="hivegate-upstream", daemon=True).start()
                self._loop = loop
            return self._loop

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the upstream loop and return (or raise) what it did.

        Cancelling the caller cancels ``work`` there and waits (shielded, at most
        :data:`CANCEL_TIMEOUT_SECONDS` and a second) for it to finish its own cleanup (a ``CancelTask``).
        """
        ended = concurrent.futures.Future[None]()

        async def tracked() -> T:
            try:
                return await work
            finally:
                ended.set_result(None)

        running = asyncio.run_coroutine_threadsafe(tracked(), self.loop())
        try:
            return await asyncio.wrap_future(running)
        except asyncio.CancelledError:
            running.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_SECONDS + 1):
                await asyncio.wrap_future(ended)
            raise

    def stop(self) -> None:
        """Stop the loop (its thread ends, and closes it). Idempotent; a later :meth:`run` starts a new one."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


class UpstreamAuth(httpx.Auth):
    """The upstream's credentials (:class:`~hivegate.backends.upstream_auth.UpstreamCredentials`: the static
    ``headers``, a bearer token from an environment variable, or OAuth client credentials) as an ``httpx``
    auth.

    They go only to ``origins`` (scheme, host, port; RFC 6454): the card's and the spec's
    ``allowed_origins``; a request anywhere else goes without them.

    A missing environment variable or a refused token request raises :class:`AgentServiceUnavailableError`
    (logged with the agent id; the caller sees the catalogue's text only).
    """

    def __init__(
        self,
        agent_id: str,
        *,
        origins: frozenset[str],
        headers: Mapping[str, str] | None = None,
        bearer_env: str | None = None,
        oauth: UpstreamOAuthSpec | None = None,
    ) -> None:
        self._agent_id = agent_id
        self._origins = origins
        self._credentials = UpstreamCredentials(agent_id, headers=headers, bearer_env=bearer_env, oauth=oauth)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        raise RuntimeError("the a2a backend's HTTP client is asynchronous")  # pragma: no cover

    def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """Add the upstream's credentials to a request to one of ``origins`` (the class docstring)."""
        if _http_origin(str(request.url)) not in self._origins:
            logger.warning(
                "agent %s: a request to %s goes without the agent's credentials", self._agent_id, request.url.host
            )
            return _as_it_is(request)
        return self._credentials.flow(request, httpx.Request)


async def _as_it_is(request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
    yield request


@dataclass(slots=True)
class _Reply:
    """What the upstream sent for one call: the task (id, state, status text), its artifacts' parts by id."""

    task_id: str | None = None
    context_id: str | None = None
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    status_text: str = ""
    artifacts: dict[str, list[Part]] = field(default_factory=dict)
    message_parts: list[Part] | None = None
    """The parts of the upstream's answer when it was a message (not a task)."""

    def take_task(self, task: Task) -> None:
        self.task_id, self.context_id = task.id or self.task_id, task.context_id or self.context_id
        self.state = task.status.state
        self.status_text = reply_text(task.status.message.parts) if task.status.HasField("message") else ""
        if task.artifacts:
            self.artifacts = {artifact.artifact_id: list(artifact.parts) for artifact in task.artifacts}

    def reply(self) -> str | Reply:
        """The reply: the message's parts, else the artifacts' (in order), else the status text; a
        :class:`Reply` of parts when there is more than text."""
        if self.message_parts is not None:
            parts = self.message_parts
        elif self.artifacts and self.state not in _FAILED_STATES:
            parts = [part for chunk in self.artifacts.values() for part in chunk]
        else:
            return self.status_text
        if all(part.WhichOneof("content") == "text" for part in parts):
            return "".join(part.text for part in parts)
        converted = reply_parts(parts)
        return Reply(converted) if any(part.kind != "text" for part in converted) else render_parts(converted)


_MEDIA_TYPE = re.compile(
    r"[A-Za-z0-9][\w!#$&^.+-]{0,126}/[A-Za-z0-9][\w!#$&^.+-]{0,126}"
    r"""(\s*;\s*[\w!#$&^.+-]{1,64}=("[^"\x00-\x1f\x7f]{0,256}"|[\w!#$&^.+-]{1,256})){0,8}"""
)
"""A media type (RFC 6838 §4.2 names, RFC 9110 §8.3.1 parameters): what a file part's may be."""
MAX_FILE_NAME_CHARS = 255


def _file_name(name: str) -> str | None:
    """An upstream file part's name as the planes show it: control and format characters (line breaks,
    escapes, bidirectional overrides) left out, at most :data:`MAX_FILE_NAME_CHARS` characters."""
    kept = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf"))[:MAX_FILE_NAME_CHARS]
    return kept or None


def reply_parts(parts: list[Part] | Any) -> tuple[ReplyPart, ...]:
    """A2A ``parts`` as reply parts: text and files as they are, data as its JSON value (one larger than
    :data:`MAX_RENDERED_DATA_BYTES` is described in a text part instead: turning it into Python values
    costs per value). A part with no content is left out.

    What the upstream says of a file is checked, as it reaches MCP content, REST and the reply text: a
    name loses its control characters (:func:`_file_name`), a media type that is not one is dropped,
    and a link other than ``http``/``https`` (``file:``, ``javascript:``) is not passed on: a text part
    names it instead."""
    out: list[ReplyPart] = []
    for part in parts:
        kind = part.WhichOneof("content")
        name = _file_name(part.filename) if part.filename else None
        media_type = part.media_type if part.media_type and _MEDIA_TYPE.fullmatch(part.media_type) else None
        if kind == "text":
            out.append(ReplyPart("text", text=part.text))
        elif kind == "data":
            size = part.data.ByteSize()
            if size <= MAX_RENDERED_DATA_BYTES:
                out.append(ReplyPart("data", data=MessageToDict(part.data)))
            else:
                out.append(ReplyPart("text", text=f"[data, {size} bytes]"))
        elif kind == "raw":
            out.append(ReplyPart("file", content=part.raw, name=name, media_type=media_type))
        elif kind == "url":
            if part.url.lower().startswith(("http://", "https://")) and _file_name(part.url) == part.url:
                out.append(ReplyPart("file", uri=part.url, name=name, media_type=media_type))
            else:
                out.append(ReplyPart("text", text=f"[file {name or 'file'}: a link that is not http(s), not shown]"))
    return tuple(out)


def reply_text(parts: list[Part] | Any) -> str:
    """The text of A2A ``parts`` (:func:`~hivegate.calls.events.render_parts` of :func:`reply_parts`)."""
    return render_parts(reply_parts(parts))


def _attachment_part(attachment: Attachment) -> Part:
    """An attachment as an A2A file part: an upload's bytes or inline base64 data as ``raw``, a link as ``url``."""
    name, media_type = attachment.name or "", attachment.mime_type or ""
    if attachment.content is not None:
        return Part(raw=attachment.content, filename=name, media_type=media_type)
    if attachment.data is not None:
        return Part(raw=base64.b64decode(attachment.data), filename=name, media_type=media_type)
    return Part(url=attachment.uri or "", filename=name, media_type=media_type)


class A2ABackend:
    """An agent fronting a remote A2A agent (module docstring). Built by
    :func:`hivegate.backends.factory.create_backend`; started once, closed on shutdown.

    Args:
        agent_id: the gateway's agent (for the logs and the errors).
        spec: the ``a2a`` backend spec.
        transport: the HTTP transport (tests give one; default: a pooled one with the result limit).
    """

    can_invoke = True
    has_server = False
    subscription_bus: SubscriptionBus | None = None

    def __init__(self, agent_id: str, spec: A2ABackendSpec, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._agent_id = agent_id
        self._spec = spec
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None
        self._card: AgentCard | None = None
        self._upstream = UpstreamLoop()
        self._connecting = anyio.Lock()
        self._awaiting_input: dict[tuple[str, str], str] = {}
        """(user, conversation id) → the upstream task it left ``input-required`` (answered by its next call)."""

    @property
    def card(self) -> AgentCard | None:
        """The upstream's agent card, once fetched (the first call fetches it)."""
        return self._card

    def has_method(self, method: str) -> bool:
        return False

    def tool_input_schema(self, name: str) -> Mapping[str, Any] | None:
        return None

    def serves_plainly(self, method: str) -> bool:
        return False

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        """Nothing to open yet: the HTTP client is made, and the card fetched, by the first call, on the
        upstream loop (:class:`UpstreamLoop`)."""

    async def aclose(self) -> None:
        """Close the A2A client and the HTTP client, and stop the agent's upstream loop. Idempotent."""
        if self._http is not None:
            await self._upstream.run(self._close_here())
        self._upstream.stop()

    async def _close_here(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.aclose()

    def _open_here(self) -> httpx.AsyncClient:
        """The agent's HTTP client, made on the upstream loop (where it is used) the first time."""
        if self._http is None:
            spec = self._spec
            self._http = httpx.AsyncClient(
                transport=self._transport or _LimitedTransport(spec.max_result_bytes),
                timeout=httpx.Timeout(spec.timeout_seconds),
                auth=UpstreamAuth(
                    self._agent_id,
                    origins=self._origins(),
                    headers=spec.headers,
                    bearer_env=spec.bearer_env,
                    oauth=spec.oauth,
                ),
                follow_redirects=False,
            )
        return self._http

    async def request(self, ctx: ServerRequestContext[Any, Any], method: str, params: Mapping[str, Any]) -> Any:
        raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)

    async def fetch_card(self) -> AgentCard:
        """Fetch (again) the upstream's agent card and build the A2A client for it.

        Raises:
            AgentServiceUnavailableError: the card cannot be fetched or is not an A2A 1.0 card.
            ServiceTimeoutError: the card did not arrive within ``timeout_seconds``.
        """
        return await self._upstream.run(self._fetch_card_here())

    async def _fetch_card_here(self) -> AgentCard:
        http = self._open_here()
        try:
            # One deadline for the whole card: an upstream that trickles it byte by byte gives up here.
            with anyio.fail_after(self._spec.timeout_seconds):
                response = await http.get(card_url_of(self._spec.card_url), headers={"Accept": "application/json"})
            response.raise_for_status()
            card = parse_agent_card(response.json())
        except (httpx.TimeoutException, TimeoutError):
            logger.warning("agent %s: the upstream agent card did not arrive in time", self._agent_id)
            raise ServiceTimeoutError(self._spec.timeout_seconds) from None
        except (httpx.HTTPError, ValueError, TypeError, KeyError, ParseError, RecursionError) as exc:  # not a card
            logger.warning("agent %s: the upstream agent card cannot be used: %s", self._agent_id, failure_line(exc))
            raise AgentServiceUnavailableError() from None
        allowed = self._origins()
        usable = [i for i in card.supported_interfaces if _http_origin(i.url) in allowed]
        if not usable:  # the card cannot send the gateway elsewhere (an internal address: SSRF)
            logger.warning(
                "agent %s: the upstream agent card names no interface on %s (allowed_origins adds more)",
                self._agent_id,
                ", ".join(sorted(allowed)),
            )
            raise AgentServiceUnavailableError()
        reachable = AgentCard()
        reachable.CopyFrom(card)
        del reachable.supported_interfaces[:]
        reachable.supported_interfaces.extend(usable)
        streaming = self._spec.streaming if self._spec.streaming is not None else card.capabilities.streaming
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=["JSONRPC", "HTTP+JSON"]
        )
        try:
            client = ClientFactory(config).create(reachable)
        except (ValueError, A2AClientError) as exc:  # no interface this client speaks
            logger.warning("agent %s: the upstream agent card offers no usable interface: %s", self._agent_id, exc)
            raise AgentServiceUnavailableError() from None
        self._card, self._client = card, client
        return card

    def _origins(self) -> frozenset[str]:
        """The origins the agent's upstream may be called at: its card's, and ``allowed_origins``."""
        return frozenset({origin_of(card_url_of(self._spec.card_url)), *map(origin_of, self._spec.allowed_origins)})

    async def _connected(self) -> Client:
        client = self._client
        if client is not None:
            return client
        async with self._connecting:
            if self._client is None:
                await self._fetch_card_here()
            assert self._client is not None
            return self._client

    async def invoke(self, invocation: Invocation, on_delta: DeltaSink | None) -> str | Reply:
        """Send the call's message to the upstream and return its reply text (module docstring). The
        exchange runs on the upstream loop; each delta is handed to ``on_delta`` on this loop, in order.

        Raises:
            AgentError: the upstream task ended failed, rejected, canceled or auth-required.
            AgentServiceUnavailableError: the upstream cannot be reached, refused, or answered something
                that is not A2A, or more than ``max_result_bytes``.
            ServiceTimeoutError: the upstream sent nothing for ``timeout_seconds``.
        """
        if on_delta is None:
            return await self._upstream.run(self._invoke_here(invocation, None))
        here, sink = asyncio.get_running_loop(), on_delta

        async def deliver(text: str) -> None:
            await sink(text)

        async def relay(text: str) -> None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(deliver(text), here))

        return await self._upstream.run(self._invoke_here(invocation, relay))

    async def _invoke_here(self, invocation: Invocation, on_delta: DeltaSink | None) -> str | Reply:
        client = await self._connected()
        # A signed-in caller's conversation id was checked as its own (the call contract); an anonymous
        # caller's is only a label it chose, so its call starts a fresh upstream context and leaves no
        # task waiting for an answer that another anonymous caller could give.
        user = invocation.principal.user_id
        context_id = (invocation.context_id or "") if user is not None else ""
        waiting = (user, context_id) if user is not None and context_id else None
        message = Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            context_id=context_id,
            task_id=self._awaiting_input.pop(waiting, "") if waiting is not None else "",
            parts=[Part(text=invocation.message), *(_attachment_part(a) for a in invocation.attachments)],
        )
        reply = _Reply()
        try:
            await self._exchange(client, SendMessageRequest(message=message), reply, on_delta)
        except anyio.get_cancelled_exc_class():
            if reply.task_id and reply.state not in _ENDED:
                await self._cancel_upstream(client, reply.task_id)
            raise
        except A2AClientTimeoutError:
            raise ServiceTimeoutError(self._spec.timeout_seconds) from None
        except (A2AClientError, A2AError, httpx.HTTPError, ValueError, ParseError, RecursionError) as exc:
            logger.warning("agent %s: the upstream A2A agent failed: %s", self._agent_id, failure_line(exc))
            raise AgentServiceUnavailableError() from None
        if reply.message_parts is None and reply.state in _FAILED_STATES:
            what = _FAILED_STATES[reply.state]  # pyright: ignore[reportArgumentType]
            raise AgentError(reply.status_text or f"The remote agent {what}.")
        if reply.state == TaskState.TASK_STATE_INPUT_REQUIRED and waiting is not None and reply.task_id:
            if len(self._awaiting_input) >= MAX_AWAITING_INPUT:  # the oldest question is forgotten
                del self._awaiting_input[next(iter(self._awaiting_input))]
            self._awaiting_input[waiting] = reply.task_id
        elif reply.message_parts is None and reply.state not in _ENDED:
            logger.warning("agent %s: the upstream's answer ended in state %s", self._agent_id, reply.state)
            raise AgentServiceUnavailableError()
        return reply.reply()

    async def _exchange(
        self, client: Client, request: SendMessageRequest, reply: _Reply, on_delta: DeltaSink | None
    ) -> None:
        """Send ``request`` and fold what comes back into ``reply`` (text deltas to ``on_delta``)."""
        async for event in client.send_message(request):
            kind = event.WhichOneof("payload")
            if kind == "message":
                reply.message_parts = list(event.message.parts)
            elif kind == "task":
                reply.take_task(event.task)
            elif kind == "status_update":
                update = event.status_update
                reply.task_id = update.task_id or reply.task_id
                reply.state = update.status.state
                if update.status.HasField("message"):
                    reply.status_text = reply_text(update.status.message.parts)
                    if on_delta is not None and reply.state == TaskState.TASK_STATE_WORKING and reply.status_text:
                        await on_delta(StatusNote(reply.status_text))  # progress, not part of the reply
            elif kind == "artifact_update":
                update = event.artifact_update
                reply.task_id = update.task_id or reply.task_id
                artifact = update.artifact
                known = reply.artifacts.get(artifact.artifact_id)
                parts = list(artifact.parts)
                if known is not None and update.append:
                    known.extend(parts)
                else:
                    reply.artifacts[artifact.artifact_id] = parts
                if on_delta is not None and (known is None or update.append):
                    delta = "".join(p.text for p in parts if p.WhichOneof("content") == "text")
                    if delta:
                        await on_delta(delta)

    async def _cancel_upstream(self, client: Client, task_id: str) -> None:
        """``CancelTask`` for the upstream task of a cancelled call (shielded, bounded; a failure is logged)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_TIMEOUT_SECONDS):
            try:
                await client.cancel_task(CancelTaskRequest(id=task_id))
            except (A2AClientError, A2AError, httpx.HTTPError) as exc:
                logger.info("agent %s: the upstream task %s was not canceled: %s", self._agent_id, task_id, exc)


_ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        *_FAILED_STATES,
    }
)


WELL_KNOWN_CARD_PATH = "/.well-known/agent-card.json"
"""Where an A2A agent serves its card, under its base URL (A2A 1.0 §8.2)."""


def card_url_of(url: str) -> str:
    """``url`` when it names a JSON document (the card itself), else the agent's base URL with
    :data:`WELL_KNOWN_CARD_PATH` appended."""
    path = url.split("?", 1)[0].split("#", 1)[0]
    return url if path.endswith(".json") else url.rstrip("/") + WELL_KNOWN_CARD_PATH


def origin_of(url: str) -> str:
    """The origin of an http(s) ``url`` (RFC 6454 §4): ``scheme://host:port``, the default port made explicit."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{parsed.host}:{port}"


def _http_origin(url: str) -> str | None:
    """:func:`origin_of` for an http(s) URL; None for anything else (another scheme, not a URL)."""
    try:
        return origin_of(url) if url.startswith(("http://", "https://")) else None
    except (httpx.InvalidURL, ValueError):
        return None
