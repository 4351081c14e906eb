"""The consent page of a real ``hivegate serve``: what a grant covers, how long it lasts, how to end it.

Issue 7 item 18. Alice owns five agents: ``helper`` (a callable with a skill tool, a resource, a
template and a prompt), ``notes`` (the demo SDK server), ``broken`` (its module does not exist),
``public`` (``auth = "none"``) and ``off`` (MCP disabled). Only the first two are offered.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import anyio
import pytest
import pytest_asyncio

import hivegate
from tests.auth.oauth.conftest import Browser, checkboxes, pkce, text_of
from tests.browser import chromium_page
from tests.e2e.registry_seed import create_users
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

CONFIG = """
[[agents]]
id = "helper"
name = "Helper"
owner = "alice"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents.skills]]
id = "shout"
name = "Shout"
expose_as_tool = true

[[agents.resources]]
uri = "helper://faq"
name = "faq"
text = "Questions."

[[agents.resource_templates]]
uri_template = "helper://manual/{product}"
name = "manual"
text = "Manual of {product}."

[[agents.prompts]]
name = "triage"
messages = [{ role = "user", text = "Triage this." }]

[[agents]]
id = "notes"
name = "Notes"
owner = "alice"
backend = { type = "python", server = "notes_agent:server" }

[[agents]]
id = "broken"
name = "Broken"
owner = "alice"
backend = { type = "python", callable = "no_such_module_for_consent:reply" }

[[agents]]
id = "public"
name = "Public"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "echo_agent:reply" }

[[agents]]
id = "off"
name = "Off"
owner = "alice"
mcp_enabled = false
"""
FOURTEEN_DAYS = str(14 * 86_400)


async def _seed(database_url: str) -> None:
    await create_users(database_url, {"alice": "alice-password"})


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("consent")
    config = folder / "hivegate.toml"
    config.write_text(CONFIG, encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    anyio.run(_seed, database_url)
    python_path = os.pathsep.join((str(Path(hivegate.__file__).resolve().parent.parent), str(ROOT / "examples")))
    env = {"PYTHONPATH": python_path, "HIVEGATE_SECURITY__REFRESH_TOKEN_TTL_SECONDS": FOURTEEN_DAYS}
    with run_gateway(Path(config), database_url=database_url, env=env) as running:
        yield running


@pytest_asyncio.fixture
async def consent_html(gateway: GatewayProcess) -> AsyncGenerator[str]:
    """The consent page alice sees after signing in for a client that asks for ``/mcp`` (all agents)."""
    browser = Browser(gateway.url)
    try:
        client = await browser.register(client_name="Desk App")
        _, challenge = pkce()
        request_id = await browser.start(client["client_id"], challenge, resource=f"{gateway.url}/mcp")
        request_id = await browser.sign_in(request_id)
        page = await browser.consent_page(request_id)
        assert page.status_code == 200, page.text
        yield page.text
    finally:
        await browser.aclose()


async def test_consent_offers_only_agents_a_grant_can_cover(consent_html: str) -> None:
    """Issue 7 item 18: agents that cannot start, need no credentials, or have MCP off are not offered."""
    assert checkboxes(consent_html) == {"helper": True, "notes": True}


async def test_consent_names_each_agents_tools_resources_and_prompts(consent_html: str) -> None:
    """Issue 7 item 18: each offered agent lists the names of its tools, resources and prompts."""
    text = text_of(consent_html).replace(" ,", ",")  # text_of puts a space where each <code> ends
    assert "Helper helper Tools: helper, shout Resources: faq, manual Prompts: triage" in text
    # The SDK server's own items (from the server object, not the spec).
    assert "Notes notes Tools: none Resources: read_note Prompts: summarize_note" in text


async def test_consent_says_how_long_the_grant_lasts_and_how_to_end_it(consent_html: str) -> None:
    """Issue 7 item 18: the lifetime comes from security.refresh_token_ttl_seconds; revocation is explained."""
    text = text_of(consent_html)
    assert "if it does not use it for 14 days, the grant ends by itself" in text
    assert "hivegate grants list --user alice" in text
    assert "hivegate grants revoke GRANT_ID" in text
    assert "Ask the operator of this gateway" in text


def test_consent_page_renders_in_chromium(consent_html: str, tmp_path: Path) -> None:
    """Issue 7 item 18: in a phone-sized Chromium window the page fits and the grant details are visible."""
    with chromium_page() as page:
        page.set_viewport_size({"width": 390, "height": 844})
        page.set_content(consent_html)
        shot = tmp_path / "consent.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        for selector in ("#agent-1-covers", "#agent-2-covers", "#grant-lifetime", "#grant-revoke"):
            assert page.locator(selector).is_visible(), selector
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow == 0
