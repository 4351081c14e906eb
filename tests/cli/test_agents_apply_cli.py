"""``hivegate agents apply`` imports python backends before writing anything (issue 7 item 16)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import hivegate
from tests.cli.command_line import run_cli

SRC = Path(hivegate.__file__).resolve().parent.parent

AGENT = """
[[agents]]
id = "{id}"
name = "{id}"
owner = "alice"
backend = {{ type = "python", {kind} = "{ref}" }}
"""


def _cli(database_url: str, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
    return run_cli(database_url, "agents", *args, expect=expect, pythonpath=str(SRC))


def _agents_file(folder: Path, *agents: tuple[str, str, str]) -> Path:
    path = folder / "agents.toml"
    path.write_text("".join(AGENT.format(id=i, kind=k, ref=r) for i, k, r in agents), encoding="utf-8")
    return path


def test_apply_refuses_backends_that_cannot_load_and_writes_nothing(tmp_path: Path) -> None:
    """Issue 7 item 16: a backend that cannot import is shown with its import error; nothing is written."""
    (tmp_path / "good_agent.py").write_text("def reply(invocation):\n    return 'ok'\n", encoding="utf-8")
    (tmp_path / "typo_agent.py").write_text("def reply(invocation)\n    return 'ok'\n", encoding="utf-8")
    (tmp_path / "raising_agent.py").write_text("import json\nraise RuntimeError('no API key set')\n", encoding="utf-8")
    (tmp_path / "server_agent.py").write_text("server = 42\n", encoding="utf-8")
    marker = tmp_path / "imported.txt"
    (tmp_path / "side_agent.py").write_text(
        f"open({str(marker)!r}, 'a').write('imported')\ndef reply(invocation):\n    return 'ok'\n", encoding="utf-8"
    )
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hivegate.db'}"
    agents = _agents_file(
        tmp_path,
        ("good", "callable", "good_agent:reply"),
        ("side", "callable", "side_agent:reply"),
        ("missing", "callable", "no_such_module_here:reply"),
        ("noattr", "callable", "good_agent:answer"),
        ("typo", "callable", "typo_agent:reply"),
        ("raises", "callable", "raising_agent:reply"),
        ("notserver", "server", "server_agent:server"),
    )

    refused = _cli(database_url, "apply", str(agents), expect=2)
    err = refused.stderr
    assert "agent 'missing': cannot load 'no_such_module_here:reply': ModuleNotFoundError" in err
    assert "agent 'noattr': cannot load 'good_agent:answer': AttributeError" in err
    assert "agent 'typo': cannot load 'typo_agent:reply': SyntaxError" in err
    assert f"{tmp_path / 'typo_agent.py'}:1" in err
    assert "agent 'raises': cannot load 'raising_agent:reply': RuntimeError: no API key set" in err
    assert f"{tmp_path / 'raising_agent.py'}:2" in err
    assert "agent 'notserver':" in err
    assert "neither an mcp MCPServer nor a low-level Server" in err
    assert "'good'" not in err
    assert "nothing was written" in err
    assert "created" not in refused.stdout
    assert marker.read_text(encoding="utf-8") == "imported"  # the check imported it (in a child process)
    listed = _cli(database_url, "list").stdout
    assert "good" not in listed
    assert "side" not in listed

    fixed = _agents_file(tmp_path, ("good", "callable", "good_agent:reply"), ("side", "callable", "side_agent:reply"))
    applied = _cli(database_url, "apply", str(fixed)).stdout
    assert "good" in applied
    assert "created" in applied
    assert "good" in _cli(database_url, "list").stdout
