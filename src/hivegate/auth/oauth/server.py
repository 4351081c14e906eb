"""hivegate's OAuth 2.1 authorization server for its MCP endpoints (MCP authorization 2025-11-25 and 2026-07-28).

Endpoints (paths relative to the gateway's public URL, which is also the issuer, byte for byte); the
discovery documents are served by :mod:`~hivegate.auth.oauth.metadata`, registration, token and
revocation by :mod:`~hivegate.auth.oauth.client_endpoints`, consent by :mod:`~hivegate.auth.oauth.consent`,
authorization and sign-in by this module, which builds them all and lists their routes:

``GET /.well-known/oauth-authorization-server``
    RFC 8414 metadata: S256 only (RFC 7636), ``none`` among the token and revocation endpoint
    auth methods (public clients), ``authorization_response_iss_parameter_supported`` (RFC 9207),
    ``client_id_metadata_document_supported`` when a CIMD resolver is configured. CORS ``*``.
``GET /.well-known/oauth-protected-resource/{agentId}/mcp``, ``…/agents/{agentId}/mcp``, ``…/mcp``
    RFC 9728 protected-resource metadata; ``resource`` is the endpoint URL exactly, ``scopes_supported``
    ``["agent:{id}"]`` or ``["mcp"]`` (:mod:`~hivegate.auth.oauth.resource_metadata`). Served for every
    syntactically valid agent id, existing or not (existence does not leak); other ids 404.
``GET /.well-known/oauth-protected-resource``
    The same document for the gateway as a whole (RFC 9728 §3: the well-known URI of a resource
    identifier without a path), ``resource`` = the public base URL; the original platform's
    documented URL, and where clients look when a challenge names no metadata URL.
``POST /oauth/register``
    RFC 7591 dynamic client registration (the SDK's handler) with hivegate's redirect-URI policy
    applied to the URIs as sent (:class:`~hivegate.auth.oauth.redirects.RedirectPolicy`, including
    ``security.allowed_redirect_uris``; refusal: 400 ``invalid_redirect_uri``, RFC 7591 §3.2.2).
``GET|POST /oauth/authorize``
    RFC 6749 §4.1.1 with PKCE S256 mandatory (RFC 7636 §4.3, OAuth 2.1 §4.1.1; the challenge's format
    checked, :mod:`~hivegate.auth.oauth.pkce`) and the ``redirect_uri`` matched as written
    (:func:`~hivegate.auth.oauth.redirects.redirect_uri_matches`: exact, loopback on any port);
    unknown scopes left out (RFC 6749 §3.3); RFC 8707 ``resource``. An unknown client or unregistered redirect URI
    gets an HTML error page (400), never a redirect (RFC 6749 §4.1.2.1, no open redirect); other
    errors redirect to the registered URI with ``error``, ``state`` and ``iss`` (RFC 9207 §2).
    Success: 302 to ``/oauth/login?request=<sealed request>``; nothing is stored
    (:mod:`~hivegate.auth.oauth.pending`). At most ``security.authorizations_per_minute`` calls and
    successful sign-ins together per client address (IPv6: per /64), else a 429 page with ``Retry-After``.
``GET|POST /oauth/login``
    The sign-in form; throttled per username and per client address (429 + ``Retry-After``).
    Success: the request is stored, bound to the user and to a ``HttpOnly; SameSite=Lax`` browser
    cookie, and the browser is sent (303) to the consent page with the stored request's id.
``GET|POST /oauth/consent``
    The user's MCP-enabled agents as checkboxes; CSRF-checked. Allow: a single-use code (120 s) and
    303 to ``redirect_uri`` with ``code``, ``state``, ``iss``; Deny: ``error=access_denied``.
``POST /oauth/token``
    RFC 6749 §4.1.3 / §6 (the SDK's handler: client authentication, PKCE verification per RFC 7636
    §4.6, ``redirect_uri`` check), after a malformed ``code_verifier`` (RFC 7636 §4.1) has been
    answered ``invalid_request`` without touching the code. ``resource`` (RFC 8707 §2.2) becomes the
    access token's audience; refresh tokens rotate on every use and reuse of a rotated one revokes its whole grant
    (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2).
``POST /oauth/revoke``
    RFC 7009; public clients need no secret. Revoking an access or refresh token revokes its grant.

Access tokens are HS256 JWTs (:class:`~hivegate.auth.tokens.TokenCodec`), ``aud`` = the granted
agents' endpoint URLs (plus the user-level or alias URL the client asked for).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from urllib.parse import urlencode, urlsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.oauth.cimd import ClientMetadataResolver
from hivegate.auth.oauth.client_endpoints import ClientEndpoints
from hivegate.auth.oauth.clients import client_redirect_matches
from hivegate.auth.oauth.consent import Consent, client_view
from hivegate.auth.oauth.endpoints import endpoint, form_field
from hivegate.auth.oauth.metadata import MetadataEndpoints
from hivegate.auth.oauth.pages import PAGE_HEADERS, CsrfTokens, Pages, page_redirect
from hivegate.auth.oauth.provider import (
    BROWSER_COOKIE,
    FORM_BODY_LIMIT,
    MAX_FORM_FIELDS,
    GatewayOAuthProvider,
    secret_digest,
    with_params,
)
from hivegate.auth.oauth.throttle import AddressLimit, LoginThrottle
from hivegate.auth.passwords import hash_password, verify_password
from hivegate.auth.tokens import TokenCodec
from hivegate.errors import GatewayError
from hivegate.mcp.coverage import GrantCoverage
from hivegate.settings import Settings
from hivegate.storage.credentials import CredentialStore, User
from hivegate.storage.oauth import (
    AuthorizationRequestRecord,
    OAuthStore,
)

__all__ = ["BROWSER_COOKIE", "AuthorizationServer", "GatewayOAuthProvider"]


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
        coverage: what a grant of an agent covers, or None when the agent cannot start (not offered);
            default: what its spec declares (:func:`~hivegate.mcp.coverage.spec_coverage`).

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
        coverage: Callable[[AgentSpec], Awaitable[GrantCoverage | None]] | None = None,
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
        self._consent = Consent(
            settings=settings,
            issuer=base_url,
            login_path=self._login_path,
            credentials=credentials,
            store=store,
            registry=registry,
            provider=self.provider,
            pages=self._pages,
            csrf=self._csrf,
            coverage=coverage,
        )
        self.throttle = LoginThrottle(settings.security.login_max_failures, settings.security.login_window_seconds)
        self.registrations = LoginThrottle(settings.security.registrations_per_hour, 3600)
        self._client_endpoints = ClientEndpoints(self.provider, self.registrations)
        self.authorizations = AddressLimit(settings.security.authorizations_per_minute, 60)
        self._authorize_handler = AuthorizationHandler(self.provider)
        self._discovery = MetadataEndpoints(base_url, cimd=client_metadata is not None)
        self.metadata = self._discovery.metadata
        self.password_checks = anyio.CapacityLimiter(settings.security.password_checks_concurrency)
        """Worker threads for argon2id checks (``security.password_checks_concurrency``): each takes ~64 MiB,
        so the memory of concurrent sign-ins is bounded, whatever the number of addresses they come from."""
        self.timing_hash: str | None = None
        """The hash checked for unknown usernames, so they take as long as known ones (made on first use
        with :func:`~hivegate.auth.passwords.hash_password`'s parameters)."""

    # -- authorize -------------------------------------------------------------------------

    async def _authorize(self, request: Request) -> Response:
        wait = self.authorizations.admit(request.client.host if request.client is not None else None)
        if wait is not None:
            page = self._error_page(
                request, "Too many requests", f"Too many authorization requests. Try again in {wait} seconds.", 429
            )
            page.headers["Retry-After"] = str(wait)
            return page
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
            # matched as sent, before the SDK parses (and normalises) it: RFC 6749 §3.1.2.3, RFC 8252 §7.3
            if not isinstance(raw, str) or not client_redirect_matches(client, raw):
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
                response.headers["location"] = with_params(location, {"iss": self.issuer})
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

    def _gateway_error_page(self, request: Request, exc: GatewayError) -> Response:
        """A hivegate error on a browser page (503 when the database is down), with its headers (``Retry-After``)."""
        title = "Temporarily unavailable" if exc.http_status == 503 else "Something went wrong"
        response = self._error_page(request, title, exc.message, exc.http_status)
        response.headers.update(exc.headers)
        return response

    # -- sign-in ---------------------------------------------------------------------------

    def _sealed(self, sealed: str) -> AuthorizationRequestRecord | None:
        """The request a sign-in page carries (sealed by ``/oauth/authorize``), unexpired; else None."""
        return self.provider.pending.open(sealed, self.provider.clock())

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
        pending = self._sealed(request_id)
        if pending is None:
            return self._pages.expired(request)
        view = await client_view(self.provider, pending)
        if view is None:
            return self._pages.expired(request)
        browser = request.cookies.get(BROWSER_COOKIE) or secrets.token_urlsafe(32)
        csrf = self._csrf.issue("login", request_id, browser)
        response = self._pages.login(request, client=view, request_id=request_id, csrf=csrf)
        self._set_browser_cookie(response, browser)
        return response

    async def _login_submit(self, request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        request_id = form_field(form, "request")
        pending = self._sealed(request_id)
        if pending is None:
            return self._pages.expired(request)
        view = await client_view(self.provider, pending)
        if view is None:
            return self._pages.expired(request)
        browser = request.cookies.get(BROWSER_COOKIE)
        if browser is None or not self._csrf.check(form_field(form, "csrf"), "login", request_id, browser):
            return self._pages.refused(request)
        csrf = self._csrf.issue("login", request_id, browser)
        username = form_field(form, "username").strip()
        password = form_field(form, "password")

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
        wait = self.authorizations.admit(address)  # each sign-in stores a row: counted with /oauth/authorize calls
        if wait is not None:
            return again(f"Too many sign-ins. Try again in {wait} seconds.", 429, {"Retry-After": str(wait)})
        stored = replace(pending, id=secrets.token_urlsafe(32), user_id=user.id, browser_binding=secret_digest(browser))
        await self._store.save_request(stored)  # the first write of this authorization: a user has signed in
        response = page_redirect(f"{self._consent_path}?{urlencode({'request': stored.id})}")
        self._set_browser_cookie(response, browser)  # the cookie the request is now bound to (fresh max-age)
        return response

    async def _check_password(self, username: str, password: str) -> User | None:
        """The enabled user with these credentials, or None; as slow for unknown users as for known ones."""
        user = await self._credentials.get_user_by_username(username) if len(username) <= 64 else None
        limiter = self.password_checks
        if user is None:
            if self.timing_hash is None:
                self.timing_hash = await anyio.to_thread.run_sync(
                    hash_password, secrets.token_urlsafe(16), limiter=limiter
                )
            await anyio.to_thread.run_sync(verify_password, self.timing_hash, password, limiter=limiter)
            return None
        ok = await anyio.to_thread.run_sync(verify_password, user.password_hash, password, limiter=limiter)
        return user if ok and not user.disabled else None

    # -- routes ----------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """The authorization server's routes (paths relative to the public base URL); see the module docstring."""
        post, both = ["POST", "OPTIONS"], ["GET", "POST"]
        clients, form, page = self._client_endpoints, FORM_BODY_LIMIT, self._gateway_error_page
        return [
            *self._discovery.routes(),
            Route("/oauth/register", endpoint(clients.register, limit=form, cors=post), methods=post),
            Route("/oauth/authorize", endpoint(self._authorize, limit=form, page=page), methods=both),
            Route("/oauth/login", endpoint(self._login_page, limit=form, page=page), methods=both),
            Route("/oauth/consent", endpoint(self._consent, limit=form, page=page), methods=both),
            Route("/oauth/token", endpoint(clients.token, limit=form, cors=post), methods=post),
            Route("/oauth/revoke", endpoint(clients.revoke, limit=form, cors=post), methods=post),
        ]

    async def _login_page(self, request: Request) -> Response:
        return await (self._login_form(request) if request.method == "GET" else self._login_submit(request))
