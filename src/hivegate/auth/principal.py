"""The principal: who is calling, as handlers see it (never the credential itself).

A request's credential (OAuth access token, ``oag_`` user key, ``bak_`` agent key) is
resolved once, at the edge (:mod:`hivegate.auth.resolver`), into a :class:`Principal`;
everything behind the edge sees only the principal.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ANONYMOUS",
    "USER_SCOPE",
    "CredentialKind",
    "Principal",
    "agent_scope",
    "current_principal",
    "principal_scope",
]


class CredentialKind(StrEnum):
    """What the caller presented."""

    NONE = "none"
    """Nothing: only agents with ``auth = "none"`` serve such a caller."""
    OAUTH = "oauth"
    """An access token from hivegate's OAuth authorization server."""
    USER_KEY = "user_key"
    """An ``oag_`` key."""
    AGENT_KEY = "agent_key"
    """A ``bak_`` key."""


def agent_scope(agent_id: str) -> str:
    """The OAuth scope that grants one agent: ``agent:{agent_id}``."""
    return f"agent:{agent_id}"


USER_SCOPE = "mcp"
"""The scope the user-level endpoint ``/mcp`` asks for (its challenge and ``scopes_supported``).

Requesting it pre-selects every one of the user's agents at consent, as asking for the ``/mcp``
resource does. It is a request scope only: a token reaches ``/mcp`` by its audience (RFC 8707), and
its ``scope`` lists the ``agent:{id}`` scopes the user granted (RFC 6749 §3.3).
"""


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller.

    Attributes:
        kind: the credential presented.
        user_id, username: the user acting (for a ``bak_`` key, the user who made the key);
            None for an anonymous caller.
        client_id: the OAuth client the token was issued to (OAuth only).
        agents: the agents this credential may reach, or None for "every agent the user owns"
            (``oag_``). OAuth: the agents granted at consent; ``bak_``: its one agent.
        scopes: the granted OAuth scopes (``agent:{id}`` each); empty for keys.
        credential_id: the key's id or the token's ``jti`` (for logs and ``last_used_at``).
        grant_id: the OAuth grant the token belongs to (OAuth only).
        audience: the token's ``aud`` (resource URLs it was issued for; OAuth only, RFC 8707).
        expires_at: the token's ``exp`` in Unix seconds (OAuth only).
    """

    kind: CredentialKind
    user_id: str | None = None
    username: str | None = None
    client_id: str | None = None
    agents: frozenset[str] | None = frozenset()
    scopes: tuple[str, ...] = ()
    credential_id: str | None = None
    grant_id: str | None = None
    audience: tuple[str, ...] | None = None
    expires_at: int | None = None

    @property
    def is_user(self) -> bool:
        """A user credential (OAuth token or ``oag_``), as the user-level ``/mcp`` endpoint requires."""
        return self.kind in (CredentialKind.OAUTH, CredentialKind.USER_KEY)

    def may_reach(self, agent_id: str, owner: str | None) -> bool:
        """Whether this principal may use the agent ``agent_id`` owned by the username ``owner``.

        Usernames compare ignoring case (as they are unique ignoring case). An agent whose
        owner is not the principal's user is out of reach for every credential kind, so a
        grant or key outlives a change of owner only as a refusal.
        """
        if self.username is None or owner is None or owner.casefold() != self.username.casefold():
            return False
        return self.agents is None or agent_id in self.agents


ANONYMOUS = Principal(kind=CredentialKind.NONE)
"""The caller of an ``auth = "none"`` agent."""

_current: ContextVar[Principal] = ContextVar("hivegate_principal", default=ANONYMOUS)


def current_principal() -> Principal:
    """The principal of the request being served (``ANONYMOUS`` outside one)."""
    return _current.get()


class principal_scope:
    """Make ``principal`` the :func:`current_principal` inside the ``with`` block (re-entrant per use).

    A class rather than a generator context manager: it is entered on every request.
    """

    __slots__ = ("_principal", "_token")

    def __init__(self, principal: Principal) -> None:
        self._principal = principal
        self._token: Token[Principal] | None = None

    def __enter__(self) -> Principal:
        self._token = _current.set(self._principal)
        return self._principal

    def __exit__(self, *_: object) -> None:
        assert self._token is not None
        _current.reset(self._token)
        self._token = None
