"""``GET /`` on a real server: the endpoints and docs, as HTML or JSON, and nothing about which agents exist."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway_process import GatewayProcess, run_gateway

CONFIG = """
[[agents]]
id = "public-demo-agent"
name = "Public"
owner = "alice"
auth = "none"

[[agents]]
id = "private-payroll-agent"
name = "Payroll"
owner = "alice"
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = tmp_path_factory.mktemp("home") / "hivegate.toml"
    config.write_text(CONFIG, encoding="utf-8")
    with run_gateway(Path(config)) as running:
        yield running


def test_home_page_names_the_endpoints(gateway: GatewayProcess) -> None:
    """Issue 7 item 17: GET / is a small HTML page naming the endpoint patterns and the docs."""
    response = httpx.get(f"{gateway.url}/", headers={"Accept": "text/html,*/*;q=0.8"}, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "script-src" not in response.headers["content-security-policy"]  # default-src 'none' covers it
    page = response.text
    base = gateway.url
    for expected in (
        f"{base}/{{agentId}}/mcp",
        f"{base}/agents/{{agentId}}/mcp",
        f'<a href="{base}/mcp">',
        f'<a href="{base}/.well-known/oauth-authorization-server">',
        f"{base}/.well-known/oauth-protected-resource/{{agentId}}/mcp",
        f'<a href="{base}/healthz">',
        f'<a href="{base}/readyz">',
        "docs/configuration.md",
        "docs/auth.md",
    ):
        assert expected in page, expected
    assert "public-demo-agent" not in page
    assert "private-payroll-agent" not in page
    assert "development-secret" not in page


def test_home_page_as_json(gateway: GatewayProcess) -> None:
    """Issue 7 item 17: with Accept: application/json (preferred over HTML) the same facts come as JSON."""
    for accept in ("application/json", "text/html;q=0.5, application/json", "application/*"):
        response = httpx.get(f"{gateway.url}/", headers={"Accept": accept}, timeout=10)
        assert response.status_code == 200, accept
        assert response.headers["content-type"] == "application/json", accept
        document = response.json()
        assert document["endpoints"]["user_mcp"] == f"{gateway.url}/mcp"
        assert document["endpoints"]["agent_mcp"] == f"{gateway.url}/{{agentId}}/mcp"
        assert (
            f"{gateway.url}/.well-known/oauth-protected-resource/mcp"
            in (document["endpoints"]["protected_resource_metadata"])
        )
        assert "docs/configuration.md" in document["docs"]
        assert "agent" not in {key.lower() for key in document}
    for accept in ("", "*/*", "text/html, application/json", "application/json;q=0.5, text/html"):
        shown = httpx.get(f"{gateway.url}/", headers={"Accept": accept}, timeout=10)
        assert shown.headers["content-type"].startswith("text/html"), accept
    assert httpx.post(f"{gateway.url}/", timeout=10).status_code == 405
