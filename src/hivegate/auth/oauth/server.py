"""hivegate's OAuth 2.1 authorization server for its MCP endpoints (MCP authorization 2025-11-25 and 2026-07-28).

Endpoints (paths relative to the gateway's public URL, which is also the issuer, byte for byte):

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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.auth import (
    OAuthMetadata,
)
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.oauth.cimd import ClientMetadataResolver
from hivegate.auth.oauth.clients import client_redirect_matches
from hivegate.auth.oauth.endpoints import endpoint, invalid_form
from hivegate.auth.oauth.pages import PAGE_HEADERS, AgentChoice, ClientView, CsrfTokens, Pages
from hivegate.auth.oauth.pkce import code_verifier_problem
from hivegate.auth.oauth.provider import (
    AGENT_ID_RE,
    BROWSER_COOKIE,
    FORM_BODY_LIMIT,
    MAX_FORM_FIELDS,
    REQUEST_ID_RE,
    GatewayOAuthProvider,
    secret_digest,
    token_request_resources,
    with_params,
)
from hivegate.auth.oauth.redirects import LOOPBACK_REDIRECT_HOSTS
from hivegate.auth.oauth.resource_metadata import protected_resource_metadata
from hivegate.auth.oauth.throttle import AddressLimit, LoginThrottle
from hivegate.auth.passwords import hash_password, verify_password
from hivegate.auth.principal import USER_SCOPE
from hivegate.auth.tokens import TokenCodec
from hivegate.auth.urls import agent_resource, user_resource
from hivegate.errors import GatewayError
from hivegate.mcp.coverage import GrantCoverage, spec_coverage
from hivegate.settings import Settings
from hivegate.storage.credentials import CredentialStore, User
from hivegate.storage.oauth import (
    AuthorizationRequestRecord,
    OAuthStore,
)

__all__ = ["BROWSER_COOKIE", "AuthorizationServer", "GatewayOAuthProvider"]


def _code_verifier_problem(form: FormData) -> str | None:
    """Why an ``authorization_code`` token request's ``code_verifier`` is malformed, or None.

    Checked before the SDK's handler looks the code up, so a malformed request (``invalid_request``,
    RFC 6749 §5.2) does not use up the code; a missing verifier is left to the handler (also
    ``invalid_request``). Spec: RFC 7636 §4.1, §4.6.
    """
    if _field(form, "grant_type") != "authorization_code" or "code_verifier" not in form:
        return None
    values = form.getlist("code_verifier")
    if len(values) != 1 or not isinstance(values[0], str):
        return "send exactly one code_verifier"
    return code_verifier_problem(values[0])


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
        self._registry = registry
        self._coverage = coverage
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
        self.authorizations = AddressLimit(settings.security.authorizations_per_minute, 60)
        self._client_auth = ClientAuthenticator(self.provider)
        self._authorize_handler = AuthorizationHandler(self.provider)
        self._token_handler = TokenHandler(self.provider, self._client_auth)
        self._register_handler = RegistrationHandler(self.provider, ClientRegistrationOptions(enabled=True))
        self.metadata = self._build_metadata(client_metadata is not None)
        self.password_checks = anyio.CapacityLimiter(settings.security.password_checks_concurrency)
        """Worker threads for argon2id checks (``security.password_checks_concurrency``): each takes ~64 MiB,
        so the memory of concurrent sign-ins is bounded, whatever the number of addresses they come from."""
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
        return self._resource_metadata(user_resource(self.issuer), None)

    async def _root_resource_metadata(self, request: Request) -> Response:
        return self._resource_metadata(self.issuer, None)

    async def _agent_resource_metadata(self, request: Request) -> Response:
        agent_id: str = request.path_params["agent_id"]
        if AGENT_ID_RE.fullmatch(agent_id) is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        return self._resource_metadata(agent_resource(self.issuer, agent_id), agent_id)

    async def _alias_resource_metadata(self, request: Request) -> Response:
        agent_id: str = request.path_params["agent_id"]
        if AGENT_ID_RE.fullmatch(agent_id) is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        return self._resource_metadata(f"{self.issuer}/agents/{agent_id}/mcp", agent_id)

    def _resource_metadata(self, resource: str, agent_id: str | None) -> Response:
        """RFC 9728 §2 metadata for ``resource`` (built by :func:`protected_resource_metadata`)."""
        metadata = protected_resource_metadata(self.issuer, resource, agent_id)
        return JSONResponse(metadata, headers={"Cache-Control": "public, max-age=3600"})

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

    async def _pending(self, request_id: str) -> AuthorizationRequestRecord | None:
        """The stored (signed-in) request with this id, unexpired; else None."""
        if REQUEST_ID_RE.fullmatch(request_id) is None:
            return None
        return await self._store.get_request(request_id, self.provider.clock())

    def _sealed(self, sealed: str) -> AuthorizationRequestRecord | None:
        """The request a sign-in page carries (sealed by ``/oauth/authorize``), unexpired; else None."""
        return self.provider.pending.open(sealed, self.provider.clock())

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
        pending = self._sealed(request_id)
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
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
        request_id = _field(form, "request")
        pending = self._sealed(request_id)
        if pending is None:
            return self._expired_page(request)
        view = await self._client_view(pending)
        if view is None:
            return self._expired_page(request)
        browser = request.cookies.get(BROWSER_COOKIE)
        if browser is None or not self._csrf.check(_field(form, "csrf"), "login", request_id, browser):
            return self._forbidden_page(request)
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
        wait = self.authorizations.admit(address)  # each sign-in stores a row: counted with /oauth/authorize calls
        if wait is not None:
            return again(f"Too many sign-ins. Try again in {wait} seconds.", 429, {"Retry-After": str(wait)})
        stored = replace(pending, id=secrets.token_urlsafe(32), user_id=user.id, browser_binding=secret_digest(browser))
        await self._store.save_request(stored)  # the first write of this authorization: a user has signed in
        response = RedirectResponse(f"{self._consent_path}?{urlencode({'request': stored.id})}", status_code=303)
        response.headers.update(PAGE_HEADERS)
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
        """The stored request, its signed-in user and client, when this browser signed in for it; else a page.

        A sealed request (no one signed in yet) is sent to the sign-in page.
        """
        pending = await self._pending(request_id)
        if pending is None and self._sealed(request_id) is not None:
            response = RedirectResponse(f"{self._login_path}?{urlencode({'request': request_id})}", status_code=303)
            response.headers.update(PAGE_HEADERS)
            return response
        if pending is None:
            return self._expired_page(request)
        browser = request.cookies.get(BROWSER_COOKIE)
        if (
            browser is None
            or pending.user_id is None
            or pending.browser_binding is None
            or not secrets.compare_digest(secret_digest(browser), pending.browser_binding)
        ):
            return self._forbidden_page(request)
        user = await self._credentials.get_user(pending.user_id)
        view = await self._client_view(pending)
        if user is None or user.disabled or view is None:
            return self._forbidden_page(request)
        return pending, user, view

    def _agents_of(self, user: User) -> list[AgentSpec]:
        """The user's agents a grant can cover: MCP-enabled, and asking for credentials (``auth = "none"``
        agents need no grant)."""
        name = user.username.casefold()
        return [a for a in self._registry.all() if a.mcp_enabled and a.auth != "none" and a.owner.casefold() == name]

    async def _offered(self, user: User) -> list[tuple[AgentSpec, GrantCoverage]]:
        """:meth:`_agents_of` with what each grant covers, leaving out agents that cannot start."""
        offered: list[tuple[AgentSpec, GrantCoverage]] = []
        for agent in self._agents_of(user):
            covers = spec_coverage(agent) if self._coverage is None else await self._coverage(agent)
            if covers is not None:
                offered.append((agent, covers))
        return offered

    def _preselected(self, pending: AuthorizationRequestRecord, agents: Sequence[AgentSpec]) -> set[str]:
        chosen = {scope.removeprefix("agent:") for scope in pending.scopes if scope.startswith("agent:")}
        if USER_SCOPE in pending.scopes:
            return {a.id for a in agents}
        if pending.resource is not None:
            target = self.provider.parse_resource(pending.resource)
            if target is not None and target.agent_id is None:
                return {a.id for a in agents}
            if target is not None and target.agent_id is not None:
                chosen.add(target.agent_id)
        return chosen

    async def _consent_page(
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
        offered = await self._offered(user)
        selected = self._preselected(pending, [a for a, _ in offered]) if checked is None else checked
        browser = request.cookies.get(BROWSER_COOKIE, "")
        return self._pages.consent(
            request,
            client=view,
            username=user.username,
            agents=[
                AgentChoice(a.id, a.name, a.description, a.id in selected, c.tools, c.resources, c.prompts, c.unlisted)
                for a, c in offered
            ],
            grant_idle_seconds=self._settings.security.refresh_token_ttl_seconds,
            request_id=pending.id,
            csrf=self._csrf.issue("consent", pending.id, browser),
            error=error,
            status_code=status_code,
        )

    async def _consent_form(self, request: Request) -> Response:
        found = await self._signed_in(request, request.query_params.get("request", ""))
        if isinstance(found, Response):
            return found
        return await self._consent_page(request, *found)

    async def _consent_submit(self, request: Request) -> Response:
        form = await request.form(max_files=0, max_fields=MAX_FORM_FIELDS)
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
            return await self._consent_page(
                request, pending, user, view, error="Choose Allow or Deny.", status_code=400
            )
        chosen = list(dict.fromkeys(v for v in form.getlist("agent") if isinstance(v, str)))
        if not chosen:
            return await self._consent_page(
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
            return await self._consent_page(
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
        location = with_params(pending.redirect_uri, {**params, "state": pending.state, "iss": self.issuer})
        response = RedirectResponse(location, status_code=303)
        response.headers.update(PAGE_HEADERS)
        return response

    # -- token and revocation --------------------------------------------------------------

    async def _token(self, request: Request) -> Response:
        form = await request.form(max_files=0)
        verifier_problem = _code_verifier_problem(form)
        if verifier_problem is not None:
            return invalid_form(verifier_problem)
        resources = tuple(v for v in form.getlist("resource") if isinstance(v, str))
        reset = token_request_resources.set(resources)
        try:
            return await self._token_handler.handle(request)
        finally:
            token_request_resources.reset(reset)

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
        problem = self.provider.registration_redirect_problem(await request.body())
        if problem is not None:
            return JSONResponse(
                {"error": "invalid_redirect_uri", "error_description": problem},
                status_code=400,
                headers={"Cache-Control": "no-store"},
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
        form, page = FORM_BODY_LIMIT, self._gateway_error_page
        return [
            Route(
                "/.well-known/oauth-authorization-server",
                endpoint(self._as_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource",
                endpoint(self._root_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource/mcp",
                endpoint(self._user_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource/agents/{agent_id}/mcp",
                endpoint(self._alias_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route(
                "/.well-known/oauth-protected-resource/{agent_id}/mcp",
                endpoint(self._agent_resource_metadata, limit=sdk_limit, cors=get),
                methods=get,
            ),
            Route("/oauth/register", endpoint(self._register, limit=FORM_BODY_LIMIT, cors=post), methods=post),
            Route("/oauth/authorize", endpoint(self._authorize, limit=form, page=page), methods=["GET", "POST"]),
            Route("/oauth/login", endpoint(self._login_page, limit=form, page=page), methods=["GET", "POST"]),
            Route("/oauth/consent", endpoint(self._consent, limit=form, page=page), methods=["GET", "POST"]),
            Route("/oauth/token", endpoint(self._token, limit=FORM_BODY_LIMIT, cors=post), methods=post),
            Route("/oauth/revoke", endpoint(self._revoke, limit=FORM_BODY_LIMIT, cors=post), methods=post),
        ]

    async def _login_page(self, request: Request) -> Response:
        return await (self._login_form(request) if request.method == "GET" else self._login_submit(request))

    async def _consent(self, request: Request) -> Response:
        return await (self._consent_form(request) if request.method == "GET" else self._consent_submit(request))
