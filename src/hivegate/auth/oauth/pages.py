"""The authorization server's HTML pages (sign-in, consent, errors) and their CSRF tokens.

Pages are Jinja2 templates under ``templates/`` rendered with autoescaping on (every value
is escaped), no scripts and no external assets: the one stylesheet is inlined and allowed
by its SHA-256 hash in the ``Content-Security-Policy``. Every page, and every redirect the
forms lead to, carries :data:`PAGE_HEADERS`:

- ``Content-Security-Policy``: ``default-src 'self'``, no scripts, no plugins, no ``<base>``,
  ``frame-ancestors 'none'`` (clickjacking; CSP 3 §6.4.2). There is deliberately no
  ``form-action``: Chromium applies it to the redirect that follows the consent form,
  which goes to the client's ``redirect_uri`` (another origin, possibly ``[::1]`` or a
  private-use scheme that host-source expressions cannot name).
- ``X-Frame-Options: DENY`` (RFC 7034, for browsers without CSP 3), ``Cache-Control: no-store``
  (RFC 9111 §5.2.2.5: nothing of a sign-in is cached), ``Referrer-Policy: no-referrer``
  (request ids and codes never leak through ``Referer``), ``X-Content-Type-Options: nosniff``.

CSRF (OWASP CSRF Prevention Cheat Sheet, "signed double-submit cookie"): a form carries
``HMAC-SHA256(key, purpose ‖ request id ‖ browser cookie)``, and the POST must present the
same browser cookie; :class:`CsrfTokens` makes and checks these in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.templating import Jinja2Templates

__all__ = ["PAGE_HEADERS", "AgentChoice", "ClientView", "CsrfTokens", "Pages", "duration_text", "page_redirect"]

TEMPLATES_DIR = Path(__file__).parent / "templates"

_STYLE = (TEMPLATES_DIR / "pages.css").read_text(encoding="utf-8")
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()

PAGE_HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": (
        f"default-src 'self'; style-src 'sha256-{_STYLE_HASH}'; script-src 'none'; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
"""Headers on every sign-in/consent page and on the redirects that leave them."""


@dataclass(frozen=True, slots=True)
class ClientView:
    """What a page shows about the client asking for access.

    Attributes:
        name: its ``client_name`` (or its id when it has none).
        redirect_host: the host (and port) of the redirect URI the browser will return to,
            as the MCP authorization spec asks the consent screen to show.
        metadata_url: for a client identified by a metadata document URL (CIMD), that URL.
        loopback_warning: whether to warn that the redirect goes to this computer
            (CIMD clients with a loopback redirect can be impersonated by any local program).
    """

    name: str
    redirect_host: str
    metadata_url: str | None = None
    loopback_warning: bool = False


@dataclass(frozen=True, slots=True)
class AgentChoice:
    """One agent checkbox on the consent page, with what granting it covers (names, for people).

    ``unlisted``: the agent's server may offer more than ``tools``/``resources``/``prompts`` name.
    """

    id: str
    name: str
    description: str
    checked: bool
    tools: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    unlisted: bool = False


def duration_text(seconds: int) -> str:
    """``seconds`` for people, in its largest whole unit: ``30 days``, ``12 hours``, ``90 minutes``."""
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"


class CsrfTokens:
    """Signed double-submit CSRF tokens bound to an authorization request and a browser cookie.

    The key is derived from the token signing key (HMAC with a fixed label), so a CSRF token
    is never also a valid MAC under the access-token key.
    """

    def __init__(self, signing_key: bytes) -> None:
        self._key = hmac.new(signing_key, b"hivegate oauth form csrf v1", hashlib.sha256).digest()

    def issue(self, purpose: str, request_id: str, browser: str) -> str:
        """The token for ``purpose`` (``login`` or ``consent``), request ``request_id`` and cookie ``browser``."""
        message = "\x00".join((purpose, request_id, browser)).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def check(self, token: str, purpose: str, request_id: str, browser: str | None) -> bool:
        """Whether ``token`` is the one :meth:`issue` makes for these values (constant-time compare)."""
        if not browser or not token:
            return False
        return hmac.compare_digest(token.encode(), self.issue(purpose, request_id, browser).encode())


class Pages:
    """Render the sign-in, consent and error pages.

    Args:
        base_path: the path part of the gateway's public URL (``""`` at a host's root);
            form actions are ``{base_path}/oauth/login`` and ``{base_path}/oauth/consent``.
    """

    def __init__(self, base_path: str) -> None:
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._templates = Jinja2Templates(env=env)
        self.login_action = f"{base_path}/oauth/login"
        self.consent_action = f"{base_path}/oauth/consent"

    def _render(
        self,
        request: Request,
        template: str,
        status_code: int,
        context: dict[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> HTMLResponse:
        context = {"style": Markup(_STYLE), **context}  # a fixed file of ours, allowed by its hash
        response = self._templates.TemplateResponse(
            request, template, context, status_code=status_code, headers={**PAGE_HEADERS, **(headers or {})}
        )
        return response

    def login(
        self,
        request: Request,
        *,
        client: ClientView,
        request_id: str,
        csrf: str,
        username: str = "",
        error: str | None = None,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> HTMLResponse:
        """The sign-in form: ``username``, ``password``, hidden ``request`` and ``csrf``, a "Sign in" button."""
        context = {
            "title": "Sign in",
            "client": client,
            "request_id": request_id,
            "csrf": csrf,
            "username": username,
            "error": error,
            "action": self.login_action,
        }
        return self._render(request, "login.html", status_code, context, headers)

    def consent(
        self,
        request: Request,
        *,
        client: ClientView,
        username: str,
        agents: Sequence[AgentChoice],
        request_id: str,
        csrf: str,
        grant_idle_seconds: int,
        error: str | None = None,
        status_code: int = 200,
    ) -> HTMLResponse:
        """The consent form: an ``agent`` checkbox per agent with what it covers, hidden ``request`` and
        ``csrf``, Allow and Deny; and how long the grant lasts (it ends after ``grant_idle_seconds``
        unused: the refresh-token lifetime) and how to revoke it."""
        context = {
            "grant_idle": duration_text(grant_idle_seconds),
            "title": "Authorize",
            "client": client,
            "username": username,
            "agents": list(agents),
            "request_id": request_id,
            "csrf": csrf,
            "error": error,
            "action": self.consent_action,
        }
        return self._render(request, "consent.html", status_code, context)

    def error(self, request: Request, *, title: str, message: str, status_code: int) -> HTMLResponse:
        """A page saying what went wrong (no form, no link back to the client)."""
        return self._render(request, "error.html", status_code, {"title": title, "message": message})

    def expired(self, request: Request) -> HTMLResponse:
        """400: the authorization request is unknown, expired or already used."""
        return self.error(
            request,
            title="Sign-in link expired",
            message="This authorization request is unknown, expired or already used. "
            "Start again from your application.",
            status_code=400,
        )

    def refused(self, request: Request) -> HTMLResponse:
        """403: a form that was not submitted from the page this server showed (CSRF), or a lost sign-in."""
        return self.error(
            request,
            title="Request refused",
            message="This form was not submitted from the page this server showed you (or your session expired). "
            "Nothing was granted. Start again from your application.",
            status_code=403,
        )


def page_redirect(location: str) -> RedirectResponse:
    """303 to ``location`` with :data:`PAGE_HEADERS` (a form's answer: the browser GETs the next page)."""
    response = RedirectResponse(location, status_code=303)
    response.headers.update(PAGE_HEADERS)
    return response
