"""The consent page's grant details on the OAuth test server (issue 7 item 18); the real-server run,
with backends that start or fail, is ``tests/e2e/test_consent_coverage.py``."""

from __future__ import annotations

from hivegate.agents.model import AgentSpec
from hivegate.auth.oauth.pages import duration_text
from tests.auth.oauth.conftest import Browser, OAuthServer, checkboxes, pkce, text_of


def test_duration_text_uses_the_largest_whole_unit() -> None:
    """Issue 7 item 18: the grant lifetime is shown for people."""
    assert duration_text(30 * 86_400) == "30 days"
    assert duration_text(86_400) == "1 day"
    assert duration_text(36 * 3600) == "36 hours"
    assert duration_text(5400) == "90 minutes"
    assert duration_text(3601) == "3601 seconds"


async def test_public_agents_are_not_offered_and_the_grant_is_explained(oauth: OAuthServer, browser: Browser) -> None:
    """Issue 7 item 18: an ``auth = "none"`` agent needs no grant, so consent does not offer it (nor accept it);
    the page says what each grant covers, how long it lasts (security.refresh_token_ttl_seconds) and how to end it."""
    await oauth.registry.apply(
        [
            *oauth.registry.all(),
            AgentSpec(id="open", name="Open", owner="alice", auth="none"),
            AgentSpec(
                id="faq",
                name="FAQ",
                owner="alice",
                resources=[{"uri": "faq://all", "name": "questions", "text": "Q"}],  # pyright: ignore[reportArgumentType]  # validated into ResourceSpec
                prompts=[{"name": "ask", "messages": [{"role": "user", "text": "?"}]}],  # pyright: ignore[reportArgumentType]  # validated into PromptSpec
            ),
        ]
    )
    client = await browser.register()
    _, challenge = pkce()
    request_id = await browser.start(client["client_id"], challenge, resource=f"{oauth.base}/mcp")
    request_id = await browser.sign_in(request_id)
    page = await browser.consent_page(request_id)
    assert page.status_code == 200
    assert checkboxes(page.text) == {"alpha": True, "beta": True, "faq": True}
    text = text_of(page.text)
    assert "FAQ faq Tools: none Resources: questions Prompts: ask" in text
    days = oauth.settings.security.refresh_token_ttl_seconds // 86_400
    assert f"if it does not use it for {days} days, the grant ends by itself" in text
    assert "hivegate grants revoke GRANT_ID" in text

    refused = await browser.consent(request_id, ["alpha", "open"])
    assert refused.status_code == 400
    assert "You can only grant your own MCP-enabled agents." in refused.text
