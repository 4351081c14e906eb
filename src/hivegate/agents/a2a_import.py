"""An agent made from a remote A2A agent's card (``hivegate agents import-a2a``; issue 11 item 1).

Spec: A2A 1.0 §4.4 (the agent card: ``name``, ``description``, ``version``, ``skills``); the card's
well-known path (A2A 1.0 §8.2, ``/.well-known/agent-card.json``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import anyio
from a2a.types import AgentCard, AgentSkill

from hivegate.agents.model import A2ABackendSpec, AgentSpec, SkillSpec
from hivegate.backends.a2a import WELL_KNOWN_CARD_PATH, A2ABackend, card_url_of

__all__ = ["WELL_KNOWN_CARD_PATH", "agent_from_card", "card_url_of", "fetch_card"]

_NOT_ID = re.compile(r"[^A-Za-z0-9_-]+")
_NOT_SKILL_ID = re.compile(r"[^A-Za-z0-9_.-]+")


async def fetch_card(agent_id: str, backend: A2ABackendSpec) -> AgentCard:
    """The card at ``backend.card_url`` (:func:`card_url_of`), fetched with the backend's credentials and limits.

    Raises:
        AgentServiceUnavailableError: the card cannot be fetched or is not an A2A 1.0 card (the
            cause is logged).
        ServiceTimeoutError: no answer within ``backend.timeout_seconds``.
    """
    upstream = A2ABackend(agent_id, backend)
    async with anyio.create_task_group() as tasks:  # the a2a backend starts no task of its own
        await upstream.start(tasks)
    try:
        return await upstream.fetch_card()
    finally:
        await upstream.aclose()


def agent_from_card(
    card: AgentCard, backend: A2ABackendSpec, *, agent_id: str | None, owner: str, existing: AgentSpec | None
) -> AgentSpec:
    """The agent fronting the card's agent: its name, description, version and skills from the card, the
    ``a2a`` backend ``backend``; everything else kept from ``existing`` (a refresh) or the defaults.

    Raises:
        ValueError: no usable agent id (none given, and none can be made from the card's name), or the
            card's data does not make a valid agent (pydantic's ``ValidationError``).
    """
    chosen = agent_id or _NOT_ID.sub("-", card.name).strip("-_")[:64]
    if not chosen:
        raise ValueError("the card's name makes no agent id: give one with --id")
    fields = {
        "id": chosen,
        "name": card.name or chosen,
        "description": card.description,
        "version": card.version or "0.0.0",
        "owner": owner,
        "skills": _skills(card.skills),
        "backend": backend,
    }
    if existing is not None:
        kept = existing.model_dump(by_alias=True, exclude={"id", "name", "description", "version", "skills", "backend"})
        return AgentSpec.model_validate({**kept, **fields, "owner": existing.owner if owner == "" else owner})
    return AgentSpec.model_validate(fields)


def _skills(skills: Sequence[AgentSkill]) -> list[SkillSpec]:
    """The card's skills as the agent's (for its own agent card; none becomes an MCP tool: the message
    tool reaches the upstream, which picks the skill). Ids that the gateway's pattern refuses are made
    safe, and a duplicate id is dropped."""
    out: list[SkillSpec] = []
    seen: set[str] = set()
    for skill in skills:
        skill_id = _NOT_SKILL_ID.sub("-", skill.id).strip("-")[:64] or None
        if skill_id is None or skill_id in seen:
            continue
        seen.add(skill_id)
        out.append(
            SkillSpec(
                id=skill_id,
                name=skill.name or skill_id,
                description=skill.description,
                tags=tuple(skill.tags),
                examples=tuple(skill.examples),
            )
        )
    return out
