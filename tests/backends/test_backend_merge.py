"""The merge of an agent's own list items with its backend's (``hivegate.mcp.handlers._merge``): the agent's
own win, and a backend's duplicates (one name listed twice, or a cursor that loops) appear once.
Found by issue 11's attack trial (an upstream listing ``a`` twice showed it twice)."""

from __future__ import annotations

from mcp_types import Tool

from hivegate.mcp.handlers import _merge


def tool(name: str, description: str = "") -> Tool:
    return Tool(name=name, description=description, input_schema={"type": "object"})


def test_own_items_win_and_backend_duplicates_appear_once() -> None:
    own = [tool("a", "own")]
    backend = [tool("a", "upstream"), tool("b", "first"), tool("b", "second"), tool("c"), tool("b", "third")]
    merged = _merge(own, backend, lambda t: t.name)
    assert [(t.name, t.description) for t in merged] == [("a", "own"), ("b", "first"), ("c", "")]
