"""Issue 11 item 2: an ``mcp`` backend's selection (``include_*``, ``exclude_*``, ``prefix``) and ``oauth``
in an agents file: what is refused, naming the agent and the field, and an own name that would clash
with the upstream's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.agents.model import McpBackendSpec

URL = "http://127.0.0.1:9/mcp"


def _load(tmp_path: Path, backend: str, extra: str = "") -> McpBackendSpec:
    path = tmp_path / "agents.toml"
    path.write_text(f'[[agents]]\nid = "fed"\nname = "F"\nowner = "alice"\nbackend = {backend}\n{extra}', "utf-8")
    [spec] = load_agents_file(path)
    assert isinstance(spec.backend, McpBackendSpec)
    return spec.backend


def _error(tmp_path: Path, backend: str, extra: str = "") -> str:
    with pytest.raises(AgentsFileError) as refused:
        _load(tmp_path, backend, extra)
    message = str(refused.value)
    assert message.startswith("agents[0] (id 'fed')")
    return message


def _skill_tool(name: str) -> str:
    return f'\n[[agents.skills]]\nid = "{name}"\nname = "S"\nexpose_as_tool = true\n'


def _prompt(name: str) -> str:
    return f'\n[[agents.prompts]]\nname = "{name}"\n'


def test_the_selection_fields_load(tmp_path: Path) -> None:
    backend = _load(
        tmp_path,
        f'{{ type = "mcp", url = "{URL}", prefix = "gh_", include_tools = ["a", "b.c"], exclude_tools = ["c"],'
        ' include_prompts = ["p"], exclude_prompts = ["a prompt"] }',
        _skill_tool("a") + _prompt("p"),  # with a prefix, the upstream's a and p are shown as gh_a and gh_p
    )
    assert backend.prefix == "gh_"
    assert (backend.include_tools, backend.exclude_tools) == (("a", "b.c"), ("c",))
    assert (backend.include_prompts, backend.exclude_prompts) == (("p",), ("a prompt",))


def test_without_selection_every_upstream_name_is_shown(tmp_path: Path) -> None:
    backend = _load(tmp_path, f'{{ type = "mcp", url = "{URL}" }}')
    assert (backend.prefix, backend.include_tools, backend.exclude_tools) == (None, None, ())
    assert (backend.include_prompts, backend.exclude_prompts) == (None, ())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("prefix", '""'),
        ("prefix", '"has space"'),
        ("prefix", '"' + "p" * 65 + '"'),
        ("include_tools", '[""]'),
        ("include_tools", '["bad name"]'),
        ("exclude_tools", '["' + "x" * 129 + '"]'),
        ("include_prompts", '[""]'),
        ("exclude_prompts", '[""]'),
        ("exclude_tools", "[" + ", ".join(f'"t{i}"' for i in range(1001)) + "]"),
    ],
)
def test_a_bad_selection_is_refused_naming_the_field(tmp_path: Path, field: str, value: str) -> None:
    message = _error(tmp_path, f'{{ type = "mcp", url = "{URL}", {field} = {value} }}')
    assert f"backend.mcp.{field}" in message


@pytest.mark.parametrize(
    ("backend", "extra", "names"),
    [
        (f'{{ type = "mcp", url = "{URL}", prefix = "gh_" }}', _skill_tool("gh_search"), "tool names ['gh_search']"),
        (f'{{ type = "mcp", url = "{URL}", prefix = "gh_" }}', _prompt("gh_review"), "prompt names ['gh_review']"),
        (f'{{ type = "mcp", url = "{URL}", include_tools = ["a", "b"] }}', _skill_tool("b"), "tool names ['b']"),
        (f'{{ type = "mcp", url = "{URL}", include_prompts = ["p"] }}', _prompt("p"), "prompt names ['p']"),
    ],
)
def test_an_own_name_in_the_upstreams_namespace_is_refused(
    tmp_path: Path, backend: str, extra: str, names: str
) -> None:
    message = _error(tmp_path, backend, extra)
    assert f"its own {names}" in message
    assert "clash" in message


def test_an_own_name_outside_the_upstreams_namespace_loads(tmp_path: Path) -> None:
    extra = _skill_tool("search") + _prompt("review") + _prompt("gh")
    backend = _load(tmp_path, f'{{ type = "mcp", url = "{URL}", prefix = "gh_", include_tools = ["search"] }}', extra)
    assert backend.prefix == "gh_"


def test_oauth_loads_for_an_http_upstream(tmp_path: Path) -> None:
    oauth = '{ token_url = "http://127.0.0.1:9/token", client_id = "gw", client_secret_env = "S", scope = "mcp" }'
    backend = _load(tmp_path, f'{{ type = "mcp", url = "{URL}", oauth = {oauth} }}')
    assert backend.oauth is not None
    assert (backend.oauth.client_id, backend.oauth.scope) == ("gw", "mcp")


@pytest.mark.parametrize(
    ("rest", "said"),
    [
        ('command = ["server"]', "oauth is for an HTTP upstream"),
        (f'url = "{URL}", bearer_env = "TOKEN"', "at most one of bearer_env, oauth"),
        (f'url = "{URL}", headers = {{ authorization = "Bearer x" }}', "at most one of bearer_env, oauth"),
    ],
)
def test_oauth_with_another_credential_or_for_stdio_is_refused(tmp_path: Path, rest: str, said: str) -> None:
    oauth = '{ token_url = "http://127.0.0.1:9/token", client_id = "gw", client_secret_env = "S" }'
    assert said in _error(tmp_path, f'{{ type = "mcp", {rest}, oauth = {oauth} }}')


def test_oauth_token_url_must_be_http(tmp_path: Path) -> None:
    oauth = '{ token_url = "file:///etc/passwd", client_id = "gw", client_secret_env = "S" }'
    assert "oauth.token_url" in _error(tmp_path, f'{{ type = "mcp", url = "{URL}", oauth = {oauth} }}')
