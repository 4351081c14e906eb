"""The ``mcp`` backend's name mapping (:class:`hivegate.backends.upstream_names.UpstreamNames`): the prefix
is put on and taken off again (a round trip, and the only way back), the lists filter, page by page as on
the whole list, and a name the agent does not show is refused as unknown."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp_types import ListPromptsResult, ListToolsResult, Prompt, Tool

from hivegate.agents.model import TOOL_NAME_PATTERN
from hivegate.backends.upstream_names import Kind, UpstreamNames
from hivegate.errors import UnknownPromptError, UnknownToolError

ALPHABET = string.ascii_letters + string.digits + "_.-"
UNIVERSE = ["a", "b", "c", "gh_a", "a.b", "x-y"]
tool_names = st.one_of(st.sampled_from(UNIVERSE), st.text(ALPHABET, min_size=1, max_size=130))
any_names = st.one_of(tool_names, st.text(max_size=20))
prefixes = st.one_of(st.just(""), st.text(ALPHABET, min_size=1, max_size=64))
kinds = st.sampled_from(["tool", "prompt"])


@st.composite
def selections(draw: st.DrawFn) -> UpstreamNames:
    def maybe_list() -> list[str] | None:
        return draw(st.one_of(st.none(), st.lists(st.sampled_from(UNIVERSE), max_size=4)))

    return UpstreamNames(
        prefix=draw(prefixes),
        include_tools=maybe_list(),
        exclude_tools=draw(st.lists(st.sampled_from(UNIVERSE), max_size=3)),
        include_prompts=maybe_list(),
        exclude_prompts=draw(st.lists(st.sampled_from(UNIVERSE), max_size=3)),
    )


def _valid_tool_name(name: str) -> bool:
    return re.fullmatch(TOOL_NAME_PATTERN, name) is not None


@given(selections(), kinds, any_names)
def test_a_shown_name_is_the_prefixed_upstream_name_and_maps_back(names: UpstreamNames, kind: Kind, name: str) -> None:
    shown = names.shown(kind, name)
    expected = names.selected(kind, name) and (
        kind == "prompt" or (_valid_tool_name(name) and _valid_tool_name(names.prefix + name))
    )
    assert (shown is not None) == expected
    if shown is not None:
        assert shown == names.prefix + name
        assert names.upstream(kind, shown) == name


@given(selections(), kinds, any_names)
def test_the_only_way_back_is_from_a_shown_name(names: UpstreamNames, kind: Kind, shown: str) -> None:
    name = names.upstream(kind, shown)
    if name is not None:
        assert names.shown(kind, name) == shown
    if names.prefix and not shown.startswith(names.prefix):
        assert name is None  # an unprefixed name reaches nothing upstream


@given(selections(), st.lists(st.lists(tool_names, max_size=5), max_size=5))
def test_filtering_page_by_page_is_filtering_the_whole_list(names: UpstreamNames, pages: list[list[str]]) -> None:
    shown: list[str] = []
    invalid: list[str] = []
    for number, page in enumerate(pages):
        cursor = str(number + 1) if number + 1 < len(pages) else None
        listed = ListToolsResult(
            tools=[Tool(name=n, input_schema={"type": "object"}) for n in page], next_cursor=cursor
        )
        selected, bad = names.select("tools/list", listed)
        assert selected.next_cursor == cursor  # the upstream's cursor is kept: every page is still read
        shown.extend(t.name for t in selected.tools)
        invalid.extend(bad)
    every = [n for page in pages for n in page]
    assert shown == [s for s in (names.shown("tool", n) for n in every) if s is not None]
    assert invalid == [n for n in every if names.selected("tool", n) and names.shown("tool", n) is None]
    assert all(names.upstream("tool", s) is not None for s in shown)


@given(selections(), st.lists(st.text(max_size=10), max_size=8))
def test_prompts_are_filtered_and_prefixed(names: UpstreamNames, upstream: list[str]) -> None:
    page = ListPromptsResult(prompts=[Prompt(name=n) for n in upstream], next_cursor="next")
    selected, invalid = names.select("prompts/list", page)
    assert invalid == []
    assert selected.next_cursor == "next"
    assert [p.name for p in selected.prompts] == [names.prefix + n for n in upstream if names.selected("prompt", n)]


@given(selections(), any_names)
def test_a_call_goes_upstream_under_the_upstreams_name_or_is_an_unknown_tool(names: UpstreamNames, shown: str) -> None:
    upstream = names.upstream("tool", shown)
    params = {"name": shown, "arguments": {"x": 1}}
    if upstream is None:
        with pytest.raises(UnknownToolError) as refused:
            names.upstream_params("tools/call", params)
        assert refused.value.data == {"name": shown}
    else:
        assert names.upstream_params("tools/call", params) == {"name": upstream, "arguments": {"x": 1}}


def test_prompts_and_their_completions_are_mapped_back() -> None:
    names = UpstreamNames(prefix="gh_", exclude_prompts=["hidden"])
    assert names.upstream_params("prompts/get", {"name": "gh_review"}) == {"name": "review"}
    completion = {"ref": {"type": "ref/prompt", "name": "gh_review"}, "argument": {"name": "a", "value": ""}}
    assert names.upstream_params("completion/complete", completion)["ref"] == {"type": "ref/prompt", "name": "review"}
    resource = {"ref": {"type": "ref/resource", "uri": "gh_x://y"}, "argument": {"name": "a", "value": ""}}
    assert names.upstream_params("completion/complete", resource) == resource  # URIs are not renamed
    for refused in ({"name": "review"}, {"name": "gh_hidden"}):
        with pytest.raises(UnknownPromptError):
            names.upstream_params("prompts/get", refused)
    with pytest.raises(UnknownPromptError):
        names.upstream_params("completion/complete", {**completion, "ref": {"type": "ref/prompt", "name": "review"}})
    assert names.upstream_params("resources/read", {"uri": "gh_x://y"}) == {"uri": "gh_x://y"}
