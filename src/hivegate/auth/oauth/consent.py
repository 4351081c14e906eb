"""The consent page: ``GET|POST /oauth/consent``.

The signed-in user's MCP-enabled agents (those asking for credentials) as checkboxes, each with
what its grant covers; CSRF-checked (:class:`~hivegate.auth.oauth.pages.CsrfTokens`) and bound to
the browser that signed in. Allow: a single-use code (:meth:`GatewayOAuthProvider.issue_code`) and
303 to ``redirect_uri`` with ``code``, ``state``, ``iss`` (RFC 6749 §4.1.2, RFC 9207 §2); Deny:
``error=access_denied`` (RFC 6749 §4.1.2.1). The stored request is taken (used up) either way.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.oauth.endpoints import form_field
from hivegate.auth.oauth.pages import AgentChoice, ClientView, CsrfTokens, Pages, page_redirect
from hivegate.auth.oauth.provider import (
    BROWSER_COOKIE,
    MAX_FORM_FIELDS,
    REQUEST_ID_RE,
    GatewayOAuthProvider,
    secret_digest,
    with_params,
)
from hivegate.auth.oauth.redirects import LOOPBACK_REDIRECT_HOSTS
from hivegate.auth.principal import USER_SCOPE
from hivegate.mcp.coverage import GrantCoverage, spec_coverage
from hivegate.settings import Settings
from hivegate.storage.credentials import CredentialStore, User
from hivegate.storage.oauth import AuthorizationRequestRecord, OAuthStore

__all__ = ["Consent", "client_view"]


async def client_view(provider: GatewayOAuthProvider, pending: AuthorizationRequestRecord) -> ClientView | None:
    """The client of ``pending`` as the sign-in and consent pages show it; None when it is gone."""
    client, _ = await provider.find_client(pending.client_id)
    if client is None:
        return None
    parts = urlsplit(pending.redirect_uri)
    host = parts.netloc if parts.netloc else f"{parts.scheme}:"
    metadata_url = client.client_id if provider.is_metadata_client(client.client_id) else None
    loopback = parts.hostname in LOOPBACK_REDIRECT_HOSTS
    return ClientView(
        name=client.client_name or client.client_id,
        redirect_host=host,
        metadata_url=metadata_url,
        loopback_warning=metadata_url is not None and loopback,
    )


class Consent:
    """The consent endpoint of the server at ``issuer``; ``login_path`` is where a request nobody signed in for goes.

    ``coverage`` says what a grant of an agent covers, or None when the agent cannot start (not
    offered); default: what its spec declares (:func:`~hivegate.mcp.coverage.spec_coverage`).
    """

    def __init__(
        self,
        *,
        settings: Settings,
        issuer: str,
        login_path: str,
        credentials: CredentialStore,
        store: OAuthStore,
        registry: AgentRegistry,
        provider: GatewayOAuthProvider,
        pages: Pages,
        csrf: CsrfTokens,
        coverage: Callable[[AgentSpec], Awaitable[GrantCoverage | None]] | None,
    ) -> None:
        self._settings = settings
        self._issuer = issuer
        self._login_path = login_path
        self._credentials = credentials
        self._store = store
        self._registry = registry
        self._provider = provider
        self._pages = pages
        self._csrf = csrf
        self._coverage = coverage

    async def __call__(self, request: Request) -> Response:
        return await (self._consent_form(request) if request.method == "GET" else self._consent_submit(request))

    async def _pending(self, request_id: str) -> AuthorizationRequestRecord | None:
        """The stored (signed-in) request with this id, unexpired; else None."""
        if REQUEST_ID_RE.fullmatch(request_id) is None:
            return None
        return await self._store.get_request(request_id, self._provider.clock())

    async def _signed_in(
        self, request: Request, request_id: str
    ) -> tuple[AuthorizationRequestRecord, User, ClientView] | Response:
        """The stored request, its signed-in user and client, when this browser signed in for it; else a page.

        A sealed request (no one signed in yet) is sent to the sign-in page.
        """
        pending = await self._pending(request_id)
        if pending is None and self._provider.pending.open(request_id, self._provider.clock()) is not None:
            return page_redirect(f"{self._login_path}?{urlencode({'request': request_id})}")
        if pending is None:
            return self._pages.expired(request)
        browser = request.cookies.get(BROWSER_COOKIE)
        if (
            browser is None
            or pending.user_id is None
            or pending.browser_binding is None
            or not secrets.compare_digest(secret_digest(browser), pending.browser_binding)
        ):
            return self._pages.refused(request)
        user = await self._credentials.get_user(pending.user_id)
        view = await client_view(self._provider, pending)
        if user is None or user.disabled or view is None:
            return self._pages.refused(request)
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
            target = self._provider.parse_resource(pending.resource)
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
        request_id = form_field(form, "request")
        found = await self._signed_in(request, request_id)
        if isinstance(found, Response):
            return found
        pending, user, view = found
        if not self._csrf.check(form_field(form, "csrf"), "consent", request_id, request.cookies.get(BROWSER_COOKIE)):
            return self._pages.refused(request)
        action = form_field(form, "action")
        if action == "deny":
            if await self._store.take_request(request_id) is None:
                return self._pages.expired(request)
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
            return self._pages.expired(request)
        code = await self._provider.issue_code(taken, user.id, chosen)
        return self._back_to_client(taken, {"code": code})

    def _back_to_client(self, pending: AuthorizationRequestRecord, params: dict[str, str]) -> Response:
        """303 to the request's (validated, registered) redirect URI with ``params``, ``state`` and ``iss``."""
        location = with_params(pending.redirect_uri, {**params, "state": pending.state, "iss": self._issuer})
        return page_redirect(location)
