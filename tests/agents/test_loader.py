"""Loading ``[[agents]]`` tables from a TOML file: valid files, and errors that name the agent and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivegate.agents.loader import AgentsFileError, load_agents_file, parse_agents
from hivegate.agents.model import PythonBackendSpec

VALID = """
[server]
port = 9000

[[agents]]
id = "echo"
name = "Echo"
version = "1.2.3"
owner = "alice"
page_size = 5
root = "files"
backend = { type = "python", callable = "echo_agent:reply" }
cache = { ttl_ms = 0, scope = "private", methods = { "resources/read" = { ttl_ms = 60000, scope = "public" } } }

[[agents.skills]]
id = "shout"
name = "Shout"
expose_as_tool = true

[[agents.resources]]
uri = "echo://readme"
name = "readme"
mime_type = "text/markdown"
text = "# Echo"

[[agents.resource_templates]]
uri_template = "doc://{name}"
name = "docs"
path = "docs/{name}.md"

[[agents.prompts]]
name = "greet"
arguments = [{ name = "who", required = true }]
messages = [{ role = "user", text = "Hello {who}" }]

[[agents]]
id = "second_agent-2"
name = "Second"
owner = "bob.smith"
auth = "none"
"""


def _agent(agent_id: str | None, name: str, extra: str = "") -> str:
    """One minimal ``[[agents]]`` table (owned by alice), then ``extra`` lines."""
    id_line = f'id = "{agent_id}"\n' if agent_id is not None else ""
    return f'[[agents]]\n{id_line}name = "{name}"\nowner = "alice"\n{extra}'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(AgentsFileError) as refused:
        load_agents_file(_write(tmp_path, text))
    return str(refused.value)


def test_valid_file_loads_in_order(tmp_path: Path) -> None:
    specs = load_agents_file(_write(tmp_path, VALID))
    assert [s.id for s in specs] == ["echo", "second_agent-2"]
    echo = specs[0]
    assert (echo.name, echo.version, echo.page_size, echo.root) == ("Echo", "1.2.3", 5, "files")
    assert (echo.owner, echo.auth) == ("alice", "required")
    assert echo.base_dir == str(tmp_path.resolve())
    assert isinstance(echo.backend, PythonBackendSpec)
    assert echo.backend.callable == "echo_agent:reply"
    assert [s.id for s in echo.skills] == ["shout"]
    assert echo.resources[0].mime_type == "text/markdown"
    assert echo.resource_templates[0].path == "docs/{name}.md"
    assert echo.prompts[0].arguments[0].required
    assert echo.cache.hint_for("resources/read").ttl_ms == 60000
    assert echo.cache.hint_for("tools/list").ttl_ms == 0
    second = specs[1]
    assert (second.version, second.page_size, second.mcp_enabled, second.backend) == ("0.0.0", None, True, None)
    assert (second.owner, second.auth) == ("bob.smith", "none")


def test_file_path_as_string_and_without_agents(tmp_path: Path) -> None:
    assert load_agents_file(str(_write(tmp_path, "[server]\nport = 1\n"))) == []


def test_duplicate_ids_name_the_agent(tmp_path: Path) -> None:
    message = _error(tmp_path, _agent("twin", "A") + "\n" + _agent("twin", "B"))
    assert "agents[1]" in message
    assert "'twin'" in message
    assert "duplicate" in message


@pytest.mark.parametrize("bad_id", ["has space", "-leading", "a/b", "", "x" * 65, "naïve", "dot.ted"])
def test_invalid_id_is_refused_naming_the_agent_and_field(tmp_path: Path, bad_id: str) -> None:
    message = _error(tmp_path, _agent("ok", "Ok") + "\n" + _agent(bad_id, "Bad"))
    assert "agents[1]" in message
    assert repr(bad_id) in message
    assert "id" in message


def test_invalid_field_names_the_agent_and_the_field(tmp_path: Path) -> None:
    message = _error(tmp_path, _agent("paged", "P", "page_size = 0\n"))
    assert "agents[0] (id 'paged')" in message
    assert "page_size" in message


def test_invalid_nested_field_names_its_path(tmp_path: Path) -> None:
    text = _agent("res", "R", '\n[[agents.resources]]\nuri = "x://a"\nname = "a"\n')
    message = _error(tmp_path, text)
    assert "agents[0] (id 'res')" in message
    assert "resources.0" in message


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    message = _error(tmp_path, _agent("typo", "T", "pagesize = 3\n"))
    assert "agents[0] (id 'typo')" in message
    assert "pagesize" in message


def test_agent_without_id_is_named_by_position(tmp_path: Path) -> None:
    message = _error(tmp_path, _agent(None, "Anonymous"))
    assert message.startswith("agents[0]")
    assert "id" in message


def test_agent_without_owner_is_refused_naming_owner(tmp_path: Path) -> None:
    message = _error(tmp_path, '[[agents]]\nid = "orphan"\nname = "O"\n')
    assert message == "agents[0] (id 'orphan'): owner: Field required"


@pytest.mark.parametrize(("field", "value"), [("owner", "has space"), ("owner", ""), ("auth", "optional")])
def test_invalid_owner_or_auth_names_the_field(tmp_path: Path, field: str, value: str) -> None:
    owner = "" if field == "owner" else 'owner = "alice"\n'
    message = _error(tmp_path, f'[[agents]]\nid = "a"\nname = "A"\n{owner}{field} = "{value}"\n')
    assert message.startswith(f"agents[0] (id 'a'): {field}: ")


def test_duplicate_names_inside_one_agent_name_the_agent(tmp_path: Path) -> None:
    text = _agent("dupes", "D", '\n[[agents.prompts]]\nname = "p"\n\n[[agents.prompts]]\nname = "p"\n')
    message = _error(tmp_path, text)
    assert "'dupes'" in message
    assert "prompt name" in message


def test_bad_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    message = _error(tmp_path, '[[agents]\nid = "x"\n')
    assert "agents.toml" in message


def test_agents_must_be_an_array_of_tables(tmp_path: Path) -> None:
    assert "array of tables" in _error(tmp_path, '[agents]\nid = "x"\n')
    with pytest.raises(AgentsFileError, match=r"agents\[0\]"):
        parse_agents({"agents": ["not-a-table"]}, base_dir=tmp_path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AgentsFileError, match="not found"):
        load_agents_file(tmp_path / "absent.toml")


def test_parse_agents_sets_an_absolute_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    [spec] = parse_agents({"agents": [{"id": "rel", "name": "Rel", "owner": "alice"}]}, base_dir=Path("."))
    assert spec.base_dir == str(tmp_path.resolve())
