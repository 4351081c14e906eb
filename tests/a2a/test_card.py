"""Agent cards built in process: every spec the model admits gives a card the SDK parses back, with every
REQUIRED field but the interfaces, and URLs only under the base; ``If-None-Match`` selection (RFC 9110 §13.1.2)."""

from __future__ import annotations

import string

from a2a.types import AgentCard
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import ParseDict
from hypothesis import given
from hypothesis import strategies as st

from hivegate.a2a.card import agent_card, card_document
from hivegate.a2a.card_routes import if_none_match_selects
from hivegate.agents.model import AgentSpec, SkillSpec

BASE = "https://gw.example.test"

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40).filter(
    lambda text: not text.startswith(("http://", "https://"))
)
"""Free text of a spec; never URL-like, so the URL check below sees only the URLs the card builds."""
_skills = st.lists(
    st.builds(
        SkillSpec,
        id=st.from_regex(r"\A[A-Za-z0-9_.-]{1,16}\Z"),
        name=_text,
        description=_text,
        tags=st.lists(_text, max_size=3).map(tuple),
        examples=st.lists(_text, max_size=2).map(tuple),
        input_schema=st.sampled_from([None, {"type": "object"}]),
    ),
    max_size=4,
    unique_by=lambda skill: skill.id,
)
_specs = st.builds(
    AgentSpec,
    id=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,20}\Z"),
    name=_text,
    description=_text,
    version=st.sampled_from(["0.0.0", "1.2.3"]),
    owner=st.just("alice"),
    auth=st.sampled_from(["required", "none"]),
    mcp_enabled=st.booleans(),
    skills=_skills.map(tuple),
)


def _missing_required(card: AgentCard) -> set[str]:
    try:
        validate_proto_required_fields(card)
    except InvalidParamsError as exc:  # data = {"errors": [{"field": ..., "message": ...}]}
        errors: list[dict[str, str]] = (exc.data or {})["errors"]
        return {error["field"] for error in errors}
    return set()


@given(_specs)
def test_every_spec_gives_a_card_the_sdk_reads_back(spec: AgentSpec) -> None:
    card = agent_card(spec, BASE)
    parsed = ParseDict(card_document(card), AgentCard())
    assert parsed == card
    assert _missing_required(parsed) == set()
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in parsed.supported_interfaces] == [
        (f"{BASE}/{spec.id}/a2a", "JSONRPC", "1.0"),
        (f"{BASE}/{spec.id}/a2a", "HTTP+JSON", "1.0"),
    ]
    assert parsed.capabilities.streaming
    assert [skill.id for skill in parsed.skills] == ([s.id for s in spec.skills] or [spec.id])
    assert bool(parsed.security_requirements) == (spec.auth == "required")
    [extension] = parsed.capabilities.extensions
    assert extension.params["rest"] == f"{BASE}/{spec.id}/v1/invoke"
    assert ("mcp" in extension.params) == spec.mcp_enabled
    document = card_document(card)
    urls = [str(v) for v in _values(document) if str(v).startswith(("http://", "https://"))]
    assert all(url.startswith(f"{BASE}/") for url in urls)
    assert len(urls) == 3 + 3 * spec.mcp_enabled + 4 * (spec.auth == "required")


def _values(value: object) -> list[object]:
    """Every leaf of a JSON document (map keys too: OAuth scopes are keys)."""
    if isinstance(value, dict):
        items: dict[object, object] = value  # pyright: ignore[reportUnknownVariableType]  # JSON
        return [*items.keys(), *(leaf for v in items.values() for leaf in _values(v))]
    if isinstance(value, list):
        elements: list[object] = value  # pyright: ignore[reportUnknownVariableType]  # JSON
        return [leaf for v in elements for leaf in _values(v)]
    return [value]


def test_skill_with_empty_required_fields_is_filled() -> None:
    """Empty names and descriptions fall back (name → id, description → name); no tags → the agent's id."""
    spec = AgentSpec(id="a", name="", owner="alice", skills=(SkillSpec(id="s", name=""),))
    card = agent_card(spec, BASE)
    assert _missing_required(card) == set()
    assert (card.name, card.description) == ("a", "a")
    assert (card.skills[0].name, card.skills[0].description, list(card.skills[0].tags)) == ("s", "s", ["a"])


_tag = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=8).map(lambda t: f'"{t}"')


@given(etag=_tag, others=st.lists(_tag, max_size=4), weak=st.booleans(), spaces=st.sampled_from([",", ", ", " , "]))
def test_if_none_match_selects_listed_tags_weakly(etag: str, others: list[str], weak: bool, spaces: str) -> None:
    listed = [*others, f"W/{etag}" if weak else etag]
    assert if_none_match_selects(spaces.join(listed), etag)
    assert if_none_match_selects(spaces.join([*others, "*"]), etag)
    assert if_none_match_selects(spaces.join(others), etag) == (etag in others or f"W/{etag}" in others)
