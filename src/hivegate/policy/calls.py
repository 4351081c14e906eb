"""The checks every plane runs at its entry before a call of an agent (rate limit, then attachments), and the
call contract it runs the call under (conversations and idempotency keys: :mod:`hivegate.calls.contract`).

:class:`CallPolicy` holds the process's :class:`~hivegate.policy.rate_limits.RateLimits` and
:class:`~hivegate.files.uploads.Files`; the agent host hands it to every plane (MCP ``tools/call`` on
both endpoints, A2A ``SendMessage``, REST invoke), which calls, before invoking anything:

1. :meth:`CallPolicy.check_rate` (``rate_limited``, 429 with ``Retry-After``);
2. :meth:`CallPolicy.resolve_attachments` (``invalid_params`` for a ``file_id`` the caller may not use).

:data:`OPEN_POLICY` (no limit, no file store: a ``file_id`` is ``invalid_params``) serves call targets
built without a gateway (tests, tools).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import Principal
from hivegate.backends.base import Attachment
from hivegate.calls.contract import OPEN_CONTRACT, CallContract
from hivegate.files.attachments import check_attachments, resolve_attachments
from hivegate.files.uploads import Files
from hivegate.policy.rate_limits import RateLimits

__all__ = ["OPEN_POLICY", "CallPolicy"]


@dataclass(frozen=True, slots=True)
class CallPolicy:
    """The rate limits, the uploaded files and the call contract of one gateway (module docstring)."""

    limits: RateLimits | None = None
    files: Files | None = None
    contract: CallContract = OPEN_CONTRACT

    async def check_rate(self, principal: Principal, spec: AgentSpec, cost: float = 1.0) -> None:
        """Charge one call of ``spec`` to ``principal`` (:meth:`RateLimits.check`).

        Raises:
            RateLimitedError: over the limit (``data.retryAfterSeconds``, ``Retry-After``).
        """
        if self.limits is not None:
            await self.limits.check(principal, spec, cost)

    async def check_attachments(self, principal: Principal, agent_id: str, attachments: Sequence[Attachment]) -> None:
        """Refuse attachments the call may not carry, reading no bytes (:func:`check_attachments`).

        Raises:
            InvalidParamsError: too many, or a ``file_id`` the caller may not use on ``agent_id``.
        """
        if attachments:
            await check_attachments(self.files, principal, agent_id, attachments)

    async def resolve_attachments(
        self, principal: Principal, agent_id: str, attachments: Sequence[Attachment]
    ) -> tuple[Attachment, ...]:
        """``attachments`` with each ``file_id`` resolved to the file's bytes (:func:`resolve_attachments`).

        Raises:
            InvalidParamsError: as :meth:`check_attachments`.
        """
        return await resolve_attachments(self.files, principal, agent_id, attachments)


OPEN_POLICY = CallPolicy()
"""No rate limit, no uploaded files, no call records (:data:`~hivegate.calls.contract.OPEN_CONTRACT`)."""
