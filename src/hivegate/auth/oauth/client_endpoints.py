"""The endpoints an OAuth client calls itself (no browser): token, revocation and registration.

``POST /oauth/token``
    RFC 6749 §4.1.3 / §6 (the SDK's handler: client authentication, PKCE verification per RFC 7636
    §4.6, ``redirect_uri`` check), after a malformed ``code_verifier`` (RFC 7636 §4.1) has been
    answered ``invalid_request`` without touching the code; ``resource`` values (RFC 8707 §2.2) are
    handed to the provider for the token's audience.
``POST /oauth/revoke``
    RFC 7009; public clients need no secret. Revoking an access or refresh token revokes its grant.
``POST /oauth/register``
    RFC 7591 (the SDK's handler) with the redirect-URI policy applied to the URIs as sent (400
    ``invalid_redirect_uri``, RFC 7591 §3.2.2), at most ``security.registrations_per_hour`` per
    client address (429 ``slow_down`` with ``Retry-After``).
"""

from __future__ import annotations

from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.settings import ClientRegistrationOptions
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from hivegate.auth.oauth.endpoints import form_field, invalid_form, oauth_error
from hivegate.auth.oauth.pkce import code_verifier_problem
from hivegate.auth.oauth.provider import GatewayOAuthProvider, token_request_resources
from hivegate.auth.oauth.throttle import LoginThrottle

__all__ = ["ClientEndpoints"]

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
"""RFC 6749 §5.1: token responses are not cached."""


def _code_verifier_problem(form: FormData) -> str | None:
    """Why an ``authorization_code`` token request's ``code_verifier`` is malformed, or None.

    Checked before the SDK's handler looks the code up, so a malformed request (``invalid_request``,
    RFC 6749 §5.2) does not use up the code; a missing verifier is left to the handler (also
    ``invalid_request``). Spec: RFC 7636 §4.1, §4.6.
    """
    if form_field(form, "grant_type") != "authorization_code" or "code_verifier" not in form:
        return None
    values = form.getlist("code_verifier")
    if len(values) != 1 or not isinstance(values[0], str):
        return "send exactly one code_verifier"
    return code_verifier_problem(values[0])


class ClientEndpoints:
    """Token, revocation and registration over ``provider``; ``registrations`` counts registrations per address."""

    def __init__(self, provider: GatewayOAuthProvider, registrations: LoginThrottle) -> None:
        self.provider = provider
        self.registrations = registrations
        self._client_auth = ClientAuthenticator(provider)
        self._token_handler = TokenHandler(provider, self._client_auth)
        self._register_handler = RegistrationHandler(provider, ClientRegistrationOptions(enabled=True))

    async def token(self, request: Request) -> Response:
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

    async def revoke(self, request: Request) -> Response:
        form = await request.form(max_files=0)
        if not form_field(form, "client_id"):
            return oauth_error("invalid_request", "client_id is required", headers=_NO_STORE)
        try:
            client = await self._client_auth.authenticate_request(request)
        except AuthenticationError as exc:
            if request.headers.get("authorization", "").lower().startswith("basic "):
                challenge = {**_NO_STORE, "WWW-Authenticate": 'Basic realm="hivegate"'}
                return oauth_error("invalid_client", exc.message, 401, challenge)
            return oauth_error("invalid_client", exc.message, headers=_NO_STORE)
        token = form_field(form, "token")
        if not token:
            return oauth_error("invalid_request", "token is required", headers=_NO_STORE)
        await self.provider.revoke_presented(client, token)  # token_type_hint only orders lookups; both are cheap
        return Response(status_code=200, headers=_NO_STORE)

    async def register(self, request: Request) -> Response:
        """RFC 7591 registration, at most ``security.registrations_per_hour`` per client address.

        Registration is unauthenticated and every client is stored, so a per-address limit keeps
        one host from filling the database (RFC 7591 §5, "Security Considerations"); 429 with
        ``Retry-After`` beyond it.
        """
        address = request.client.host if request.client is not None else ""
        wait = self.registrations.retry_after(address, None)  # keyed by the address alone
        if wait is not None:
            message = f"too many registrations; try again in {wait} s"
            return oauth_error("slow_down", message, 429, {"Retry-After": str(wait)})
        problem = self.provider.registration_redirect_problem(await request.body())
        if problem is not None:
            return oauth_error("invalid_redirect_uri", problem)
        response = await self._register_handler.handle(request)
        if response.status_code == 201:
            self.registrations.record_failure(address, None)  # counts registrations, not failures
        return response
