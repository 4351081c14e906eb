"""Agent cards on a real server (issue 9 items 1 and 5): parsed by a2a-sdk, URLs from public_url, ETag/304, 404s.

Two servers: the demo configuration (``examples/hivegate.toml``) and a small one with an agent that
asks for credentials (public: a private one's card is 404 without its owner's credential, tested in
``test_discovery.py``), one with ``a2a_enabled = false`` and one without description or skills; both
with ``server.public_url`` set to a host the tests never connect to, so every URL a card names must
come from it and none from the request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import AgentCard
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import ParseDict

from hivegate.agents.loader import load_agents_file
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

PUBLIC_URL = "https://cards.example.test"
HOSTILE_HOST = "evil.example.com"
DEMO = ROOT / "examples" / "hivegate.toml"
CONFIG = """
[[agents]]
id = "payroll"
name = "Payroll"
description = "Answers payroll questions."
version = "2.0.0"
owner = "alice"
visibility = "public"  # a private agent's card is its owner's only (tests/e2e/test_discovery.py)

[[agents.skills]]
id = "payslip"
name = "Payslip"
description = "One payslip by month."
tags = ["hr", "pay"]
examples = ["March 2026"]
input_schema = { type = "object", properties = { month = { type = "string" } }, required = ["month"] }

[[agents.skills]]
id = "bare"
name = "Bare skill"

[[agents]]
id = "a2a-off"
name = "No A2A"
owner = "alice"
a2a_enabled = false

[[agents]]
id = "oauth"
name = "Named like the OAuth plane's prefix"
owner = "alice"
auth = "none"

[[agents]]
id = "terse"
name = "Terse"
owner = "alice"
auth = "none"
mcp_enabled = false
"""
ENV = {"HIVEGATE_SERVER__PUBLIC_URL": PUBLIC_URL, "PYTHONPATH": str(ROOT / "examples")}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with run_gateway(DEMO, env=ENV) as running:
        yield running


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = tmp_path_factory.mktemp("cards") / "agents.toml"
    config.write_text(CONFIG, encoding="utf-8")
    with run_gateway(config, env=ENV) as running:
        yield running


def _get(gateway: GatewayProcess, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{gateway.url}{path}", headers=headers or {}, timeout=10, follow_redirects=False)


def _parse(document: dict[str, Any]) -> AgentCard:
    """The served JSON as the SDK's AgentCard; unknown fields and wrong types raise (ParseError)."""
    return ParseDict(document, AgentCard())


def _missing_required(card: AgentCard) -> set[str]:
    """The REQUIRED fields (A2A 1.0 field_behavior) the SDK's validator reports as missing."""
    try:
        validate_proto_required_fields(card)
    except InvalidParamsError as exc:  # data = {"errors": [{"field": ..., "message": ...}]}
        errors: list[dict[str, str]] = (exc.data or {})["errors"]
        return {error["field"] for error in errors}
    return set()


def _urls(value: object) -> Iterator[str]:
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        yield value
    elif isinstance(value, dict):
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]  # JSON
            yield from _urls(item)
    elif isinstance(value, list):
        for item in value:  # pyright: ignore[reportUnknownVariableType]  # JSON
            yield from _urls(item)


def test_every_demo_agent_card_parses_with_the_sdk(demo: GatewayProcess) -> None:
    """Each demo agent's card is an A2A 1.0 AgentCard for the SDK that passes its REQUIRED-field validation,
    lists the JSON-RPC and HTTP+JSON bindings under the agent, and names only public_url URLs."""
    specs = load_agents_file(DEMO)
    assert specs
    for spec in specs:
        response = _get(demo, f"/{spec.id}/.well-known/agent-card.json", {"Host": HOSTILE_HOST})
        assert response.status_code == 200, spec.id
        assert response.headers["content-type"] == "application/json"
        document = response.json()
        card = _parse(document)
        assert (card.name, card.version) == (spec.name, spec.version)
        assert _missing_required(card) == set(), spec.id
        assert [(i["url"], i["protocolBinding"], i["protocolVersion"]) for i in document["supportedInterfaces"]] == [
            (f"{PUBLIC_URL}/{spec.id}/a2a", "JSONRPC", "1.0"),
            (f"{PUBLIC_URL}/{spec.id}/a2a", "HTTP+JSON", "1.0"),
        ]
        assert card.capabilities.streaming
        assert list(card.default_input_modes) == ["text/plain"]
        urls = list(_urls(document))
        assert urls, spec.id
        assert all(url.startswith(f"{PUBLIC_URL}/") for url in urls), urls
        assert HOSTILE_HOST not in response.text
        assert card.capabilities.extensions[0].params["mcp"] == f"{PUBLIC_URL}/{spec.id}/mcp"


async def test_sdk_client_resolves_the_card_and_picks_the_jsonrpc_binding(gateway: GatewayProcess) -> None:
    """The SDK's resolver, from the agent's base URL alone, reads the card; the client picks the JSON-RPC
    binding at the public URL (calls are tested in test_a2a_bindings.py, on a server whose public URL is its own)."""
    async with httpx.AsyncClient(timeout=10) as http:
        card = await A2ACardResolver(http, f"{gateway.url}/payroll").get_agent_card()
        assert (card.name, len(card.supported_interfaces)) == ("Payroll", 2)
        client = await create_client(card, client_config=ClientConfig(httpx_client=http))
        await client.close()


def test_credential_requiring_agent_card_is_public_and_names_the_credentials(gateway: GatewayProcess) -> None:
    response = _get(gateway, "/payroll/.well-known/agent-card.json", {"Host": HOSTILE_HOST})
    assert response.status_code == 200
    card = _parse(response.json())
    assert _missing_required(card) == set()
    assert card.capabilities.streaming
    oauth = card.security_schemes["oauth"].oauth2_security_scheme
    flow = oauth.flows.authorization_code
    assert oauth.oauth2_metadata_url == f"{PUBLIC_URL}/.well-known/oauth-authorization-server"
    assert (flow.authorization_url, flow.token_url) == (f"{PUBLIC_URL}/oauth/authorize", f"{PUBLIC_URL}/oauth/token")
    assert dict(flow.scopes).keys() == {"agent:payroll"}
    assert flow.pkce_required
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    agent_key = card.security_schemes["agentApiKey"].api_key_security_scheme
    assert (agent_key.location, agent_key.name) == ("header", "X-Agent-API-Key")
    requirements = [{name: list(scopes.list) for name, scopes in r.schemes.items()} for r in card.security_requirements]
    assert requirements == [{"oauth": ["agent:payroll"]}, {"bearer": []}, {"agentApiKey": []}]
    payslip, bare = card.skills
    assert (list(payslip.tags), list(payslip.examples)) == (["hr", "pay"], ["March 2026"])
    assert list(payslip.input_modes) == ["application/json"]
    assert (bare.description, list(bare.tags), list(bare.input_modes)) == ("Bare skill", ["payroll"], [])


def test_fallbacks_fill_the_required_fields(gateway: GatewayProcess) -> None:
    """No description, no skills, MCP off, auth none: a valid card with no security and no MCP endpoint."""
    card = _parse(_get(gateway, "/terse/.well-known/agent-card.json").json())
    assert _missing_required(card) == set()
    assert card.description == "Terse"
    assert [(s.id, list(s.tags)) for s in card.skills] == [("terse", ["terse"])]
    assert not card.security_schemes
    assert not card.security_requirements
    assert dict(card.capabilities.extensions[0].params) == {"rest": f"{PUBLIC_URL}/terse/v1/invoke"}


def test_etag_and_cache_control(gateway: GatewayProcess) -> None:
    first = _get(gateway, "/payroll/.well-known/agent-card.json")
    etag = first.headers["etag"]
    assert etag.startswith('"')  # strong: not W/
    assert first.headers["cache-control"] == "public, max-age=300"
    assert first.headers["access-control-allow-origin"] == "*"
    assert _get(gateway, "/payroll/.well-known/agent-card.json").headers["etag"] == etag
    alias = _get(gateway, "/agents/payroll/.well-known/agent-card.json")
    assert (alias.status_code, alias.headers["etag"], alias.content) == (200, etag, first.content)
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        revalidated = _get(gateway, "/payroll/.well-known/agent-card.json", {"If-None-Match": header})
        assert revalidated.status_code == 304, header
        assert revalidated.content == b""
        assert revalidated.headers["etag"] == etag
        assert revalidated.headers["cache-control"] == "public, max-age=300"
    stale = _get(gateway, "/payroll/.well-known/agent-card.json", {"If-None-Match": '"stale"'})
    assert (stale.status_code, stale.content) == (200, first.content)
    other = _get(gateway, "/terse/.well-known/agent-card.json", {"If-None-Match": etag})
    assert other.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/a2a-off/.well-known/agent-card.json",
        "/agents/a2a-off/.well-known/agent-card.json",
        "/nobody/.well-known/agent-card.json",
        "/agents/nobody/.well-known/agent-card.json",
        "/bad%20id/.well-known/agent-card.json",
    ],
)
def test_disabled_or_unknown_agent_is_404_json(gateway: GatewayProcess, path: str) -> None:
    response = _get(gateway, path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (404, "NOT_FOUND")
    assert error["details"][0]["metadata"]["code"] == "agent_not_found"
    assert error["details"][0]["reason"] == "AGENT_NOT_FOUND"


def test_legacy_paths_redirect_to_public_url(gateway: GatewayProcess) -> None:
    canonical = f"{PUBLIC_URL}/payroll/.well-known/agent-card.json"
    for path in (
        "/payroll/.well-known/agent.json",
        "/agents/payroll/.well-known/agent.json",
        "/.well-known/agent-card.json?id=payroll",
        "/.well-known/agent.json?id=payroll",
    ):
        response = _get(gateway, path, {"Host": HOSTILE_HOST})
        assert (response.status_code, response.headers["location"]) == (308, canonical), path
    root = _get(gateway, "/.well-known/agent.json", {"Host": HOSTILE_HOST})
    assert (root.status_code, root.headers["location"]) == (308, f"{PUBLIC_URL}/.well-known/agent-card.json")
    malformed = _get(gateway, "/.well-known/agent-card.json?id=../x")
    assert malformed.status_code == 404
    assert malformed.json()["error"]["details"][0]["metadata"]["code"] == "agent_not_found"


def test_root_card_describes_the_gateway_and_lists_no_agent(gateway: GatewayProcess) -> None:
    response = _get(gateway, "/.well-known/agent-card.json", {"Host": HOSTILE_HOST})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=300"
    card = _parse(response.json())
    assert card.name == "hivegate"
    assert _missing_required(card) == {"supported_interfaces", "skills"}
    params = card.capabilities.extensions[0].params
    assert params["agentCardUrlTemplate"] == f"{PUBLIC_URL}/{{agentId}}/.well-known/agent-card.json"
    assert all(url.startswith(f"{PUBLIC_URL}/") for url in _urls(response.json()))
    for agent_id in ("payroll", "terse", "a2a-off", "Named like"):
        assert agent_id not in response.text
    assert _get(gateway, "/.well-known/agent-card.json", {"If-None-Match": response.headers["etag"]}).status_code == 304


def test_agent_named_like_a_prefix_has_its_card(gateway: GatewayProcess) -> None:
    """/oauth/* belongs to the OAuth plane, but /oauth/.well-known/agent-card.json is the agent oauth's card."""
    response = _get(gateway, "/oauth/.well-known/agent-card.json")
    assert response.status_code == 200
    assert _parse(response.json()).name == "Named like the OAuth plane's prefix"
    legacy = _get(gateway, "/oauth/.well-known/agent.json")
    assert (legacy.status_code, legacy.headers["location"]) == (308, f"{PUBLIC_URL}/oauth/.well-known/agent-card.json")
    assert _get(gateway, "/oauth/nothing").json()["error"] == "not_found"  # still the OAuth plane
    odd = _get(gateway, "/.well-known/.well-known/agent-card.json")
    assert odd.status_code == 404
    assert odd.json()["error"]["details"][0]["metadata"]["code"] == "agent_not_found"


def test_oauth_documents_still_served_under_well_known(gateway: GatewayProcess) -> None:
    """The root card takes two exact paths; the rest of /.well-known/* stays with the OAuth plane."""
    metadata = _get(gateway, "/.well-known/oauth-authorization-server")
    assert metadata.status_code == 200
    assert metadata.json()["issuer"] == PUBLIC_URL
    assert _get(gateway, "/.well-known/oauth-protected-resource/payroll/mcp").status_code == 200


@pytest.mark.parametrize(
    "path", ["/payroll/.well-known/agent-card.json", "/.well-known/agent-card.json", "/payroll/.well-known/agent.json"]
)
def test_other_methods(gateway: GatewayProcess, path: str) -> None:
    """HEAD as GET without a body; OPTIONS a CORS preflight; anything else 405 method_not_allowed in A2A JSON."""
    got = _get(gateway, path)
    head = httpx.head(f"{gateway.url}{path}", timeout=10)
    assert (head.status_code, head.content) == (got.status_code, b"")
    assert head.headers.get("etag") == got.headers.get("etag")
    preflight = httpx.options(f"{gateway.url}{path}", timeout=10)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "if-none-match" in preflight.headers["access-control-allow-headers"].lower()
    for method in ("POST", "PUT", "DELETE"):
        response = httpx.request(method, f"{gateway.url}{path}", timeout=10)
        assert response.status_code == 405, method
        assert response.headers["allow"] == "GET, HEAD, OPTIONS"
        assert response.json()["error"]["details"][0]["metadata"]["code"] == "method_not_allowed"
