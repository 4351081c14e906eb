"""The OAuth provider behind hivegate's authorization server: clients, codes, grants and tokens.

:class:`GatewayOAuthProvider` implements the official SDK's ``OAuthAuthorizationServerProvider``
over the :class:`~hivegate.storage.oauth.OAuthStore`: registered and metadata-document clients
(RFC 7591, CIMD), pending authorization requests, single-use codes (RFC 6749 §4.1.2), grants as
refresh-token families with rotation and reuse detection (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2),
RFC 8707 resources as audiences, and HS256 access tokens (:class:`~hivegate.auth.tokens.TokenCodec`).
The HTTP side (routes, pages, metadata) is :mod:`hivegate.auth.oauth.server`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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
    InvalidScopeError,
    OAuthClientInformationFull,
    OAuthToken,
)
from pydantic import AnyUrl, ConfigDict, TypeAdapter

from hivegate.agents.model import AGENT_ID_PATTERN
from hivegate.auth.oauth.cimd import ClientMetadataError, ClientMetadataResolver, is_client_metadata_url
from hivegate.auth.oauth.redirects import check_redirect_uri
from hivegate.auth.principal import agent_scope
from hivegate.auth.tokens import InvalidAccessToken, TokenCodec
from hivegate.auth.urls import agent_resource
from hivegate.errors import StoreUnavailableError
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
_AGENT_SCOPE = re.compile(r"agent:[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_URL = TypeAdapter(AnyUrl, config=ConfigDict(url_preserve_empty_path=True))
FORM_BODY_LIMIT = 64 * 1024
MAX_FORM_FIELDS = 2000
_MAX_STATE_LENGTH = 2048
_MAX_REDEEMED_CODES = 100_000
_IGNORED_SCOPES = frozenset({"offline_access"})
"""Asked for by some clients; refresh tokens come with every grant, so it adds nothing."""

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
        await self._store.save_client(OAuthClientRecord(client_info.client_id, metadata, utc_now()))

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
        """Park the request and return the sign-in page's URL (``{base path}/oauth/login?request=<id>``).

        Raises:
            AuthorizeError: ``invalid_request`` for a code challenge that is not an S256 value or an
                oversized ``state``; ``invalid_target`` for a ``resource`` that is not one of this
                gateway's MCP endpoints (RFC 8707 §2); ``temporarily_unavailable`` when the database
                cannot store the request (RFC 6749 §4.1.2.1: a redirect cannot carry a 503).
        """
        if _S256_CHALLENGE.fullmatch(params.code_challenge) is None:
            raise AuthorizeError("invalid_request", "code_challenge must be a BASE64URL SHA-256 value (S256)")
        if params.state is not None and len(params.state) > _MAX_STATE_LENGTH:
            raise AuthorizeError("invalid_request", "state is too long")
        if params.resource is not None and self.parse_resource(params.resource) is None:
            raise AuthorizeError("invalid_target", "resource is not an MCP endpoint of this server")
        now = utc_now()
        request_id = secrets.token_urlsafe(32)
        record = AuthorizationRequestRecord(
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
        try:
            await self._store.save_request(record)
        except StoreUnavailableError:
            raise AuthorizeError("temporarily_unavailable", "the server cannot take requests now; try again") from None
        return f"{self._login_path}?{urlencode({'request': request_id})}"

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
                expires_at=utc_now() + timedelta(seconds=ttl),
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
        code_hash = secret_digest(authorization_code)
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
        now = utc_now()
        self._redeemed = {h: v for h, v in self._redeemed.items() if v[1] > now}
        redeemed = self._redeemed.pop(code_hash, None)
        if redeemed is not None:
            logger.warning("authorization code replayed; revoking grant %s", redeemed[0])
            await self._store.revoke_grant(redeemed[0], now)

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
        """Create the grant, its first refresh token (if the client may refresh) and an access token.

        Raises:
            TokenError: ``invalid_target`` (see :meth:`audience`), ``invalid_grant`` for a disabled user.
        """
        code = authorization_code
        resource = self._requested_resource(code.resource)
        audience = self.audience(code.agents, resource)
        user = await self._active_user(code.user_id)
        now = utc_now()
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
                token_hash=secret_digest(token),
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
        if resource is not None and not token_request_resources.get():
            # a narrower scope without the bound agent: the bound resource is left out, not an error
            target = self.parse_resource(resource)
            if target is not None and target.agent_id is not None and target.agent_id not in agents:
                resource = None
        audience = self.audience(agents, resource)
        now = utc_now()
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
        await self._store.revoke_grant(token.grant_id, utc_now())

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
        await self._store.revoke_grant(grant_id, utc_now())
        return True
