"""The OAuth provider behind hivegate's authorization server: clients, codes, grants and tokens.

:class:`GatewayOAuthProvider` implements the official SDK's ``OAuthAuthorizationServerProvider``
over the :class:`~hivegate.storage.oauth.OAuthStore`: registered and metadata-document clients
(RFC 7591, CIMD), pending authorization requests, single-use codes (RFC 6749 §4.1.2), grants as
refresh-token families with rotation, a retry grace window and reuse detection (OAuth 2.1 §4.3.1,
RFC 9700 §4.14.2), RFC 8707 resources as audiences, and HS256 access tokens
(:class:`~hivegate.auth.tokens.TokenCodec`).

Refresh-token successors are derived, not drawn: the token that replaces ``T`` is
``base64url(HMAC-SHA256(k, T))`` with ``k`` derived from ``security.token_signing_key`` under a
fixed label. Only digests are stored, yet a retry of ``T`` within
``security.refresh_reuse_grace_seconds`` can be answered with the very successor already issued
(docs/auth.md, "Refresh-token rotation"). Without the key nobody can compute a successor, so
rotation still means a stolen token is good for one exchange at most.
The HTTP side (routes, pages, metadata) is :mod:`hivegate.auth.oauth.server` and the modules it builds.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast
from urllib.parse import urlencode

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthToken,
)
from pydantic import AnyUrl, ConfigDict, TypeAdapter

from hivegate.agents.model import AGENT_ID_PATTERN
from hivegate.auth.oauth.cimd import ClientMetadataError, ClientMetadataResolver, is_client_metadata_url
from hivegate.auth.oauth.clients import GatewayClient, client_name_problem
from hivegate.auth.oauth.pending import MAX_SEALED_LENGTH, PendingRequests
from hivegate.auth.oauth.pkce import is_s256_challenge
from hivegate.auth.oauth.redirects import RedirectPolicy
from hivegate.auth.principal import agent_scope
from hivegate.auth.tokens import InvalidAccessToken, TokenCodec
from hivegate.auth.urls import agent_resource
from hivegate.settings import Settings
from hivegate.storage.credentials import CredentialStore, User, new_id
from hivegate.storage.oauth import (
    AuthorizationCodeRecord,
    AuthorizationRequestRecord,
    GrantRecord,
    OAuthClientRecord,
    OAuthStore,
    RefreshTokenRecord,
)

__all__ = [
    "AGENT_ID_RE",
    "BROWSER_COOKIE",
    "FORM_BODY_LIMIT",
    "MAX_FORM_FIELDS",
    "REQUEST_ID_RE",
    "GatewayOAuthProvider",
    "client_name_problem",
    "secret_digest",
    "token_request_resources",
    "utc_now",
    "with_params",
]

logger = logging.getLogger(__name__)

BROWSER_COOKIE = "hivegate_oauth_browser"
"""The random cookie that ties a sign-in to one browser (its SHA-256 is stored with the request)."""

AGENT_ID_RE = re.compile(AGENT_ID_PATTERN)
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_URL = TypeAdapter(AnyUrl, config=ConfigDict(url_preserve_empty_path=True))
FORM_BODY_LIMIT = 64 * 1024
MAX_FORM_FIELDS = 2000
_MAX_STATE_LENGTH = 2048
_SUCCESSOR_LABEL = b"hivegate oauth refresh token successor v1"

token_request_resources: ContextVar[tuple[str, ...]] = ContextVar("hivegate_token_request_resources", default=())
"""The ``resource`` values of the token request being served (SDK quirk 4: its handler drops them)."""


def secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def utc_now() -> datetime:
    return datetime.now(UTC)


def with_params(uri: str, params: dict[str, str | None]) -> str:
    """``uri`` with ``params`` (None values left out) appended to its query, its own query kept as written."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{uri}{'&' if '?' in uri else '?'}{query}" if query else uri


class _Code(AuthorizationCode):
    code_hash: str
    user_id: str
    agents: list[str]


class _Refresh(RefreshToken):
    token_hash: str
    grant_id: str
    user_id: str


class _Access(AccessToken):
    grant_id: str


@dataclass(frozen=True, slots=True)
class _Resource:
    """One of this gateway's resource URLs: the user-level endpoint (``agent_id`` None) or an agent's."""

    url: str
    agent_id: str | None
    alias: bool = False


class GatewayOAuthProvider(OAuthAuthorizationServerProvider[_Code, _Refresh, _Access]):
    """The SDK provider over hivegate's stores: clients (DCR and CIMD), pending requests, codes, grants, tokens.

    ``authorize`` seals the request (:class:`~hivegate.auth.oauth.pending.PendingRequests`,
    nothing stored) and sends the browser to the sign-in page; the code is minted by the consent
    page (:class:`AuthorizationServer`). A code is redeemed in the transaction that creates its
    grant, so of concurrent redemptions one wins; every other one, and any later replay, revokes
    the grant the code produced (RFC 6749 §4.1.2), on any replica and after restarts.

    ``clock`` gives the current aware UTC time (tests pass a fake one).
    """

    def __init__(
        self,
        *,
        settings: Settings,
        base_url: str,
        credentials: CredentialStore,
        store: OAuthStore,
        codec: TokenCodec,
        client_metadata: ClientMetadataResolver | None,
        login_path: str,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.clock = clock
        self._settings = settings
        self._base = base_url
        self._credentials = credentials
        self._store = store
        self._codec = codec
        self._resolver = client_metadata
        self._login_path = login_path
        self.redirect_policy = RedirectPolicy(settings.security.allowed_redirect_uris)
        """The redirect URIs clients may register (``security.allowed_redirect_uris``)."""
        key = settings.security.token_signing_key.get_secret_value().encode()
        self.pending = PendingRequests(key, settings.security.authorization_request_ttl_seconds)
        self._successor_key = hmac.new(key, _SUCCESSOR_LABEL, hashlib.sha256).digest()

    # -- clients ---------------------------------------------------------------------------

    def is_metadata_client(self, client_id: str) -> bool:
        """Whether ``client_id`` is a metadata-document URL handled by the CIMD resolver."""
        return self._resolver is not None and is_client_metadata_url(client_id, allow_http=True)

    async def find_client(self, client_id: str) -> tuple[OAuthClientInformationFull | None, str | None]:
        """The client and, when there is none, why (a message fit for an error page)."""
        if self._resolver is not None and self.is_metadata_client(client_id):
            try:
                info = await self._resolver.resolve(client_id)
            except ClientMetadataError as exc:
                return None, f"The client's metadata document could not be used: {exc}"
            problem = client_name_problem(info.client_name)
            if problem is not None:
                return None, f"The client's metadata document could not be used: {problem}"
            return GatewayClient.model_validate(info.model_dump()), None
        if not client_id or len(client_id) > 256:
            return None, "Unknown client."
        record = await self._store.get_client(client_id)
        if record is None:
            return None, "Unknown client."
        return GatewayClient.model_validate(record.metadata), None

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or the one described by the metadata document at a URL ``client_id``; else None."""
        client, _ = await self.find_client(client_id)
        return client

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        """Store a DCR client after checking every redirect URI against hivegate's policy.

        Raises:
            RegistrationError: ``invalid_redirect_uri`` (none given, or one refused by the policy).
        """
        if not client_info.redirect_uris:
            raise RegistrationError("invalid_redirect_uri", "redirect_uris must list at least one URI")
        problem = client_name_problem(client_info.client_name)
        if problem is not None:
            raise RegistrationError("invalid_client_metadata", problem)
        for uri in client_info.redirect_uris:
            problem = self.redirect_uri_problem(str(uri))
            if problem is not None:
                raise RegistrationError("invalid_redirect_uri", problem)
        metadata = client_info.model_dump(mode="json", exclude_none=True)
        await self._store.save_client(OAuthClientRecord(client_info.client_id, metadata, utc_now()))

    def redirect_uri_problem(self, uri: str) -> str | None:
        """Why ``uri`` may not be registered (:attr:`redirect_policy`), or None when it may."""
        try:
            self.redirect_policy.check(uri)
        except ValueError as exc:
            return str(exc)
        return None

    def registration_redirect_problem(self, body: bytes) -> str | None:
        """Why the raw ``redirect_uris`` of an RFC 7591 registration body may not be registered, or None.

        The SDK parses the body into URL objects, which normalise (``/a/../cb`` becomes ``/cb``,
        ``0x7f.1`` becomes ``127.0.0.1``); this looks at the strings as the client sent them.
        A body that is not a JSON object with a list of strings is left to the SDK's handler.
        Spec: RFC 7591 §3.2.2 (``invalid_redirect_uri``).
        """
        try:
            document: object = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(document, dict):
            return None
        uris = cast(dict[str, object], document).get("redirect_uris")
        if not isinstance(uris, list):
            return None
        for index, uri in enumerate(cast(list[object], uris)):
            problem = self.redirect_uri_problem(uri) if isinstance(uri, str) else None
            if problem is not None:
                return f"redirect_uris[{index}]: {problem}"
        return None

    # -- authorization ---------------------------------------------------------------------

    def parse_resource(self, resource: str) -> _Resource | None:
        """The gateway resource ``resource`` names, or None when it is none of ours."""
        prefix = f"{self._base}/"
        if not resource.startswith(prefix):
            return None
        parts = resource[len(prefix) :].split("/")
        if parts == ["mcp"]:
            return _Resource(resource, None)
        if len(parts) == 2 and parts[1] == "mcp" and AGENT_ID_RE.fullmatch(parts[0]):
            return _Resource(resource, parts[0])
        if len(parts) == 3 and parts[0] == "agents" and parts[2] == "mcp" and AGENT_ID_RE.fullmatch(parts[1]):
            return _Resource(resource, parts[1], alias=True)
        return None

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Seal the request and return the sign-in page's URL (``{base path}/oauth/login?request=<sealed>``).

        Nothing is stored: the request is kept in the database only once a user has signed in.

        Raises:
            AuthorizeError: ``invalid_request`` for a code challenge that is not an S256 value, an
                oversized ``state``, or a request that seals longer than ``MAX_SEALED_LENGTH``;
                ``invalid_target`` for a ``resource`` that is not one of this gateway's MCP endpoints
                (RFC 8707 §2).
        """
        if not is_s256_challenge(params.code_challenge):
            raise AuthorizeError("invalid_request", "code_challenge must be a BASE64URL SHA-256 value (S256)")
        if params.state is not None and len(params.state) > _MAX_STATE_LENGTH:
            raise AuthorizeError("invalid_request", "state is too long")
        if params.resource is not None and self.parse_resource(params.resource) is None:
            raise AuthorizeError("invalid_target", "resource is not an MCP endpoint of this server")
        sealed = self.pending.seal(
            client_id=client.client_id,
            redirect_uri=str(params.redirect_uri),
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            state=params.state,
            scopes=tuple(params.scopes or ()),
            code_challenge=params.code_challenge,
            resource=params.resource,
            now=self.clock(),
        )
        if len(sealed) > MAX_SEALED_LENGTH:
            raise AuthorizeError("invalid_request", "the authorization request is too large")
        return f"{self._login_path}?{urlencode({'request': sealed})}"

    async def issue_code(self, request: AuthorizationRequestRecord, user_id: str, agents: Sequence[str]) -> str:
        """Mint and store a code (256 bits) for the consented ``agents``; returns the plaintext code."""
        code = secrets.token_urlsafe(32)
        ttl = self._settings.security.authorization_code_ttl_seconds
        await self._store.save_code(
            AuthorizationCodeRecord(
                code_hash=secret_digest(code),
                client_id=request.client_id,
                user_id=user_id,
                redirect_uri=request.redirect_uri,
                redirect_uri_provided_explicitly=request.redirect_uri_provided_explicitly,
                code_challenge=request.code_challenge,
                scopes=tuple(agent_scope(agent) for agent in agents),
                agents=tuple(agents),
                resource=request.resource,
                expires_at=self.clock() + timedelta(seconds=ttl),
            )
        )
        return code

    # -- token endpoint --------------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> _Code | None:
        """The unredeemed code, or None; presenting a redeemed code revokes the grant it produced.

        Nothing is spent here: the code is redeemed by :meth:`exchange_authorization_code`, in one
        transaction with its grant, after the SDK's checks (client, expiry, ``redirect_uri``, PKCE).
        Spec: RFC 6749 §4.1.2 and §10.5.
        """
        code_hash = secret_digest(authorization_code)
        record = await self._store.get_code(code_hash)
        if record is None:
            return None
        if record.grant_id is not None:
            logger.warning("authorization code replayed; revoking grant %s", record.grant_id)
            await self._store.revoke_grant(record.grant_id, self.clock())
            return None
        return _Code(
            code=authorization_code,
            scopes=list(record.scopes),
            expires_at=record.expires_at.timestamp(),
            client_id=record.client_id,
            code_challenge=record.code_challenge,
            redirect_uri=AnyUrl(record.redirect_uri),
            redirect_uri_provided_explicitly=record.redirect_uri_provided_explicitly,
            resource=record.resource,
            subject=record.user_id,
            code_hash=code_hash,
            user_id=record.user_id,
            agents=list(record.agents),
        )

    def _requested_resource(self, bound: str | None) -> str | None:
        """The token request's ``resource`` (RFC 8707 §2.2), checked against the one the grant is bound to."""
        resources = token_request_resources.get()
        if len(set(resources)) > 1:
            raise TokenError("invalid_target", "ask for one resource per token request")
        requested = resources[0] if resources else None
        if requested is not None and bound is not None and requested != bound:
            raise TokenError("invalid_target", "resource differs from the one the authorization was granted for")
        return requested if requested is not None else bound

    def audience(self, agents: Sequence[str], resource: str | None) -> list[str]:
        """The ``aud`` of a token for ``agents`` asked for ``resource``.

        Raises:
            TokenError: ``invalid_target`` when ``resource`` is neither the user-level endpoint nor
                an endpoint (canonical or alias) of a granted agent.
        """
        audience = [agent_resource(self._base, agent) for agent in agents]
        if resource is None:
            return audience
        target = self.parse_resource(resource)
        if target is None or (target.agent_id is not None and target.agent_id not in agents):
            raise TokenError("invalid_target", "resource is not an MCP endpoint of an agent in this grant")
        if resource not in audience:
            audience.append(resource)
        return audience

    async def _active_user(self, user_id: str) -> User:
        user = await self._credentials.get_user(user_id)
        if user is None or user.disabled:
            raise TokenError("invalid_grant", "the user who granted access is disabled or gone")
        return user

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: _Code
    ) -> OAuthToken:
        """Redeem the code: create the grant and its first refresh token (if the client may refresh) in one
        transaction, then mint an access token.

        Of concurrent redemptions of one code exactly one succeeds; the others get ``invalid_grant``
        and revoke the grant the winner created (RFC 6749 §4.1.2).

        Raises:
            TokenError: ``invalid_target`` (see :meth:`audience`); ``invalid_grant`` for a disabled user
                or a code redeemed already.
        """
        code = authorization_code
        resource = self._requested_resource(code.resource)
        audience = self.audience(code.agents, resource)
        user = await self._active_user(code.user_id)
        now = self.clock()
        grant = GrantRecord(
            id=new_id("grt"),
            user_id=user.id,
            client_id=client.client_id,
            client_name=client.client_name,
            agents=tuple(code.agents),
            scopes=tuple(code.scopes),
            resource=resource,
            created_at=now,
        )
        refresh = secrets.token_urlsafe(32) if self._may_refresh(client) else None
        record = self._refresh_record(refresh, client, grant, now) if refresh is not None else None
        if not await self._store.redeem_code(code.code_hash, grant, record, now):
            logger.warning("authorization code redeemed twice; the grant it produced is revoked")
            raise TokenError("invalid_grant", "the authorization code was already used; its grant is revoked")
        return self._token(grant, user.id, code.scopes, audience, refresh)

    @staticmethod
    def _may_refresh(client: OAuthClientInformationFull) -> bool:
        return "refresh_token" in client.grant_types

    def _refresh_record(
        self, token: str, client: OAuthClientInformationFull, grant: GrantRecord, now: datetime
    ) -> RefreshTokenRecord:
        return RefreshTokenRecord(
            token_hash=secret_digest(token),
            grant_id=grant.id,
            client_id=client.client_id,
            user_id=grant.user_id,
            scopes=grant.scopes,
            resource=grant.resource,
            created_at=now,
            expires_at=now + timedelta(seconds=self._settings.security.refresh_token_ttl_seconds),
        )

    def successor(self, refresh_token: str) -> str:
        """The refresh token that replaces ``refresh_token`` at rotation: 43 base64url characters (256 bits).

        ``base64url(HMAC-SHA256(k, refresh_token))``, ``k`` derived from the signing key: the same
        every time for one token (so a retry gets the successor already issued, nothing stored in
        plaintext), unpredictable without the key.
        """
        mac = hmac.new(self._successor_key, refresh_token.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def _token(
        self, grant: GrantRecord, user_id: str, scopes: Sequence[str], audience: Sequence[str], refresh: str | None
    ) -> OAuthToken:
        access, claims = self._codec.mint(
            subject=user_id, audience=audience, client_id=grant.client_id, scopes=scopes, grant_id=grant.id
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=claims.expires_at - claims.issued_at,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> _Refresh | None:
        """The refresh token by its digest, rotated or not (rotation is checked on exchange)."""
        record = await self._store.get_refresh_token(secret_digest(refresh_token))
        if record is None:
            return None
        return _Refresh(
            token=refresh_token,
            client_id=record.client_id,
            scopes=list(record.scopes),
            expires_at=int(record.expires_at.timestamp()),
            resource=record.resource,
            subject=record.user_id,
            token_hash=record.token_hash,
            grant_id=record.grant_id,
            user_id=record.user_id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: _Refresh, scopes: list[str]
    ) -> OAuthToken:
        """Rotate the refresh token and mint an access token for ``scopes`` (⊆ the grant's).

        Rotation is one transaction (the token is spent and its successor stored together), so a
        crash loses no grant. A token rotated no more than ``security.refresh_reuse_grace_seconds``
        ago whose successor is still unused is a retry (a lost response, or the client racing its
        own refreshes): it gets that same successor again with a fresh access token, and nothing
        is written. Any other reuse revokes the grant. Spec: OAuth 2.1 §4.3.1, RFC 9700 §4.14.2,
        RFC 6749 §10.4.

        Raises:
            TokenError: ``invalid_grant`` for a revoked grant, a disabled user, or a reused
                (already rotated) token outside the grace — which also revokes the whole grant;
                ``invalid_target`` for a ``resource`` other than the grant's; ``invalid_scope``
                for no agent scope.
        """
        grant = await self._store.get_grant(refresh_token.grant_id)
        if grant is None or not grant.active or grant.client_id != client.client_id:
            raise TokenError("invalid_grant", "the grant has been revoked")
        user = await self._active_user(refresh_token.user_id)
        resource = self._requested_resource(grant.resource)
        agents = [agent for agent in grant.agents if agent_scope(agent) in scopes]
        if not agents:
            raise TokenError("invalid_scope", "ask for at least one agent scope of the grant")
        if resource is not None and not token_request_resources.get():
            # a narrower scope without the bound agent: the bound resource is left out, not an error
            target = self.parse_resource(resource)
            if target is not None and target.agent_id is not None and target.agent_id not in agents:
                resource = None
        audience = self.audience(agents, resource)
        now = self.clock()
        refresh = self.successor(refresh_token.token)
        successor = self._refresh_record(refresh, client, grant, now)
        if not await self._store.rotate_refresh_token(refresh_token.token_hash, successor, now):
            if not await self._is_retry(refresh_token, successor.token_hash, now):
                logger.warning("refresh token reused; revoking grant %s", grant.id)
                await self._store.revoke_grant(grant.id, now)
                raise TokenError("invalid_grant", "the refresh token was already used; the grant is revoked")
            logger.info("refresh token retried within the grace window; grant %s", grant.id)
        return self._token(grant, user.id, [agent_scope(agent) for agent in agents], audience, refresh)

    async def _is_retry(self, refresh_token: _Refresh, successor_hash: str, now: datetime) -> bool:
        """Whether a rotated token presented again is a retry: rotated within the grace, successor still unused."""
        grace = timedelta(seconds=self._settings.security.refresh_reuse_grace_seconds)
        rotated = await self._store.get_refresh_token(refresh_token.token_hash)
        if not grace or rotated is None or rotated.rotated_at is None or now - rotated.rotated_at > grace:
            return False
        successor = await self._store.get_refresh_token(successor_hash)
        return successor is not None and successor.rotated_at is None and successor.grant_id == refresh_token.grant_id

    async def load_access_token(self, token: str) -> _Access | None:
        """A valid access token of this issuer whose grant is still active, or None."""
        try:
            claims = self._codec.verify(token)
        except InvalidAccessToken:
            return None
        grant = await self._store.get_grant(claims.grant_id)
        if grant is None or not grant.active:
            return None
        return _Access(
            token=token,
            client_id=claims.client_id,
            scopes=list(claims.scopes),
            expires_at=claims.expires_at,
            subject=claims.subject,
            claims={"iss": self._codec.issuer, "aud": list(claims.audience), "jti": claims.jti},
            grant_id=claims.grant_id,
        )

    async def revoke_token(self, token: _Access | _Refresh) -> None:
        """Revoke the grant the token belongs to (every access and refresh token of it)."""
        await self._store.revoke_grant(token.grant_id, self.clock())

    async def revoke_presented(self, client: OAuthClientInformationFull, token: str) -> bool:
        """Revoke the grant of ``token`` (a refresh or access token) when it was issued to ``client``.

        Returns whether a grant was revoked; unknown tokens and other clients' tokens are ignored (RFC 7009 §2.2).
        """
        record = await self._store.get_refresh_token(secret_digest(token))
        grant_id: str | None = None
        if record is not None:
            if record.client_id == client.client_id:
                grant_id = record.grant_id
        else:
            try:
                claims = self._codec.verify(token)
            except InvalidAccessToken:
                claims = None
            if claims is not None and claims.client_id == client.client_id:
                grant_id = claims.grant_id
        if grant_id is None:
            return False
        await self._store.revoke_grant(grant_id, self.clock())
        return True
