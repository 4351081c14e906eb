"""completion/complete caps at 100 values with ``total`` and ``hasMore``; /healthz and /readyz answer.

Spec: MCP 2026-07-28 server/utilities/completion ("MUST NOT exceed 100 items").
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from mcp import Client
from mcp_types import PromptReference, ResourceTemplateReference

from tests.gateway_process import GatewayProcess, run_gateway

VALUES = [f"v{i:03d}" for i in range(150)]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = tmp_path_factory.mktemp("completion") / "agents.toml"
    config.write_text(
        f"""
[[agents]]
id = "many"
name = "Many"
owner = "alice"
auth = "none"

[[agents.prompts]]
name = "pick"
arguments = [{{ name = "choice", required = true, completions = {json.dumps(VALUES)} }}]
messages = [{{ text = "You picked {{choice}}" }}]

[[agents.resource_templates]]
uri_template = "item://{{code}}"
name = "items"
text = "item {{code}}"
completions = {{ code = ["a1", "a2", "b1"] }}
""",
        encoding="utf-8",
    )
    with run_gateway(config) as running:
        yield running


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_completion_is_capped_at_100_with_total_and_has_more(gateway: GatewayProcess, mode: str) -> None:
    async with Client(f"{gateway.url}/many/mcp", mode=mode) as client:  # type: ignore[arg-type]
        everything = await client.complete(
            PromptReference(type="ref/prompt", name="pick"), {"name": "choice", "value": ""}
        )
        assert everything.completion.values == VALUES[:100]
        assert (everything.completion.total, everything.completion.has_more) == (150, True)
        narrowed = await client.complete(
            PromptReference(type="ref/prompt", name="pick"), {"name": "choice", "value": "v14"}
        )
        assert narrowed.completion.values == [f"v14{i}" for i in range(10)]
        assert (narrowed.completion.total, narrowed.completion.has_more) == (10, False)
        by_template = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="item://{code}"), {"name": "code", "value": "a"}
        )
        assert by_template.completion.values == ["a1", "a2"]
        read = await client.read_resource("item://a2")
        assert read.contents[0].text == "item a2"  # type: ignore[union-attr]


def test_health_and_readiness(gateway: GatewayProcess) -> None:
    health = httpx.get(f"{gateway.url}/healthz", timeout=10)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    ready = httpx.get(f"{gateway.url}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "store": "ok", "agents": 1}
