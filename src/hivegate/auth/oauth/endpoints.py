"""How each ``/oauth/*`` and ``/.well-known/*`` endpoint is wrapped, so that every answer there is in
the plane's form: RFC 6749 §5.2 JSON (or the endpoint's browser page) for a body over its limit, a
form that cannot be read, a hivegate error (a database outage: 503 ``store_unavailable``), and the
router's own 404/405; never a bare text answer or a 500.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hivegate.auth.oauth.rendering import oauth_error_response
from hivegate.errors import GatewayError, PayloadTooLargeError

__all__ = ["ErrorPage", "OAuthPlaneErrors", "endpoint", "form_field", "invalid_form", "oauth_error"]


class OAuthPlaneErrors:
    """Wraps the router of ``/oauth/*`` and ``/.well-known/*``: its own bare-text 404 (no such path) and 405
    (method not allowed, ``Allow`` kept, RFC 9110 §15.5.6) become JSON, as every other answer there:
    ``{"error": "not_found"}`` and ``{"error": "invalid_request", …}`` (RFC 6749 §5.2)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        replaced: list[Message] = []

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (404, 405):
                headers = list(message.get("headers", ()))
                if any(n.lower() == b"content-type" and v.startswith(b"text/plain") for n, v in headers):
                    replaced.append(message)  # Starlette's own answer: held back, answered below
                    return
            if not replaced:
                await send(message)

        await self._app(scope, receive, watched)
        if replaced:
            start = replaced[0]
            allow = {n.lower(): v for n, v in start.get("headers", ())}.get(b"allow")
            headers = {"Allow": allow.decode("latin-1")} if allow else {}
            if start["status"] == 405:
                answer = oauth_error("invalid_request", f"{scope['method']} is not allowed here", 405, headers)
            else:
                answer = oauth_error("not_found", "No such endpoint", 404, headers)
            await answer(scope, receive, send)


def _cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    return CORSMiddleware(
        app=app, allow_origins=["*"], allow_methods=methods, allow_headers=[MCP_PROTOCOL_VERSION_HEADER]
    )


ErrorPage = Callable[[Request, GatewayError], Response]
"""Renders a hivegate error as the browser page of an HTML endpoint."""


def endpoint(
    handler: Callable[[Request], Awaitable[Response]],
    *,
    limit: int,
    cors: list[str] | None = None,
    page: ErrorPage | None = None,
) -> ASGIApp:
    app: ASGIApp = _BodyLimit(request_response(_form_errors_are_400(_rendering_errors(handler, page))), limit, page)
    return _cors(app, cors) if cors is not None else app


class _BodyLimit:
    """The SDK's ``RequestBodyLimitMiddleware`` (declared and streamed bodies over ``limit`` bytes), whose
    own refusal — a bare text 413 — is answered in the endpoint's form instead: an RFC 6749 §5.2 JSON
    ``invalid_request`` (:class:`~hivegate.errors.PayloadTooLargeError`), or ``page`` on a browser page.

    A class, not a function: Starlette's ``Route`` serves a plain function as a request handler.
    """

    def __init__(self, app: ASGIApp, limit: int, page: ErrorPage | None) -> None:
        self._limited = RequestBodyLimitMiddleware(app, limit)
        self._limit = limit
        self._page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = False

        async def watched(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 413:
                # the middleware's own answer (the handlers never send 413), held back and replaced below
                refused = not any(name.lower() == b"content-type" for name, _ in message.get("headers", ()))
            if not refused:
                await send(message)

        await self._limited(scope, receive, watched)
        if refused:
            exc = PayloadTooLargeError(f"The request body is larger than {self._limit} bytes.")
            response = oauth_error_response(exc) if self._page is None else self._page(Request(scope), exc)
            await response(scope, receive, send)


def _rendering_errors(
    handler: Callable[[Request], Awaitable[Response]], page: ErrorPage | None
) -> Callable[[Request], Awaitable[Response]]:
    """Answer a hivegate error (a database outage: 503 ``store_unavailable``) in the endpoint's own form:
    an RFC 6749 §5.2 JSON error (:func:`~hivegate.auth.oauth.rendering.oauth_error_response`), or
    ``page`` for the browser pages. Never a bare 500. A client gone in the middle of its body
    (``ClientDisconnect``) ends the request quietly: nobody is left to read the 400."""

    async def rendered(request: Request) -> Response:
        try:
            return await handler(request)
        except GatewayError as exc:
            return oauth_error_response(exc) if page is None else page(request, exc)
        except ClientDisconnect:
            return Response(status_code=400)

    return rendered


def _form_errors_are_400(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Answer a body that cannot be read as a form with 400 ``invalid_request`` instead of a 500.

    OAuth's form endpoints take ``application/x-www-form-urlencoded`` (RFC 6749 §4.1.3, RFC 7009
    §2.1, and the pages' own forms); multipart bodies are refused before parsing (Starlette's
    parser fails on a missing boundary), and parser limits (fields, part size) become 400 too.
    """

    async def guarded(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if request.method == "POST" and content_type == "multipart/form-data":
            return invalid_form("send the form as application/x-www-form-urlencoded")
        try:
            return await handler(request)
        except MultiPartException as exc:
            return invalid_form(exc.message)
        except HTTPException as exc:  # the same failure, as Starlette raises it when mounted in an app
            if exc.status_code != 400:
                raise
            return invalid_form(exc.detail)

    return guarded


def oauth_error(
    error: str, description: str, status_code: int = 400, headers: Mapping[str, str] | None = None
) -> Response:
    """``{"error", "error_description"}`` (RFC 6749 §5.2) with ``Cache-Control: no-store`` and ``headers``."""
    return JSONResponse(
        {"error": error, "error_description": description},
        status_code=status_code,
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


def invalid_form(description: str) -> Response:
    """400 ``invalid_request``: the form cannot be read or misses what the endpoint needs."""
    return oauth_error("invalid_request", description)


def form_field(form: FormData, name: str) -> str:
    """The form's ``name`` value as text; ``""`` when it is missing or a file."""
    value = form.get(name)
    return value if isinstance(value, str) else ""
