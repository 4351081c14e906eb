"""hivegate's OAuth 2.1 authorization server for its MCP endpoints (MCP authorization 2025-11-25 and 2026-07-28).

Endpoints (paths relative to the gateway's public URL, which is also the issuer, byte for byte):

``GET /.well-known/oauth-authorization-server``
    RFC 8414 metadata: S256 only (RFC 7636), ``none`` among the token and revocation endpoint
    auth methods (public clients), ``authorization_response_iss_parameter_supported`` (RFC 9207),
    ``client_id_metadata_document_supported`` when a CIMD resolver is configured. CORS ``*``.
``GET /.well-known/oauth-protected-resource/{agentId}/mcp``, ``…/agents/{agentId}/mcp``, ``…/mcp``
    RFC 9728 protected-resource metadata; ``resource`` is the endpoint URL exactly. Served for every
    syntactically valid agent id, existing or not (existence does not leak); other ids 404.
``POST /oauth/register``
    RFC 7591 dynamic client registration (the SDK's handler) with hivegate's redirect-URI policy
    (:func:`~hivegate.auth.oauth.redirects.check_redirect_uri`; refusal: 400 ``invalid_redirect_uri``).
``GET|POST /oauth/authorize``
    RFC 6749 §4.1.1 with PKCE S256 mandatory (RFC 7636 §4.3, OAuth 2.1 §4.1.1) and exact
    ``redirect_uri`` match; RFC 8707 ``resource``. An unknown client or unregistered redirect URI
    gets an HTML error page (400), never a redirect (RFC 6749 §4.1.2.1, no open redirect); other
    errors redirect to the registered URI with ``error``, ``state`` and ``iss`` (RFC 9207 §2).
    Success: 302 to ``/oauth/login?request=<id>``.
``GET|POST /oauth/login``
    The sign-in form; throttled per username and per client address (429 + ``Retry-After``).
    Success: a ``HttpOnly; SameSite=Lax`` browser cookie bound to the request, 303 to the consent page.
``GET|POST /oauth/consent``
    The user's MCP-enabled agents as checkboxes; CSRF-checked. Allow: a single-use code (120 s) and
    303 to ``redirect_uri`` with ``code``, ``state``, ``iss``; Deny: ``error=access_denied``.
``POST /oauth/token``
    RFC 6749 §4.1.3 / §6 (the SDK's handler: client authentication, PKCE verification per RFC 7636
    §4.6, ``redirect_uri`` check). ``resource`` (RFC 8707 §2.2) becomes the access token's audience;
    refresh tokens rotate on every use and reuse of a rotated one revokes its whole grant
    (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2).
``POST /oauth/revoke``
    RFC 7009; public clients need no secret. Revoking an access or refresh token revokes its grant.

Access tokens are HS256 JWTs (:class:`~hivegate.auth.tokens.TokenCodec`), ``aud`` = the granted
agents' endpoint URLs (plus the user-level or alias URL the client asked for).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
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
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.auth import (
    InvalidRedirectUriError,
    InvalidScopeError,
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl, ConfigDict, TypeAdapter, ValidationError
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route, request_response
from starlette.types import ASGIApp

from hivegate.agents.model import AGENT_ID_PATTERN, AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.oauth.cimd import ClientMetadataError, ClientMetadataResolver, is_client_metadata_url
from hivegate.auth.oauth.pages import PAGE_HEADERS, AgentChoice, ClientView, CsrfTokens, Pages
from hivegate.auth.oauth.redirects import LOOPBACK_REDIRECT_HOSTS, check_redirect_uri
from hivegate.auth.oauth.throttle import LoginThrottle
from hivegate.auth.passwords import hash_password, verify_password
from hivegate.auth.principal import agent_scope
from hivegate.auth.tokens import InvalidAccessToken, TokenCodec
from hivegate.auth.urls import agent_resource, user_resource
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

__all__ = ["BROWSER_COOKIE", "AuthorizationServer", "GatewayOAuthProvider"]

logger = logging.getLogger(__name__)

BROWSER_COOKIE = "hivegate_oauth_browser"
"""The random cookie that ties a sign-in to one browser (its SHA-256 is stored with the request)."""

_AGENT_ID = re.compile(AGENT_ID_PATTERN)
_AGENT_SCOPE = re.compile(r"agent:[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")
_URL = TypeAdapter(AnyUrl, config=ConfigDict(url_preserve_empty_path=True))
_FORM_BODY_LIMIT = 64 * 1024
_MAX_FORM_FIELDS = 2000
_MAX_STATE_LENGTH = 2048
_MAX_REDEEMED_CODES = 100_000
_IGNORED_SCOPES = frozenset({"offline_access"})
"""Asked for by some clients; refresh tokens come with every grant, so it adds nothing."""

_token_request_resources: ContextVar[tuple[str, ...]] = ContextVar("hivegate_token_request_resources", default=())
"""The ``resource`` values of the token request being served (SDK quirk 4: its handler drops them)."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def _with_params(uri: str, params: dict[str, str | None]) -> str:
    """``uri`` with ``params`` (None values left out) appended to its query, its own query kept as written."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{uri}{'&' if '?' in uri else '?'}{query}" if query else uri


class _GatewayClient(OAuthClientInformationFull):
    """A client as the SDK handlers see it; scopes are hivegate's ``agent:{id}``, whatever the client registered.

    The user picks the agents at consent, so a requested scope only pre-selects an agent:
    any syntactically valid ``agent:{id}`` is accepted (existing or not, so existence does not
    leak), ``offline_access`` is ignored, anything else is ``invalid_scope``.
    """

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        if requested_scope is None:
            return None
        scopes: list[str] = []
        for scope in requested_scope.split():
            if scope in _IGNORED_SCOPES:
                continue
            if _AGENT_SCOPE.fullmatch(scope) is None:
                raise InvalidScopeError(f"unknown scope {scope!r}: this server grants agent:<agentId> scopes")
            if scope not in scopes:
                scopes.append(scope)
        return scopes

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        """The SDK's exact match, except that a loopback ``http`` redirect URI matches on any port.

        Spec: RFC 8252 §7.3 ("The authorization server MUST allow any port to be specified at the
        time of the request for loopback IP redirect URIs"); OAuth 2.1 §8.4.2. Scheme, host, path
        and query must still be identical, so nothing can redirect off the user's machine.
        """
        if redirect_uri is not None and redirect_uri.fragment is None and _is_loopback_http(redirect_uri):
            for registered in self.redirect_uris or ():
                if _is_loopback_http(registered) and _without_port(registered) == _without_port(redirect_uri):
                    return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


MAX_CLIENT_NAME_LENGTH = 200
"""Longest ``client_name`` accepted (it is shown on the sign-in and consent pages)."""

_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def client_name_problem(name: str | None) -> str | None:
    """Why ``client_name`` cannot be shown to users, or None when it can (or is absent).

    Control characters and bidirectional overrides could disguise the name on the consent page
    (MCP security best practices, "Confused Deputy"; RFC 7591 §5 on display names).
    """
    if name is None:
        return None
    if len(name) > MAX_CLIENT_NAME_LENGTH:
        return f"client_name is longer than {MAX_CLIENT_NAME_LENGTH} characters"
    if any(not char.isprintable() or char in _BIDI_CONTROLS for char in name):
        return "client_name contains control or bidirectional-override characters"
    return None


_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "[::1]", "::1", "localhost"})


def _is_loopback_http(uri: AnyUrl) -> bool:
    """An ``http`` URI on a loopback host (RFC 8252 §7.3; ``localhost`` too, as MCP clients use it, §8.3)."""
    return uri.scheme == "http" and uri.host in _LOOPBACK_HOSTS


def _without_port(uri: AnyUrl) -> tuple[str, str | None, str | None, str | None]:
    return (uri.scheme, uri.host, uri.path, uri.query)


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

    ``authorize`` parks the request and sends the browser to the sign-in page; the code is
    minted by the consent page (:class:`AuthorizationServer`). Codes are taken from the store
    when loaded, so each is redeemable once; a replayed code revokes the grant it produced
    (RFC 6749 §4.1.2, remembered in-process for the code's lifetime).
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
    ) -> None:
        self._settings = settings
        self._base = base_url
        self._credentials = credentials
        self._store = store
        self._codec = codec
        self._resolver = client_metadata
        self._login_path = login_path
        self._redeemed: dict[str, tuple[str, datetime]] = {}

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
            return _GatewayClient.model_validate(info.model_dump()), None
        if not client_id or len(client_id) > 256:
            return None, "Unknown client."
        record = await self._store.get_client(client_id)
        if record is None:
            return None, "Unknown client."
        return _GatewayClient.model_validate(record.metadata), None

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
            try:
                check_redirect_uri(str(uri))
            except ValueError as exc:
                raise RegistrationError("invalid_redirect_uri", str(exc)) from None
        metadata = client_info.model_dump(mode="json", exclude_none=True)
        await self._store.save_client(OAuthClientRecord(client_info.client_id, metadata, _now()))

    # -- authorization ---------------------------------------------------------------------

    def parse_resource(self, resource: str) -> _Resource | None:
        """The gateway resource ``resource`` names, or None when it is none of ours."""
        prefix = f"{self._base}/"
        if not resource.startswith(prefix):
            return None
        parts = resource[len(prefix) :].split("/")
        if parts == ["mcp"]:
            return _Resource(resource, None)
        if len(parts) == 2 and parts[1] == "mcp" and _AGENT_ID.fullmatch(parts[0]):
            return _Resource(resource, parts[0])
        if len(parts) == 3 and parts[0] == "agents" and parts[2] == "mcp" and _AGENT_ID.fullmatch(parts[1]):
            return _Resource(resource, parts[1], alias=True)
        return None

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Park the request and return the sign-in page's URL (``{base path}/oauth/login?request=<id>``).

        Raises:
            AuthorizeError: ``invalid_request`` for a code challenge that is not an S256 value or an
                oversized ``state``; ``invalid_target`` for a ``resource`` that is not one of this
                gateway's MCP endpoints (RFC 8707 §2).
        """
        if _S256_CHALLENGE.fullmatch(params.code_challenge) is None:
            raise AuthorizeError("invalid_request", "code_challenge must be a BASE64URL SHA-256 value (S256)")
        if params.state is not None and len(params.state) > _MAX_STATE_LENGTH:
            raise AuthorizeError("invalid_request", "state is too long")
        if params.resource is not None and self.parse_resource(params.resource) is None:
            raise AuthorizeError("invalid_target", "resource is not an MCP endpoint of this server")
        now = _now()
        request_id = secrets.token_urlsafe(32)
        await self._store.save_request(
            AuthorizationRequestRecord(
                id=request_id,
                client_id=client.client_id,
                redirect_uri=str(params.redirect_uri),
                redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
                state=params.state,
                scopes=tuple(params.scopes or ()),
                code_challenge=params.code_challenge,
                resource=params.resource,
                created_at=now,
                expires_at=now + timedelta(seconds=self._settings.security.authorization_request_ttl_seconds),
            )
        )
        return f"{self._login_path}?{urlencode({'request': request_id})}"

    async def issue_code(self, request: AuthorizationRequestRecord, user_id: str, agents: Sequence[str]) -> str:
        """Mint and store a code (256 bits) for the consented ``agents``; returns the plaintext code."""
        code = secrets.token_urlsafe(32)
        ttl = self._settings.security.authorization_code_ttl_seconds
        await self._store.save_code(
            AuthorizationCodeRecord(
                code_hash=_digest(code),
                client_id=request.client_id,
                user_id=user_id,
                redirect_uri=request.redirect_uri,
                redirect_uri_provided_explicitly=request.redirect_uri_provided_explicitly,
                code_challenge=request.code_challenge,
                scopes=tuple(agent_scope(agent) for agent in agents),
                agents=tuple(agents),
                resource=request.resource,
                expires_at=_now() + timedelta(seconds=ttl),
            )
        )
        return code

    # -- token endpoint --------------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> _Code | None:
        """Take the code from the store (single use: a second load finds nothing).

        A replay of a code that was redeemed revokes the grant it produced.
        """
        code_hash = _digest(authorization_code)
        record = await self._store.take_code(code_hash)
        if record is None:
            await self._revoke_replayed(code_hash)
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

    def _remember_redeemed(self, code_hash: str, grant_id: str, now: datetime) -> None:
        """Remember which grant a redeemed code produced, for as long as the code could have lived (bounded)."""
        self._redeemed = {h: v for h, v in self._redeemed.items() if v[1] > now}
        if len(self._redeemed) >= _MAX_REDEEMED_CODES:
            self._redeemed.pop(next(iter(self._redeemed)))
        ttl = timedelta(seconds=self._settings.security.authorization_code_ttl_seconds)
        self._redeemed[code_hash] = (grant_id, now + ttl)

    async def _revoke_replayed(self, code_hash: str) -> None:
        now = _now()
        self._redeemed = {h: v for h, v in self._redeemed.items() if v[1] > now}
        redeemed = self._redeemed.pop(code_hash, None)
        if redeemed is not None:
            logger.warning("authorization code replayed; revoking grant %s", redeemed[0])
            await self._store.revoke_grant(redeemed[0], now)

    def _requested_resource(self, bound: str | None) -> str | None:
        """The token request's ``resource`` (RFC 8707 §2.2), checked against the one the grant is bound to."""
        resources = _token_request_resources.get()
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
        """Create the grant, its first refresh token (if the client may refresh) and an access token.

        Raises:
            TokenError: ``invalid_target`` (see :meth:`audience`), ``invalid_grant`` for a disabled user.
        """
        code = authorization_code
        resource = self._requested_resource(code.resource)
        audience = self.audience(code.agents, resource)
        user = await self._active_user(code.user_id)
        now = _now()
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
        await self._store.create_grant(grant)
        self._remember_redeemed(code.code_hash, grant.id, now)
        refresh = await self._new_refresh_token(client, grant, now) if self._may_refresh(client) else None
        return self._token(grant, user.id, code.scopes, audience, refresh)

    @staticmethod
    def _may_refresh(client: OAuthClientInformationFull) -> bool:
        return "refresh_token" in client.grant_types

    async def _new_refresh_token(self, client: OAuthClientInformationFull, grant: GrantRecord, now: datetime) -> str:
        token = secrets.token_urlsafe(32)
        await self._store.save_refresh_token(
            RefreshTokenRecord(
                token_hash=_digest(token),
                grant_id=grant.id,
                client_id=client.client_id,
                user_id=grant.user_id,
                scopes=grant.scopes,
                resource=grant.resource,
                created_at=now,
                expires_at=now + timedelta(seconds=self._settings.security.refresh_token_ttl_seconds),
            )
        )
        return token

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
        record = await self._store.get_refresh_token(_digest(refresh_token))
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

        Raises:
            TokenError: ``invalid_grant`` for a revoked grant, a disabled user, or a reused
                (already rotated) token — which also revokes the whole grant; ``invalid_target``
                for a ``resource`` other than the grant's; ``invalid_scope`` for no agent scope.
        """
        grant = await self._store.get_grant(refresh_token.grant_id)
        if grant is None or not grant.active or grant.client_id != client.client_id:
            raise TokenError("invalid_grant", "the grant has been revoked")
        user = await self._active_user(refresh_token.user_id)
        resource = self._requested_resource(grant.resource)
        agents = [agent for agent in grant.agents if agent_scope(agent) in scopes]
        if not agents:
            raise TokenError("invalid_scope", "ask for at least one agent scope of the grant")
        if resource is not None and not _token_request_resources.get():
            # a narrower scope without the bound agent: the bound resource is left out, not an error
            target = self.parse_resource(resource)
            if target is not None and target.agent_id is not None and target.agent_id not in agents:
                resource = None
        audience = self.audience(agents, resource)
        now = _now()
        if not await self._store.rotate_refresh_token(refresh_token.token_hash, now):
            logger.warning("refresh token reused; revoking grant %s", grant.id)
            await self._store.revoke_grant(grant.id, now)
            raise TokenError("invalid_grant", "the refresh token was already used; the grant is revoked")
        refresh = await self._new_refresh_token(client, grant, now)
        return self._token(grant, user.id, [agent_scope(agent) for agent in agents], audience, refresh)

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
        await self._store.revoke_grant(token.grant_id, _now())

    async def revoke_presented(self, client: OAuthClientInformationFull, token: str) -> bool:
        """Revoke the grant of ``token`` (a refresh or access token) when it was issued to ``client``.

        Returns whether a grant was revoked; unknown tokens and other clients' tokens are ignored (RFC 7009 §2.2).
        """
        record = await self._store.get_refresh_token(_digest(token))
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
        await self._store.revoke_grant(grant_id, _now())
        return True


def _cors(app: ASGIApp, methods: list[str]) -> ASGIApp:
    return CORSMiddleware(
        app=app, allow_origins=["*"], allow_methods=methods, allow_headers=[MCP_PROTOCOL_VERSION_HEADER]
    )


def _endpoint(
    handler: Callable[[Request], Awaitable[Response]], *, limit: int, cors: list[str] | None = None
) -> ASGIApp:
    app: ASGIApp = RequestBodyLimitMiddleware(request_response(_form_errors_are_400(handler)), limit)
    return _cors(app, cors) if cors is not None else app


def _form_errors_are_400(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Answer a body that cannot be read as a form with 400 ``invalid_request`` instead of a 500.

    OAuth's form endpoints take ``application/x-www-form-urlencoded`` (RFC 6749 §4.1.3, RFC 7009
    §2.1, and the pages' own forms); multipart bodies are refused before parsing (Starlette's
    parser fails on a missing boundary), and parser limits (fields, part size) become 400 too.
    """

    async def guarded(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if request.method == "POST" and content_type == "multipart/form-data":
            return _invalid_form("send the form as application/x-www-form-urlencoded")
        try:
            return await handler(request)
        except MultiPartException as exc:
            return _invalid_form(exc.message)
        except HTTPException as exc:  # the same failure, as Starlette raises it when mounted in an app
            if exc.status_code != 400:
                raise
            return _invalid_form(exc.detail)

    return guarded


def _invalid_form(description: str) -> Response:
    return JSONResponse(
        {"error": "invalid_request", "error_description": description},
        status_code=400,
        headers={"Cache-Control": "no-store"},
    )


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


class AuthorizationServer:
    """hivegate's OAuth authorization server: build it once per app and add :meth:`routes` to the app.

    Args:
        settings: the gateway's settings (``security.*`` TTLs, login throttle, signing key).
        base_url: the public base URL, no trailing slash: the issuer, byte-identical to ``codec.issuer``.
        credentials: users (sign-in).
        store: clients, requests, codes, grants and refresh tokens.
        registry: the agents offered at consent.
        codec: mints the access tokens.
        client_metadata: resolves URL client ids (CIMD); None turns CIMD off.

    Raises:
        ValueError: when ``base_url`` has a trailing slash, a query or a fragment, or differs from ``codec.issuer``.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        base_url: str,
        credentials: CredentialStore,
        store: OAuthStore,
        registry: AgentRegistry,
        codec: TokenCodec,
        client_metadata: ClientMetadataResolver | None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ValueError(f"base_url must be an absolute http(s) URL without query or fragment: {base_url!r}")
        if base_url.endswith("/"):
            raise ValueError(f"base_url must not end with '/': {base_url!r}")
        if codec.issuer != base_url:
            raise ValueError(f"the token codec's issuer {codec.issuer!r} differs from base_url {base_url!r}")
        self.issuer = base_url
        self._settings = settings
        self._credentials = credentials
        self._store = store
        self._registry = registry
        base_path = parts.path
        self._secure_cookie = parts.scheme == "https"
        self._cookie_path = f"{base_path}/oauth"
        self._login_path = f"{base_path}/oauth/login"
        self._consent_path = f"{base_path}/oauth/consent"
        self.provider = GatewayOAuthProvider(
            settings=settings,
            base_url=base_url,
            credentials=credentials,
            store=store,
            codec=codec,
            client_metadata=client_metadata,
            login_path=self._login_path,
        )
        self._pages = Pages(base_path)
        self._csrf = CsrfTokens(settings.security.token_signing_key.get_secret_value().encode())
        self.throttle = LoginThrottle(settings.security.login_max_failures, settings.security.login_window_seconds)
        self.registrations = LoginThrottle(settings.security.registrations_per_hour, 3600)
        self._client_auth = ClientAuthenticator(self.provider)
        self._authorize_handler = AuthorizationHandler(self.provider)
        self._token_handler = TokenHandler(self.provider, self._client_auth)
        self._register_handler = RegistrationHandler(self.provider, ClientRegistrationOptions(enabled=True))
        self.metadata = self._build_metadata(client_metadata is not None)
        self.timing_hash: str | None = None
        """The hash checked for unknown usernames, so they take as long as known ones (made on first use
        with :func:`~hivegate.auth.passwords.hash_password`'s parameters)."""

    # -- metadata --------------------------------------------------------------------------

    def _build_metadata(self, cimd: bool) -> dict[str, Any]:
        base = self.issuer
        auth_methods = ["none", "client_secret_post", "client_secret_basic"]
        metadata: dict[str, Any] = {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "registration_endpoint": f"{base}/oauth/register",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": auth_methods,
            "revocation_endpoint_auth_methods_supported": auth_methods,
            "authorization_response_iss_parameter_supported": True,
        }
        if cimd:
            metadata["client_id_metadata_document_supported"] = True
        OAuthMetadata.model_validate(metadata)  # the shape the SDK's clients parse
        return metadata

    async def _as_metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata, headers={"Cache-Control": "public, max-age=3600"})

    async def _user_resource_metadata(self, request: Request) -> Response:
        return self._resource_metadata(user_resource(self.issuer), "hivegate: your MCP agents", None)

    async def _agent_resource_metadata(self, request: Request) -> Response:
        agent_id: str = request.path_params["agent_id"]
        if _AGENT_ID.fullmatch(agent_id) is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        resource = agent_resource(self.issuer, agent_id)
        return self._resource_metadata(resource, f"hivegate agent {agent_id}", agent_scope(agent_id))

    async def _alias_resource_metadata(self, request: Request) -> Response:
        agent_id: str = request.path_params["agent_id"]
        if _AGENT_ID.fullmatch(agent_id) is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        resource = f"{self.issuer}/agents/{agent_id}/mcp"
        return self._resource_metadata(resource, f"hivegate agent {agent_id}", agent_scope(agent_id))

    def _resource_metadata(self, resource: str, name: str, scope: str | None) -> Response:
        """RFC 9728 §2 metadata for ``resource`` (built from the id alone: existence does not leak)."""
        metadata: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": name,
        }
        if scope is not None:
            metadata["scopes_supported"] = [scope]
        return JSONResponse(metadata, headers={"Cache-Control": "public, max-age=3600"})

    # -- authorize -------------------------------------------------------------------------

    async def _authorize(self, request: Request) -> Response:
        params = request.query_params if request.method == "GET" else await request.form(max_files=0)
        client_id = params.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            return self._error_page(request, "Invalid authorization request", "The request names no client.", 400)
        client, why = await self.provider.find_client(client_id)
        if client is None:
            return self._error_page(request, "Unknown application", why or "Unknown client.", 400)
        raw = params.get("redirect_uri")
        registered = [str(uri) for uri in client.redirect_uris or ()]
        if raw is not None:
            try:
                client.validate_redirect_uri(AnyUrl(raw) if isinstance(raw, str) else None)
                accepted = isinstance(raw, str)
            except (ValidationError, InvalidRedirectUriError):
                accepted = False
            if not accepted:
                return self._error_page(
                    request, "Invalid redirect URI", "The redirect URI is not registered for this application.", 400
                )
        elif len(registered) != 1:
            return self._error_page(
                request, "Invalid authorization request", "The request must name one of the redirect URIs.", 400
            )
        response = await self._authorize_handler.handle(request)
        location = response.headers.get("location")
        if location is not None:
            if not location.startswith(f"{self._login_path}?"):
                # an error redirect to the (validated) redirect_uri: RFC 9207 §2 wants iss on errors too
                response.headers["location"] = _with_params(location, {"iss": self.issuer})
            for name, value in PAGE_HEADERS.items():
                response.headers.setdefault(name, value)
            return response
        return self._sdk_error_page(request, response)

    def _sdk_error_page(self, request: Request, response: Response) -> Response:
        try:
            detail = json.loads(bytes(response.body))
            message = str(detail.get("error_description") or detail.get("error") or "invalid request")
        except (ValueError, AttributeError):
            message = "invalid request"
        return self._error_page(request, "Invalid authorization request", message, response.status_code)

    def _error_page(self, request: Request, title: str, message: str, status_code: int) -> Response:
        return self._pages.error(request, title=title, message=message, status_code=status_code)

    # -- sign-in ---------------------------------------------------------------------------

    async def _pending(self, request_id: str) -> AuthorizationRequestRecord | None:
        if _REQUEST_ID.fullmatch(request_id) is None:
            return None
        return await self._store.get_request(request_id, _now())

    def _expired_page(self, request: Request) -> Response:
        return self._error_page(
            request,
            "Sign-in link expired",
            "This authorization request is unknown, expired or already used. Start again from your application.",
            400,
        )

    async def _client_view(self, pending: AuthorizationRequestRecord) -> ClientView | None:
        client, _ = await self.provider.find_client(pending.client_id)
        if client is None:
            return None
        parts = urlsplit(pending.redirect_uri)
        host = parts.netloc if parts.netloc else f"{parts.scheme}:"
        metadata_url = client.client_id if self.provider.is_metadata_client(client.client_id) else None
        loopback = parts.hostname in LOOPBACK_REDIRECT_HOSTS
        return ClientView(
            name=client.client_name or client.client_id,
            redirect_host=host,
            metadata_url=metadata_url,
            loopback_warning=metadata_url is not None and loopback,
        )

    def _set_browser_cookie(self, response: Response, value: str) -> None:
        response.set_cookie(
            BROWSER_COOKIE,
            value,
            max_age=self._settings.security.authorization_request_ttl_seconds,
            path=self._cookie_path,
            secure=self._secure_cookie,
            httponly=True,
            samesite="lax",
        )

    async def _login_form(self, request: Request) -> Response:
        request_id = request.query_params.get("request", "")
        pending = await self._pending(request_id)
        if pending is None:
            return self._expired_page(request)
        view = await self._client_view(pending)
        if view is None:
            return self._expired_page(request)
        browser = request.cookies.get(BROWSER_COOKIE) or secrets.token_urlsafe(32)
        csrf = self._csrf.issue("login", request_id, browser)
        response = self._pages.login(request, client=view, request_id=request_id, csrf=csrf)
        self._set_browser_cookie(response, browser)
        return response

    async def _login_submit(self, request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=_MAX_FORM_FIELDS)
        request_id = _field(form, "request")
        pending = await self._pending(request_id)
        if pending is None:
            return self._expired_page(request)
        view = await self._client_view(pending)
        if view is None:
            return self._expired_page(request)
        browser = request.cookies.get(BROWSER_COOKIE)
        if browser is None or not self._csrf.check(_field(form, "csrf"), "login", request_id, browser):
            return self._forbidden_page(request)
        if pending.browser_binding is not None and not secrets.compare_digest(
            pending.browser_binding, _digest(browser)
        ):
            return self._forbidden_page(request)  # signed in from another browser already: no re-binding
        csrf = self._csrf.issue("login", request_id, browser)
        username = _field(form, "username").strip()
        password = _field(form, "password")

        def again(error: str, status_code: int, headers: dict[str, str] | None = None) -> Response:
            return self._pages.login(
                request,
                client=view,
                request_id=request_id,
                csrf=csrf,
                username=username,
                error=error,
                status_code=status_code,
                headers=headers,
            )

        if not username or not password:
            return again("Enter your username and password.", 400)
        address = request.client.host if request.client is not None else None
        wait = self.throttle.retry_after(username, address)
        if wait is not None:
            return again(
                f"Too many failed sign-in attempts. Try again in {wait} seconds.", 429, {"Retry-After": str(wait)}
            )
        attempt = self.throttle.record_failure(username, address)  # counted before the (slow) check: no race
        user = await self._check_password(username, password)
        if user is None:
            return again("Invalid username or password.", 401)
        self.throttle.record_success(username, address, attempt)
        if not await self._store.bind_request(request_id, user.id, _digest(browser)):
            return self._expired_page(request)
        response = RedirectResponse(f"{self._consent_path}?{urlencode({'request': request_id})}", status_code=303)
        response.headers.update(PAGE_HEADERS)
        self._set_browser_cookie(response, browser)  # the cookie the request is now bound to (fresh max-age)
        return response

    async def _check_password(self, username: str, password: str) -> User | None:
        """The enabled user with these credentials, or None; as slow for unknown users as for known ones."""
        user = await self._credentials.get_user_by_username(username) if len(username) <= 64 else None
        if user is None:
            if self.timing_hash is None:
                self.timing_hash = await anyio.to_thread.run_sync(hash_password, secrets.token_urlsafe(16))
            await anyio.to_thread.run_sync(verify_password, self.timing_hash, password)
            return None
        ok = await anyio.to_thread.run_sync(verify_password, user.password_hash, password)
        return user if ok and not user.disabled else None

    def _forbidden_page(self, request: Request) -> Response:
        return self._error_page(
            request,
            "Request refused",
            "This form was not submitted from the page this server showed you (or your session expired). "
            "Nothing was granted. Start again from your application.",
            403,
        )

    # -- consent ---------------------------------------------------------------------------

    async def _signed_in(
        self, request: Request, request_id: str
    ) -> tuple[AuthorizationRequestRecord, User, ClientView] | Response:
        """The pending request, its signed-in user and client, when this browser signed in for it; else a page."""
        pending = await self._pending(request_id)
        if pending is None:
            return self._expired_page(request)
        if pending.user_id is None or pending.browser_binding is None:
            response = RedirectResponse(f"{self._login_path}?{urlencode({'request': request_id})}", status_code=303)
            response.headers.update(PAGE_HEADERS)
            return response
        browser = request.cookies.get(BROWSER_COOKIE)
        if browser is None or not secrets.compare_digest(_digest(browser), pending.browser_binding):
            return self._forbidden_page(request)
        user = await self._credentials.get_user(pending.user_id)
        view = await self._client_view(pending)
        if user is None or user.disabled or view is None:
            return self._forbidden_page(request)
        return pending, user, view

    def _agents_of(self, user: User) -> list[AgentSpec]:
        name = user.username.casefold()
        return [a for a in self._registry.all() if a.mcp_enabled and a.owner.casefold() == name]

    def _preselected(self, pending: AuthorizationRequestRecord, agents: Sequence[AgentSpec]) -> set[str]:
        chosen = {scope.removeprefix("agent:") for scope in pending.scopes if scope.startswith("agent:")}
        if pending.resource is not None:
            target = self.provider.parse_resource(pending.resource)
            if target is not None and target.agent_id is None:
                return {a.id for a in agents}
            if target is not None and target.agent_id is not None:
                chosen.add(target.agent_id)
        return chosen

    def _consent_page(
        self,
        request: Request,
        pending: AuthorizationRequestRecord,
        user: User,
        view: ClientView,
        *,
        checked: set[str] | None = None,
        error: str | None = None,
        status_code: int = 200,
    ) -> Response:
        agents = self._agents_of(user)
        selected = self._preselected(pending, agents) if checked is None else checked
        browser = request.cookies.get(BROWSER_COOKIE, "")
        return self._pages.consent(
            request,
            client=view,
            username=user.username,
            agents=[AgentChoice(a.id, a.name, a.description, a.id in selected) for a in agents],
            request_id=pending.id,
            csrf=self._csrf.issue("consent", pending.id, browser),
            error=error,
            status_code=status_code,
        )

    async def _consent_form(self, request: Request) -> Response:
        found = await self._signed_in(request, request.query_params.get("request", ""))
        if isinstance(found, Response):
            return found
        return self._consent_page(request, *found)

    async def _consent_submit(self, request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=_MAX_FORM_FIELDS)
        request_id = _field(form, "request")
        found = await self._signed_in(request, request_id)
        if isinstance(found, Response):
            return found
        pending, user, view = found
        if not self._csrf.check(_field(form, "csrf"), "consent", request_id, request.cookies.get(BROWSER_COOKIE)):
            return self._forbidden_page(request)
        action = _field(form, "action")
        if action == "deny":
            if await self._store.take_request(request_id) is None:
                return self._expired_page(request)
            return self._back_to_client(
                pending, {"error": "access_denied", "error_description": "the user denied access"}
            )
        if action != "allow":
            return self._consent_page(request, pending, user, view, error="Choose Allow or Deny.", status_code=400)
        chosen = list(dict.fromkeys(v for v in form.getlist("agent") if isinstance(v, str)))
        if not chosen:
            return self._consent_page(
                request,
                pending,
                user,
                view,
                checked=set(),
                error="Choose at least one agent, or Deny.",
                status_code=400,
            )
        mine = {a.id for a in self._agents_of(user)}
        if any(agent not in mine for agent in chosen):
            return self._consent_page(
                request,
                pending,
                user,
                view,
                checked={a for a in chosen if a in mine},
                error="You can only grant your own MCP-enabled agents.",
                status_code=400,
            )
        taken = await self._store.take_request(request_id)
        if taken is None:
            return self._expired_page(request)
        code = await self.provider.issue_code(taken, user.id, chosen)
        return self._back_to_client(taken, {"code": code})

    def _back_to_client(self, pending: AuthorizationRequestRecord, params: dict[str, str]) -> Response:
        """303 to the request's (validated, registered) redirect URI with ``params``, ``state`` and ``iss``."""
        location = _with_params(pending.redirect_uri, {**params, "state": pending.state, "iss": self.issuer})
        response = RedirectResponse(location, status_code=303)
        response.headers.update(PAGE_HEADERS)
        return response

    # -- token and revocation --------------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        form = await request.form(max_files=0)
        resources = tuple(v for v in form.getlist("resource") if isinstance(v, str))
        reset = _token_request_resources.set(resources)
        try:
            return await self._token_handler.handle(request)
        finally:
            _token_request_resources.reset(reset)

    async def _revoke(self, request: Request) -> Response:
        headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
        form = await request.form(max_files=0)
        if not _field(form, "client_id"):
            return JSONResponse(
                {"error": "invalid_request", "error_description": "client_id is required"}, 400, headers=headers
            )
        try:
            client = await self._client_auth.authenticate_request(request)
        except AuthenticationError as exc:
            basic = request.headers.get("authorization", "").lower().startswith("basic ")
            if basic:
                headers["WWW-Authenticate"] = 'Basic realm="hivegate"'
            return JSONResponse(
                {"error": "invalid_client", "error_description": exc.message}, 401 if basic else 400, headers=headers
            )
        token = _field(form, "token")
        if not token:
            return JSONResponse(
                {"error": "invalid_request", "error_description": "token is required"}, 400, headers=headers
            )
        await self.provider.revoke_presented(client, token)  # token_type_hint only orders lookups; both are cheap
        return Response(status_code=200, headers=headers)

    async def _register(self, request: Request) -> Response:
        """RFC 7591 registration, at most ``security.registrations_per_hour`` per client address.

        Registration is unauthenticated and every client is stored, so a per-address limit keeps
        one host from filling the database (RFC 7591 §5, "Security Considerations"); 429 with
        ``Retry-After`` beyond it.
        """
        address = request.client.host if request.client is not None else ""
        wait = self.registrations.retry_after(address, None)  # keyed by the address alone
        if wait is not None:
            return JSONResponse(
                {"error": "slow_down", "error_description": f"too many registrations; try again in {wait} s"},
                status_code=429,
                headers={"Retry-After": str(wait), "Cache-Control": "no-store"},
            )
        response = await self._register_handler.handle(request)
        if response.status_code == 201:
            self.registrations.record_failure(address, None)  # counts registrations, not failures
        return response

    # -- routes ----------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """The authorization server's routes (paths relative to the public base URL); see the module docstring."""
        get = ["GET", "OPTIONS"]
        post = ["POST", "OPTIONS"]
        sdk_limit = DEFAULT_MAX_REQUEST_BODY_SIZE
        return [
            Route(
                "/.well-known/oauth-authorization-server",
                _endpoint(self._as_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource/mcp",
                _endpoint(self._user_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource/agents/{agent_id}/mcp",
                _endpoint(self._alias_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource/{agent_id}/mcp",
                _endpoint(self._agent_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route("/oauth/register", _endpoint(self._register, limit=_FORM_BODY_LIMIT, cors=post), methods=post),
            Route("/oauth/authorize", _endpoint(self._authorize, limit=_FORM_BODY_LIMIT), methods=["GET", "POST"]),
            Route("/oauth/login", _endpoint(self._login_page, limit=_FORM_BODY_LIMIT), methods=["GET", "POST"]),
            Route("/oauth/consent", _endpoint(self._consent, limit=_FORM_BODY_LIMIT), methods=["GET", "POST"]),
            Route("/oauth/token", _endpoint(self._token, limit=_FORM_BODY_LIMIT, cors=post), methods=post),
            Route("/oauth/revoke", _endpoint(self._revoke, limit=_FORM_BODY_LIMIT, cors=post), methods=post),
        ]

    async def _login_page(self, request: Request) -> Response:
        return await (self._login_form(request) if request.method == "GET" else self._login_submit(request))

    async def _consent(self, request: Request) -> Response:
        return await (self._consent_form(request) if request.method == "GET" else self._consent_submit(request))
