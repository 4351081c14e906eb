"""Agent cards built from the registry: ``agent_card(spec, base)`` and ``gateway_card(base)``, as a2a-sdk types.

Every URL a card names is built from ``base`` (:meth:`hivegate.settings.Settings.base_url`, i.e.
``server.public_url``), never from a request. The cards are the SDK's protobuf ``AgentCard``
messages, so a wrong field name or type fails when the card is built; ``card_document`` turns
one into its ProtoJSON document (camelCase keys, defaults left out), the body served.

What an agent's card claims (``docs/a2a.md``):

- ``supportedInterfaces``: the JSON-RPC binding then the HTTP+JSON binding, both at
  :func:`a2a_url` (``{base}/{id}/a2a``; HTTP+JSON appends ``/message:send``, ``/tasks/…``),
  ``protocolVersion`` 1.0 (:mod:`hivegate.a2a.bindings`).
- ``capabilities``: ``streaming`` true (both bindings stream); ``pushNotifications`` and
  ``extendedAgentCard`` false; the REST invoke and the MCP endpoint (when ``mcp_enabled``) as
  the extension :data:`INTERFACES_EXTENSION_URI`.
- ``securitySchemes`` / ``securityRequirements``: the credentials the agent's endpoints take
  (OAuth authorization code + PKCE with scope ``agent:{id}``; ``oag_``/``bak_`` keys as bearer;
  ``bak_`` in ``X-Agent-API-Key``), any one of them; none for an ``auth = "none"`` agent.
- REQUIRED strings and lists never go out empty: an empty name falls back to the id, an empty
  description to the name (agent and skill alike); a skill without tags is tagged with the
  agent's id; an agent without skills has one skill for its message tool (id = the agent id).

Spec: A2A 1.0 §4.4 (AgentCard and its parts), §8 (agent discovery), a2a.proto ``lf.a2a.v1``.
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    AuthorizationCodeOAuthFlow,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.json_format import MessageToDict

from hivegate.agents.model import AgentSpec, SkillSpec
from hivegate.auth.principal import agent_scope
from hivegate.auth.urls import agent_resource, resource_metadata_url, user_resource

__all__ = [
    "AGENT_CARD_PATH",
    "DEFAULT_MODES",
    "GATEWAY_EXTENSION_URI",
    "INTERFACES_EXTENSION_URI",
    "PROTOCOL_VERSION",
    "a2a_url",
    "agent_card",
    "agent_card_url",
    "card_document",
    "gateway_card",
]

AGENT_CARD_PATH = "/.well-known/agent-card.json"
"""The well-known name of a card (A2A 1.0 §8.2, RFC 8615), under an agent's path or the root."""

PROTOCOL_VERSION = "1.0"
"""The A2A version the bindings speak (``AgentInterface.protocolVersion``; v0.3 clients are served too)."""

DEFAULT_MODES = ("text/plain",)
"""An agent's message is text and its reply is text (the MCP message tool's ``message`` string)."""

JSON_MODES = ("application/json",)
"""A skill with an ``input_schema`` takes its arguments as one JSON object."""

INTERFACES_EXTENSION_URI = "urn:hivegate:a2a:ext:interfaces:v1"
"""The extension carrying the agent's other endpoints; ``params``: ``rest`` (``/{id}/v1/invoke``,
always), and when ``mcp_enabled`` ``mcp`` and ``mcpAlias`` (the MCP endpoint's two URLs) and
``protectedResourceMetadata`` (its RFC 9728 document). An identifier, not a URL (documented in
``docs/a2a.md``)."""

GATEWAY_EXTENSION_URI = "urn:hivegate:a2a:ext:gateway:v1"
"""The root card's extension; ``params``: ``agentCardUrlTemplate`` and ``userMcp``."""

OAUTH_SCHEME = "oauth"
BEARER_SCHEME = "bearer"
AGENT_KEY_SCHEME = "agentApiKey"
AGENT_KEY_HEADER = "X-Agent-API-Key"


def agent_card_url(base: str, agent_id: str) -> str:
    """``{base}/{agent_id}/.well-known/agent-card.json``: where the agent's card is served."""
    return f"{base}/{agent_id}{AGENT_CARD_PATH}"


def a2a_url(base: str, agent_id: str) -> str:
    """``{base}/{agent_id}/a2a``: the agent's JSON-RPC endpoint and the HTTP+JSON binding's base URL."""
    return f"{base}/{agent_id}/a2a"


def agent_card(spec: AgentSpec, base: str) -> AgentCard:
    """The A2A 1.0 card of the agent ``spec`` on the gateway at ``base`` (module docstring for each field).

    ``provider``, ``documentationUrl``, ``iconUrl`` and ``signatures`` are left out: hivegate has
    no setting or agent field to fill them from (``docs/a2a.md``).
    """
    extensions = [_interfaces_extension(spec, base)]
    schemes, requirements = _security(spec, base)
    name = spec.name or spec.id
    url = a2a_url(base, spec.id)
    return AgentCard(
        name=name,
        description=spec.description or name,
        version=spec.version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION),
            AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version=PROTOCOL_VERSION),
        ],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=False, extensions=extensions
        ),
        security_schemes=schemes,
        security_requirements=requirements,
        default_input_modes=DEFAULT_MODES,
        default_output_modes=DEFAULT_MODES,
        skills=[_skill(skill, spec.id) for skill in spec.skills] or [_message_skill(spec)],
    )


def gateway_card(base: str, version: str) -> AgentCard:
    """The root card: the gateway itself, which hosts agents but is not one (``docs/a2a.md``).

    It names where agents' cards are (``{base}/{agentId}/.well-known/agent-card.json``) and the
    user-level MCP endpoint, and lists no agent: which agents exist is not disclosed here. It has
    no interfaces and no skills (both REQUIRED in A2A 1.0; the gateway takes no A2A messages).
    """
    params = {"agentCardUrlTemplate": agent_card_url(base, "{agentId}"), "userMcp": user_resource(base)}
    extension = AgentExtension(
        uri=GATEWAY_EXTENSION_URI,
        description="Each agent on this gateway has its own card at agentCardUrlTemplate; userMcp is the "
        "MCP endpoint that serves every agent the caller may use.",
        required=False,
        params=params,
    )
    return AgentCard(
        name="hivegate",
        description=f"The hivegate gateway at {base}. It hosts agents; each has its own Agent Card at "
        f"{agent_card_url(base, '{agentId}')}.",
        version=version,
        capabilities=AgentCapabilities(
            streaming=False, push_notifications=False, extended_agent_card=False, extensions=[extension]
        ),
        default_input_modes=DEFAULT_MODES,
        default_output_modes=DEFAULT_MODES,
    )


def card_document(card: AgentCard) -> dict[str, Any]:
    """The ProtoJSON document of ``card`` (A2A 1.0 §5.5: camelCase keys; fields at their default left out,
    except the presence-tracked booleans of ``capabilities``, which are sent even when false)."""
    return MessageToDict(card)


def _skill(skill: SkillSpec, agent_id: str) -> AgentSkill:
    name = skill.name or skill.id
    return AgentSkill(
        id=skill.id,
        name=name,
        description=skill.description or name,
        tags=skill.tags or (agent_id,),
        examples=skill.examples,
        input_modes=JSON_MODES if skill.input_schema is not None else (),
    )


def _message_skill(spec: AgentSpec) -> AgentSkill:
    """The one skill of an agent that declares none: its message tool (a text message, a text reply)."""
    name = spec.name or spec.id
    return AgentSkill(id=spec.id, name=name, description=spec.description or name, tags=(spec.id,))


def _interfaces_extension(spec: AgentSpec, base: str) -> AgentExtension:
    agent_id = spec.id
    params = {"rest": f"{base}/{agent_id}/v1/invoke"}
    if spec.mcp_enabled:
        resource = agent_resource(base, agent_id)
        params["mcp"] = resource
        params["mcpAlias"] = f"{base}/agents/{agent_id}/mcp"
        params["protectedResourceMetadata"] = resource_metadata_url(base, resource.removeprefix(base))
    return AgentExtension(
        uri=INTERFACES_EXTENSION_URI,
        description=(
            "The agent's REST invoke and (when on) MCP endpoint (Streamable HTTP), with the same credentials"
            " as this card names."
        ),
        required=False,
        params=params,
    )


def _security(spec: AgentSpec, base: str) -> tuple[dict[str, SecurityScheme], list[SecurityRequirement]]:
    """The schemes and the requirements (any one of them, A2A 1.0 §4.5) of ``spec``; none when ``auth = "none"``."""
    if spec.auth == "none":
        return {}, []
    scope = agent_scope(spec.id)
    flow = AuthorizationCodeOAuthFlow(
        authorization_url=f"{base}/oauth/authorize",
        token_url=f"{base}/oauth/token",
        refresh_url=f"{base}/oauth/token",
        scopes={scope: f"Use the agent {spec.id}"},
        pkce_required=True,
    )
    oauth = OAuth2SecurityScheme(
        description="hivegate's OAuth 2.1 authorization server (authorization code with PKCE S256).",
        flows=OAuthFlows(authorization_code=flow),
        oauth2_metadata_url=f"{base}/.well-known/oauth-authorization-server",
    )
    bearer = HTTPAuthSecurityScheme(
        description="An API key as a bearer token: the owner's oag_ key, or a bak_ key made for this agent.",
        scheme="Bearer",
    )
    agent_key = APIKeySecurityScheme(
        description="A bak_ key made for this agent.", location="header", name=AGENT_KEY_HEADER
    )
    schemes = {
        OAUTH_SCHEME: SecurityScheme(oauth2_security_scheme=oauth),
        BEARER_SCHEME: SecurityScheme(http_auth_security_scheme=bearer),
        AGENT_KEY_SCHEME: SecurityScheme(api_key_security_scheme=agent_key),
    }
    requirements = [
        SecurityRequirement(schemes={OAUTH_SCHEME: StringList(list=[scope])}),
        SecurityRequirement(schemes={BEARER_SCHEME: StringList()}),
        SecurityRequirement(schemes={AGENT_KEY_SCHEME: StringList()}),
    ]
    return schemes, requirements
