"""An agent's own credentials on its upstream's HTTP requests (``a2a`` and ``mcp`` backends).

Spec: OAuth 2.1 client credentials (RFC 6749 §4.4; the client authenticated with HTTP Basic, §2.3.1), the
token sent as ``Authorization: Bearer`` (RFC 6750 §2.1) and renewed once after a 401 (§3.1). The caller's
own token never goes upstream (MCP authorization: no token passthrough).

:class:`UpstreamCredentials` holds the logic and the cached token, written once for both HTTP libraries:
the ``a2a`` backend's client is an ``httpx`` one (:class:`hivegate.backends.a2a.UpstreamAuth`), the MCP
SDK's is ``httpx2``, its fork (:class:`Httpx2UpstreamAuth`); their ``Auth`` classes and requests are
distinct types with the same protocol (a generator that yields requests and is sent their responses).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, Generator, Mapping, MutableMapping
from typing import Any, Protocol, TypeVar

import httpx2

from hivegate.agents.model import UpstreamOAuthSpec
from hivegate.errors import AgentServiceUnavailableError

__all__ = ["TOKEN_EARLY_SECONDS", "Httpx2UpstreamAuth", "UpstreamCredentials"]

logger = logging.getLogger(__name__)

TOKEN_EARLY_SECONDS = 30.0
"""An OAuth access token is renewed this long before it expires."""
_MAX_TOKEN_CHARS = 8192
_DEFAULT_LIFETIME_SECONDS = 3600.0
_MAX_LIFETIME_SECONDS = 86400 * 366


class _Request(Protocol):
    @property
    def headers(self) -> MutableMapping[str, str]: ...


class _Response(Protocol):
    @property
    def status_code(self) -> int: ...

    async def aread(self) -> bytes: ...


R = TypeVar("R", bound=_Request)
R_co = TypeVar("R_co", bound=_Request, covariant=True)


class _RequestFactory(Protocol[R_co]):
    """``httpx.Request`` or ``httpx2.Request`` (the class itself)."""

    def __call__(self, method: str, url: str, *, data: dict[str, str], headers: dict[str, str]) -> R_co: ...


class UpstreamCredentials:
    """The upstream's credentials: the static ``headers``, then an ``Authorization`` with a bearer token from
    the environment variable ``bearer_env``, or one obtained with OAuth client credentials (``oauth``), kept
    until :data:`TOKEN_EARLY_SECONDS` before it expires and renewed once after a 401.

    An unset environment variable, or a token endpoint that refuses (an HTTP error, no ``access_token`` of
    type ``Bearer``, a token that could not be a header value: control characters, over 8 KiB), raises
    :class:`AgentServiceUnavailableError`, logged with the agent id (the caller sees the catalogue's text
    only); a refused token is not kept. An ``expires_in`` that is not a number of seconds within a year
    counts as one hour.
    """

    def __init__(
        self,
        agent_id: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_env: str | None = None,
        oauth: UpstreamOAuthSpec | None = None,
    ) -> None:
        self._agent_id = agent_id
        self._headers = dict(headers or {})
        self._bearer_env = bearer_env
        self._oauth = oauth
        self._token: str | None = None
        self._expires_at = 0.0

    async def flow(self, request: R, new_request: _RequestFactory[R]) -> AsyncGenerator[R, _Response]:
        """An HTTP library's async auth flow for ``request`` (``new_request`` makes a token request of the
        library's type). Only a token endpoint's response is read here: the upstream's own responses (an
        SSE stream) reach the client unread.

        Raises:
            AgentServiceUnavailableError: as the class docstring says.
        """
        request.headers.update(self._headers)
        if self._bearer_env is not None:
            request.headers["Authorization"] = f"Bearer {self._secret(self._bearer_env)}"
            yield request
            return
        if self._oauth is None:
            yield request
            return
        if self._token is None or time.monotonic() >= self._expires_at:
            await self._renew((yield self._token_request(new_request)))
        request.headers["Authorization"] = f"Bearer {self._token}"
        response = yield request
        if response.status_code == 401:  # revoked, or expired early: one new token, one retry
            self._token = None
            await self._renew((yield self._token_request(new_request)))
            request.headers["Authorization"] = f"Bearer {self._token}"
            yield request

    def _secret(self, name: str) -> str:
        value = os.environ.get(name)
        if not value:
            logger.warning("agent %s: the environment variable %s is not set", self._agent_id, name)
            raise AgentServiceUnavailableError()
        return value

    def _token_request(self, new_request: _RequestFactory[R]) -> R:
        oauth = self._oauth
        assert oauth is not None  # only called with oauth set
        form = {"grant_type": "client_credentials"}
        if oauth.scope:
            form["scope"] = oauth.scope
        pair = f"{oauth.client_id}:{self._secret(oauth.client_secret_env)}".encode()
        headers = {"Accept": "application/json", "Authorization": f"Basic {base64.b64encode(pair).decode()}"}
        return new_request("POST", oauth.token_url, data=form, headers=headers)

    def _take_token(self, response: _Response, body: bytes) -> None:
        parsed: Any = None
        if response.status_code == 200:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        fields: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        token = fields.get("access_token")
        if (
            not isinstance(token, str)
            or not 0 < len(token) <= _MAX_TOKEN_CHARS
            or not (token.isprintable() and token.isascii())
            or str(fields.get("token_type", "")).lower() != "bearer"
        ):
            logger.warning(
                "agent %s: the upstream's token endpoint refused the client credentials (HTTP %s)",
                self._agent_id,
                response.status_code,
            )
            raise AgentServiceUnavailableError()
        expires_in = fields.get("expires_in")
        lifetime = _DEFAULT_LIFETIME_SECONDS
        if (
            isinstance(expires_in, int | float)
            and not isinstance(expires_in, bool)
            and 0 < expires_in < _MAX_LIFETIME_SECONDS
        ):
            lifetime = float(expires_in)
        self._token = token
        self._expires_at = time.monotonic() + max(lifetime - TOKEN_EARLY_SECONDS, lifetime / 2)

    async def _renew(self, response: _Response) -> None:
        self._take_token(response, await response.aread())


class Httpx2UpstreamAuth(httpx2.Auth):
    """:class:`UpstreamCredentials` as an ``httpx2`` auth (the MCP SDK's HTTP client: ``auth=``)."""

    def __init__(self, credentials: UpstreamCredentials) -> None:
        self._credentials = credentials

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response]:
        raise RuntimeError("the mcp backend's HTTP client is asynchronous")  # pragma: no cover

    def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        return self._credentials.flow(request, httpx2.Request)
