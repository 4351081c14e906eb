"""Credential resolution: from a request's headers to a :class:`~hivegate.auth.principal.Principal`.

Accepted credentials, in the order they are recognised (product surface §2.4):

1. an OAuth access token from hivegate's authorization server (``Authorization: Bearer <jwt>``);
2. a user key ``oag_…`` (``Authorization: Bearer oag_…``);
3. an agent key ``bak_…`` (``Authorization: Bearer bak_…`` or ``X-Agent-API-Key: bak_…``).

Two different credentials in one request are refused (401); the same ``bak_`` key in both
headers is one credential. Everything that is not exactly an ``oag_``/``bak_`` key is tried
as an access token. The audience and the target agent are checked by the caller
(:mod:`hivegate.auth.gate`), which knows the endpoint.

Lookups are cached for ``security.credential_cache_seconds`` (default 1 s), so a revocation
made by another process takes effect within that time; only successful resolutions are cached.

When the database fails, resolution raises :class:`~hivegate.errors.StoreUnavailableError`
(503 ``store_unavailable``), never a 401: the credential may well be valid. Requests waiting on
the same lookup share that answer instead of each asking the failing database again. Recording
a key's ``last_used_at`` is bookkeeping: a database that refuses that write does not fail the
request.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime

import anyio

from hivegate.auth.api_keys import AGENT_KEY_PREFIX, KeyKind, parse_api_key
from hivegate.auth.principal import CredentialKind, Principal, agent_scope
from hivegate.auth.tokens import InvalidAccessToken, TokenCodec
from hivegate.errors import AuthenticationError, StoreUnavailableError
from hivegate.storage.credentials import CredentialStore
from hivegate.storage.oauth import OAuthStore

__all__ = ["CredentialResolver", "presented_credential"]

logger = logging.getLogger(__name__)

MAX_CREDENTIAL_LENGTH = 8192
"""Longest credential header value looked at (access tokens are well under 2 KiB); longer is refused unread."""

_OWS = " \t"
"""Optional whitespace around a field value (RFC 9110 §5.6.3); nothing else is stripped."""

_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750 §2.1 ``b64token``: what a bearer credential may contain."""

_MAX_CACHE_ENTRIES = 10_000
_TOUCH_INTERVAL_SECONDS = 60.0
"""``last_used_at`` is written at most once a minute per key (not on every request)."""


def presented_credential(headers: Iterable[tuple[str, str]]) -> str | None:
    """The one credential in ``headers`` (lower-case names, decoded values), or None when there is none.

    Raises:
        AuthenticationError: ``invalid_request`` when the ``Authorization`` header is not
            ``Bearer <token>``, when a header is repeated with different values, or when two
            different credentials are sent (RFC 6750 §2: one method per request).
    """
    found: set[str] = set()
    for name, value in headers:
        if name == "authorization":
            if len(value) > MAX_CREDENTIAL_LENGTH:
                raise AuthenticationError("the Authorization header is too long", oauth_error="invalid_request")
            scheme, _, token = value.strip(_OWS).partition(" ")
            token = token.strip(_OWS)
            if scheme.lower() != "bearer" or _TOKEN68.fullmatch(token) is None:
                raise AuthenticationError(
                    "the Authorization header must be 'Bearer <token>'", oauth_error="invalid_request"
                )
            found.add(token)
        elif name == "x-agent-api-key":
            token = value.strip(_OWS)
            if len(token) > MAX_CREDENTIAL_LENGTH or not token.startswith(AGENT_KEY_PREFIX):
                raise AuthenticationError("X-Agent-API-Key takes a bak_ agent key", oauth_error="invalid_request")
            found.add(token)
    if len(found) > 1:
        raise AuthenticationError(
            "send one credential per request (two different credentials were sent)", oauth_error="invalid_request"
        )
    return found.pop() if found else None


class _Flight:
    """One credential lookup in progress, awaited by every other request presenting that credential."""

    __slots__ = ("done", "error", "outage", "principal")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.principal: Principal | None = None
        self.error: AuthenticationError | None = None
        self.outage: StoreUnavailableError | None = None


class CredentialResolver:
    """Resolve the credential of a request against the credential and OAuth stores."""

    def __init__(
        self, *, credentials: CredentialStore, oauth: OAuthStore, codec: TokenCodec, cache_seconds: float = 1.0
    ) -> None:
        self._credentials = credentials
        self._oauth = oauth
        self._codec = codec
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._inflight: dict[str, _Flight] = {}
        self._touched: dict[str, float] = {}

    async def resolve(self, headers: Iterable[tuple[str, str]]) -> Principal | None:
        """The principal behind the request's credential; None when the request carries none.

        An OAuth principal's ``audience`` is set from the token; key principals have none.

        Raises:
            AuthenticationError: malformed or ambiguous headers (``invalid_request``), or a
                credential that is unknown, revoked, expired, forged, issued by another issuer,
                or whose user is disabled (``invalid_token``).
            StoreUnavailableError: the database failed or did not answer in time (503).
        """
        credential = presented_credential(headers)
        if credential is None:
            return None
        cache_key = hashlib.sha256(credential.encode()).hexdigest()
        now = time.monotonic()
        cached = self._cache.get(cache_key)
        if cached is not None and cached[0] > now:
            principal = cached[1]
            if principal.expires_at is None or principal.expires_at > time.time():
                return principal
        flight = self._inflight.get(cache_key)
        if flight is not None:
            # Single flight: when a cache entry expires under load, one lookup serves every request
            # for that credential instead of each going to the database at once.
            await flight.done.wait()
            if flight.error is not None:  # a fresh error per request: the gate adds per-path headers
                raise AuthenticationError(flight.error.message, oauth_error=flight.error.oauth_error)
            if flight.outage is not None:  # the database just failed this lookup: do not ask it again
                raise StoreUnavailableError(database=flight.outage.database, reason=flight.outage.reason)
            if flight.principal is not None:
                return flight.principal
            # the leader was cancelled or failed otherwise: look it up ourselves
        flight = _Flight()
        self._inflight[cache_key] = flight
        try:
            principal = await self._lookup(credential)
            flight.principal = principal
        except AuthenticationError as exc:
            flight.error = exc
            raise
        except StoreUnavailableError as exc:
            flight.outage = exc
            raise
        finally:
            del self._inflight[cache_key]
            flight.done.set()
        if self._cache_seconds > 0:
            if len(self._cache) >= _MAX_CACHE_ENTRIES:
                self._cache.clear()
            self._cache[cache_key] = (now + self._cache_seconds, principal)
        return principal

    async def _lookup(self, credential: str) -> Principal:
        key = parse_api_key(credential)
        if key is not None:
            return await self._resolve_key(key.kind, key.digest)
        if credential.startswith(("oag_", "bak_")):
            raise AuthenticationError("the API key is malformed", oauth_error="invalid_token")
        return await self._resolve_token(credential)

    async def _resolve_key(self, kind: KeyKind, digest: str) -> Principal:
        record = await self._credentials.get_api_key_by_hash(digest)
        if record is None or not record.active:
            raise AuthenticationError("the API key is unknown or revoked", oauth_error="invalid_token")
        user = await self._credentials.get_user(record.user_id)
        if user is None or user.disabled:
            raise AuthenticationError("the API key's user is disabled", oauth_error="invalid_token")
        await self._touch(record.id)
        agents: frozenset[str] | None = None  # a user key reaches all of its user's agents
        if kind is not KeyKind.USER:
            agents = frozenset({record.agent_id}) if record.agent_id is not None else frozenset[str]()
        return Principal(
            kind=CredentialKind.USER_KEY if kind is KeyKind.USER else CredentialKind.AGENT_KEY,
            user_id=user.id,
            username=user.username,
            agents=agents,
            credential_id=record.id,
        )

    async def _resolve_token(self, token: str) -> Principal:
        try:
            claims = self._codec.verify(token)
        except InvalidAccessToken as exc:
            raise AuthenticationError(str(exc), oauth_error="invalid_token") from None
        grant = await self._oauth.get_grant(claims.grant_id)
        if grant is None or not grant.active or grant.user_id != claims.subject or grant.client_id != claims.client_id:
            raise AuthenticationError("the access token has been revoked", oauth_error="invalid_token")
        user = await self._credentials.get_user(claims.subject)
        if user is None or user.disabled:
            raise AuthenticationError("the access token's user is disabled", oauth_error="invalid_token")
        granted = {agent_scope(agent): agent for agent in grant.agents}
        agents = frozenset(granted[scope] for scope in claims.scopes if scope in granted)
        return Principal(
            kind=CredentialKind.OAUTH,
            user_id=user.id,
            username=user.username,
            client_id=claims.client_id,
            agents=agents,
            scopes=claims.scopes,
            credential_id=claims.jti,
            grant_id=claims.grant_id,
            audience=claims.audience,
            expires_at=claims.expires_at,
        )

    async def _touch(self, key_id: str) -> None:
        """Record a use of the key, at most once per :data:`_TOUCH_INTERVAL_SECONDS` per process."""
        now = time.monotonic()
        last = self._touched.get(key_id)
        if last is not None and now - last < _TOUCH_INTERVAL_SECONDS:
            return
        if len(self._touched) >= _MAX_CACHE_ENTRIES:
            self._touched.clear()
        self._touched[key_id] = now
        try:
            await self._credentials.touch_api_key(key_id, datetime.now(UTC))
        except StoreUnavailableError as exc:  # the key was read: serve the request, retry the write later
            logger.debug("could not record the use of key %s: %s", key_id, exc)
