"""Count budgets for what a caller holds open on the MCP endpoints: sessions, listen streams, GET streams.

A :class:`Budget` caps how many of one resource a single principal holds at once and how many
all principals of this process hold together. The per-principal cap is what keeps one caller
from locking everyone else out; the total bounds the process's memory. :class:`McpBudgets`
holds the three budgets of one process (shared by every ``/{agentId}/mcp`` endpoint and
``/mcp``) and decides from a request which one it draws on:

==================================================  ==================  =========================
request                                             budget              slot held until
==================================================  ==================  =========================
handshake-era ``initialize`` POST (no session id)   ``sessions``        the SDK discards the
                                                                        session (DELETE, idle
                                                                        expiry, refused opening,
                                                                        shutdown)
handshake-era GET with ``Mcp-Session-Id``           ``get_streams``     the response ends (client
                                                                        disconnect included)
2026-07-28 ``subscriptions/listen`` POST            ``listen_streams``  the response ends
any POST (weighted: its body's bytes, charged as    ``body_bytes``      the request ends
they arrive, :meth:`McpBudgets.body_charge`)
==================================================  ==================  =========================

A principal over its own cap gets :class:`~hivegate.errors.BudgetExceededError` (429); any
caller while the process total is reached gets :class:`~hivegate.errors.CapacityExhaustedError`
(503); both carry ``Retry-After``. Anonymous callers (``addr:`` keys) together hold at most
``anonymous_total`` of each budget (``mcp.anonymous_budget_share`` of the total), and get 503
beyond it: their principals are client addresses, which an attacker has many of, so without
this share a few addresses would add up to the whole total and lock every user out.
Counting is synchronous (no ``await`` between the check and
the increment), so concurrent openings on the one event loop never exceed a cap; the budgets
are not thread-safe and are per process (N replicas allow N times the total).

Principals are keyed by :func:`principal_key`: the user for OAuth tokens and ``oag_`` keys, the
key for ``bak_`` keys, the client address (an IPv6 address by its /64) for anonymous callers
of ``auth = "none"`` agents.

Spec: MCP 2025-11-25 basic/transports#session-management and #listening-for-messages-from-the-server;
MCP 2026-07-28 basic/utilities/subscriptions; RFC 6585 §4 (429); RFC 9110 §10.2.3 (Retry-After).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Generator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from starlette.types import Scope

from hivegate.auth.principal import CredentialKind, Principal
from hivegate.errors import BudgetExceededError, CapacityExhaustedError
from hivegate.settings import McpSettings

__all__ = ["Budget", "Charge", "McpBudgets", "Slot", "opening_session", "principal_key", "take_opening_slot"]

_SESSION_HEADER = "mcp-session-id"
_ANONYMOUS = "addr:"
"""Prefix of the keys of anonymous callers (:func:`principal_key`)."""
_NOTHING = nullcontext()


class Slot:
    """One unit of a :class:`Budget` held by one principal; :meth:`release` returns it (idempotent)."""

    __slots__ = ("_budget", "_released", "key")

    def __init__(self, budget: Budget, key: str) -> None:
        self._budget = budget
        self.key = key
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        """Give the slot back to its budget; later calls do nothing."""
        if not self._released:
            self._released = True
            self._budget.give_back(self.key)


class Budget:
    """At most ``per_principal`` slots per principal key and ``total`` slots in all, held at once.

    Args:
        name: what is counted (``"sessions"``, ``"listen_streams"``, ``"get_streams"``): the
            ``data.budget`` of the errors.
        per_principal: the cap per key (>= 1).
        total: the cap over every key (>= ``per_principal``).
        retry_after_seconds: the ``Retry-After`` sent with a refusal.
        anonymous_total: the cap over every anonymous key (``addr:…``) together (1 to ``total``;
            default ``total``).
        noun: what the per-principal refusal says is too many (default ``"open {name}"``).

    Units are slots (:meth:`acquire`) or, for a byte-weighted budget, bytes (:meth:`charge`).

    Not thread-safe: use from one event loop (every method is synchronous).
    """

    def __init__(
        self,
        name: str,
        *,
        per_principal: int,
        total: int,
        retry_after_seconds: int,
        anonymous_total: int | None = None,
        noun: str | None = None,
    ) -> None:
        if not 1 <= per_principal <= total:
            raise ValueError(f"{name}: need 1 <= per_principal ({per_principal}) <= total ({total})")
        anonymous_total = total if anonymous_total is None else anonymous_total
        if not 1 <= anonymous_total <= total:
            raise ValueError(f"{name}: need 1 <= anonymous_total ({anonymous_total}) <= total ({total})")
        self.name = name
        self.per_principal = per_principal
        self.total = total
        self.anonymous_total = anonymous_total
        self.retry_after_seconds = retry_after_seconds
        self._what = name.replace("_", " ")
        self._noun = noun or f"open {self._what}"
        self._held: dict[str, int] = {}
        self._total_held = 0
        self._anonymous_held = 0

    @property
    def total_held(self) -> int:
        """Slots held now, over every principal."""
        return self._total_held

    def held(self, key: str) -> int:
        """Slots held now by ``key``."""
        return self._held.get(key, 0)

    def acquire(self, key: str) -> Slot:
        """Take one slot for ``key``.

        Raises:
            BudgetExceededError: ``key`` already holds ``per_principal`` slots (429).
            CapacityExhaustedError: ``total`` slots are held in all, or ``key`` is anonymous and
                anonymous keys hold ``anonymous_total`` (503).
        """
        self.take(key, 1)
        return Slot(self, key)

    def charge(self, key: str) -> Charge:
        """An empty :class:`Charge` of ``key`` on this budget (a byte-weighted budget's units are bytes)."""
        return Charge(self, key)

    def take(self, key: str, amount: int) -> None:
        """Count ``amount`` more units for ``key``, or raise as :meth:`acquire` if a cap would be passed.

        The counting under :class:`Slot` and :class:`Charge`; hold units through those instead.
        """
        held = self._held.get(key, 0)
        if held + amount > self.per_principal:
            raise BudgetExceededError(
                f"Too many {self._noun} for this caller (limit {self.per_principal})",
                retry_after_seconds=self.retry_after_seconds,
                data={"budget": self.name, "limit": self.per_principal},
            )
        if self._total_held + amount > self.total:
            raise CapacityExhaustedError(
                f"The server has no room for more {self._what} (limit {self.total})",
                retry_after_seconds=self.retry_after_seconds,
                data={"budget": self.name, "limit": self.total},
            )
        anonymous = key.startswith(_ANONYMOUS)
        if anonymous and self._anonymous_held + amount > self.anonymous_total:
            raise CapacityExhaustedError(
                f"The server has no room for more {self._what} of anonymous callers (limit {self.anonymous_total})",
                retry_after_seconds=self.retry_after_seconds,
                data={"budget": self.name, "limit": self.anonymous_total},
            )
        self._held[key] = held + amount
        self._total_held += amount
        if anonymous:
            self._anonymous_held += amount

    @contextmanager
    def hold(self, key: str) -> Generator[Slot]:
        """Hold one slot for ``key`` inside the ``with`` block; it is returned however the block ends.

        Raises:
            BudgetExceededError, CapacityExhaustedError: as :meth:`acquire`, before the block runs.
        """
        slot = self.acquire(key)
        try:
            yield slot
        finally:
            slot.release()

    def give_back(self, key: str, amount: int = 1) -> None:
        """Count ``amount`` fewer units for ``key`` (held ones: :class:`Slot` and :class:`Charge` call this)."""
        held = self._held[key] - amount
        if held:
            self._held[key] = held
        else:
            del self._held[key]
        self._total_held -= amount
        if key.startswith(_ANONYMOUS):
            self._anonymous_held -= amount


class Charge:
    """Units of a :class:`Budget` one principal holds for one request, growing as the request needs more.

    The byte-weighted use: a request body's bytes, charged chunk by chunk as they arrive
    (:meth:`add`) and returned together when the request ends (:meth:`release`, or leaving the
    ``with`` block, however it ends). Not thread-safe (one event loop).
    """

    __slots__ = ("_budget", "held", "key")

    def __init__(self, budget: Budget, key: str) -> None:
        self._budget = budget
        self.key = key
        self.held = 0
        """Units charged now."""

    def add(self, amount: int) -> None:
        """Charge ``amount`` (>= 0) more units; nothing is charged when a cap would be passed.

        Raises:
            BudgetExceededError, CapacityExhaustedError: as :meth:`Budget.acquire` (what was
                charged before stays charged until :meth:`release`).
        """
        if amount:
            self._budget.take(self.key, amount)
            self.held += amount

    def release(self) -> None:
        """Return every unit charged so far; later calls do nothing (until :meth:`add` again)."""
        if self.held:
            self._budget.give_back(self.key, self.held)
            self.held = 0

    def __enter__(self) -> Charge:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


class _Offer:
    __slots__ = ("slot",)

    def __init__(self, slot: Slot) -> None:
        self.slot: Slot | None = slot


_offer: ContextVar[_Offer | None] = ContextVar("hivegate_opening_session_slot", default=None)


@contextmanager
def opening_session(slot: Slot) -> Generator[None]:
    """Offer ``slot`` to the session the request served inside the block may open.

    The session manager takes it with :func:`take_opening_slot` when it admits the session
    (and returns it when the session is discarded); a slot nobody took is released on exit.
    """
    offer = _Offer(slot)
    token = _offer.set(offer)
    try:
        yield
    finally:
        _offer.reset(token)
        if offer.slot is not None:
            offer.slot.release()


def take_opening_slot() -> Slot | None:
    """The slot offered by :func:`opening_session` to this request (only once), or None."""
    offer = _offer.get()
    if offer is None:
        return None
    slot, offer.slot = offer.slot, None
    return slot


def principal_key(principal: Principal, client: tuple[str, int] | None) -> str:
    """Whose budget a request draws on.

    ``user:{user_id}`` for OAuth tokens and ``oag_`` keys (all of a user's clients together),
    ``key:{credential_id}`` for ``bak_`` keys (a key handed to a machine cannot starve its
    user's own clients), ``addr:{address}`` for anonymous callers (``client`` is the ASGI
    ``scope["client"]``; an IPv6 address counts by its /64, which one host usually owns whole).
    """
    kind = principal.kind
    if kind is CredentialKind.NONE:
        return "addr:" + _address_key(client[0] if client else "")
    if kind is CredentialKind.AGENT_KEY:
        return f"key:{principal.credential_id}"
    return f"user:{principal.user_id}"


def _address_key(host: str) -> str:
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


class McpBudgets:
    """The ``sessions``, ``listen_streams``, ``get_streams`` and ``body_bytes`` budgets of one process (``mcp.*``)."""

    def __init__(self, settings: McpSettings) -> None:
        retry = settings.budget_retry_after_seconds
        share = settings.anonymous_budget_share

        def budget(name: str, per_principal: int, total: int) -> Budget:
            anonymous_total = max(1, int(total * share))
            return Budget(
                name,
                per_principal=per_principal,
                total=total,
                retry_after_seconds=retry,
                anonymous_total=anonymous_total,
            )

        self.sessions = budget("sessions", settings.max_sessions_per_principal, settings.max_sessions_total)
        self.listen_streams = budget(
            "listen_streams", settings.max_listen_streams_per_principal, settings.max_listen_streams_total
        )
        self.get_streams = budget("get_streams", settings.max_get_streams_per_principal, settings.max_get_streams_total)
        self.body_bytes = Budget(
            "body_bytes",
            per_principal=settings.max_body_bytes_in_flight_per_principal,
            total=settings.max_body_bytes_in_flight_total,
            retry_after_seconds=retry,
            anonymous_total=max(1, int(settings.max_body_bytes_in_flight_total * share)),
            noun="request body bytes in flight",
        )

    def body_charge(self, scope: Scope, principal: Principal) -> Charge:
        """The ``body_bytes`` charge of one request: hand it to the body reader, hold it around serving.

        Use as ``with budgets.body_charge(scope, principal) as charge: serve(charge)``; the bytes
        the reader charged are returned however the block ends.
        """
        return Charge(self.body_bytes, principal_key(principal, scope.get("client")))

    def admit(
        self, scope: Scope, headers: Mapping[str, str], message: Any, principal: Principal, *, modern: bool
    ) -> AbstractContextManager[object]:
        """What to hold around serving the request: the slot it opens (see the module table), or nothing.

        Use as ``with budgets.admit(...): serve()``; most requests open nothing and get a shared
        no-op context (the check is a few dict lookups).

        Args:
            scope: the ASGI scope (its ``method`` and ``client``).
            headers: the request headers, lower-case names.
            message: the decoded POST body (the JSON-RPC message), or None.
            principal: the admitted caller.
            modern: the request is of the 2026-07-28 era (:func:`hivegate.mcp.transport.is_modern`).

        Raises:
            BudgetExceededError, CapacityExhaustedError: the slot cannot be had (nothing is held then).
        """
        method = scope["method"]
        if modern:
            if method == "POST" and isinstance(message, dict) and message.get("method") == "subscriptions/listen":
                return self.listen_streams.hold(principal_key(principal, scope.get("client")))
        elif _SESSION_HEADER not in headers:
            if method == "POST" and isinstance(message, dict) and message.get("method") == "initialize":
                return opening_session(self.sessions.acquire(principal_key(principal, scope.get("client"))))
        elif method == "GET":
            return self.get_streams.hold(principal_key(principal, scope.get("client")))
        return _NOTHING
