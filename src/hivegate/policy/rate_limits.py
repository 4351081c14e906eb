"""Rate limits per credential × agent: a token bucket per pair, refused with ``rate_limited`` (429).

What counts (``docs/security.md``, "Rate limits"): each call of an agent costs one token, on every
plane: an MCP ``tools/call`` of the agent's tools (its agent endpoint, both eras, and its tool on the
user-level ``/mcp``), an A2A ``SendMessage`` / ``SendStreamingMessage``, a REST
``POST /{agentId}/v1/invoke``. Lists and reads (``tools/list``, ``resources/read``, ``GetTask``, …) cost
nothing: they run no agent, are cheap, and are bounded by the per-principal budgets of
:mod:`hivegate.mcp.budgets` and the HTTP limits.

**Who** (:func:`credential_key`): an ``oag_`` or ``bak_`` key by its id, an OAuth access token by its
grant (a refresh does not reset the bucket; every token of one consent shares it). Anonymous callers
of ``auth = "none"`` agents are not limited here (they present no credential to count; the per-address
MCP budgets and connection limits apply).

**How many** (:meth:`RateLimits.limit_for`): ``rate_limit_per_minute`` of the agent's spec when set, else
``rate_limits.per_key[<key id>]`` when set, else ``rate_limits.calls_per_minute`` (60). A bucket holds
that many tokens (a burst of a full minute's calls is allowed) and refills at limit / 60 per second;
so the 61st call within a minute of a fresh bucket at 60/min is refused, and ``Retry-After`` is the
whole seconds until a token is back (at least 1).

**Memory**: :class:`MemoryRateLimiter` keeps at most ``max_buckets`` buckets, least recently used
first out (an evicted bucket starts full again: a caller can only reset its own buckets by using
as many other credentials × agents, which it must hold). One process: N replicas allow N times the
limit; :class:`RateLimiter` is the interface a shared store (Redis) would implement.

Spec: the original platform's limits (product surface §3.4 item 11, §10: 60 per minute per key per
agent, ``Retry-After``); RFC 6585 §4 (429); RFC 9110 §10.2.3 (Retry-After).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import CredentialKind, Principal
from hivegate.errors import RateLimitedError
from hivegate.settings import RateLimitSettings

__all__ = ["MemoryRateLimiter", "RateLimiter", "RateLimits", "credential_key"]

SECONDS_PER_MINUTE = 60.0


class RateLimiter(Protocol):
    """Token buckets by key. Implementations: :class:`MemoryRateLimiter` (one process); a shared store later."""

    async def take(self, key: str, cost: float, per_minute: int) -> float:
        """Take ``cost`` tokens from ``key``'s bucket (capacity ``per_minute``, refill ``per_minute`` / 60 per s).

        Returns:
            0 when taken; else the seconds until the bucket would hold ``cost`` tokens (nothing is taken).
        """
        ...


class MemoryRateLimiter:
    """:class:`RateLimiter` in this process's memory, at most ``max_buckets`` buckets (LRU eviction).

    Args:
        max_buckets: buckets kept; the least recently used one is dropped beyond it.
        clock: monotonic seconds (tests pass a fake clock).
    """

    def __init__(self, max_buckets: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_buckets = max_buckets
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """key → (tokens, at): the tokens the bucket held at the clock reading ``at``."""

    def __len__(self) -> int:
        return len(self._buckets)

    async def take(self, key: str, cost: float, per_minute: int) -> float:
        """See :meth:`RateLimiter.take`. Synchronous inside (no ``await``): concurrent calls never overdraw."""
        now = self._clock()
        capacity = float(per_minute)
        rate = per_minute / SECONDS_PER_MINUTE
        held = self._buckets.pop(key, None)
        tokens = capacity if held is None else min(capacity, held[0] + (now - held[1]) * rate)
        if tokens >= cost:
            tokens -= cost
            wait = 0.0
        else:
            wait = (cost - tokens) / rate
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > self._max_buckets:
            self._buckets.popitem(last=False)
        return wait


def credential_key(principal: Principal) -> str | None:
    """The bucket owner of a principal (module docstring); None for an anonymous caller (not limited)."""
    kind = principal.kind
    if kind is CredentialKind.OAUTH:
        return f"grant:{principal.grant_id or principal.credential_id}"
    if kind is CredentialKind.NONE or principal.credential_id is None:
        return None
    return f"key:{principal.credential_id}"


class RateLimits:
    """The gateway's rate limits (``rate_limits.*`` settings) over a :class:`RateLimiter`; one per process.

    Args:
        settings: ``rate_limits`` (``enabled``, ``calls_per_minute``, ``per_key``, ``max_buckets``).
        limiter: where the buckets live; default a :class:`MemoryRateLimiter` of ``max_buckets``.
    """

    def __init__(self, settings: RateLimitSettings, limiter: RateLimiter | None = None) -> None:
        self._enabled = settings.enabled
        self._default = settings.calls_per_minute
        self._per_key = dict(settings.per_key)
        self._limiter = limiter if limiter is not None else MemoryRateLimiter(settings.max_buckets)

    def limit_for(self, principal: Principal, spec: AgentSpec) -> int:
        """Calls per minute for ``principal`` on ``spec`` (module docstring: agent, then key, then default)."""
        if spec.rate_limit_per_minute is not None:
            return spec.rate_limit_per_minute
        if principal.credential_id is not None and principal.kind is not CredentialKind.OAUTH:
            return self._per_key.get(principal.credential_id, self._default)
        return self._default

    async def check(self, principal: Principal, spec: AgentSpec, cost: float = 1.0) -> None:
        """Charge one call (``cost`` tokens) of ``spec`` to ``principal``'s bucket for that agent.

        Raises:
            RateLimitedError: the bucket is empty; ``Retry-After`` and ``data``:
                ``{"code": "rate_limited", "retryAfterSeconds": <int ≥ 1>, "limit": <calls per minute>}``.
        """
        if not self._enabled or cost <= 0:
            return
        owner = credential_key(principal)
        if owner is None:
            return
        per_minute = self.limit_for(principal, spec)
        wait = await self._limiter.take(f"{owner}|{spec.id}", cost, per_minute)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise RateLimitedError(
                f"Rate limit of {per_minute} calls per minute on agent {spec.id} reached; retry in {seconds} s",
                retry_after_seconds=seconds,
                data={"code": RateLimitedError.code, "retryAfterSeconds": seconds, "limit": per_minute},
            )
