"""``hivegate users`` and ``hivegate keys``, run as the real command line in a subprocess on a SQLite file."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from hivegate.auth.api_keys import KeyKind, key_digest, parse_api_key
from tests.cli.command_line import run_cli


@dataclass(frozen=True)
class Cli:
    database_url: str

    def __call__(self, *args: str, stdin: str = "", expect: int = 0) -> subprocess.CompletedProcess[str]:
        return run_cli(self.database_url, *args, stdin=stdin, expect=expect)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    cli = Cli(f"sqlite+aiosqlite:///{tmp_path / 'db' / 'hivegate.db'}")
    agents = tmp_path / "agents.toml"
    agents.write_text(
        '[[agents]]\nid = "notes"\nname = "Notes"\nowner = "alice"\n\n'
        '[[agents]]\nid = "diary"\nname = "Diary"\nowner = "bob"\n',
        encoding="utf-8",
    )
    cli("agents", "apply", str(agents))
    return cli


KEY_PATTERN = re.compile(r"(?:oag|bak)_[0-9a-f]{64}")


def test_users_create_list_disable(cli: Cli) -> None:
    cli("users", "create", "alice", "--password-stdin", stdin="s3cret pass\n")
    cli("users", "create", "Bob", "--password-stdin", stdin="another\n")

    listed = cli("users", "list").stdout
    assert re.search(r"alice\s.*active", listed)
    assert re.search(r"Bob\s.*active", listed)
    assert "s3cret" not in listed
    assert "argon2" not in listed

    cli("users", "disable", "ALICE")
    assert re.search(r"alice\s.*disabled", cli("users", "list").stdout)
    assert "no user" in cli("users", "disable", "nobody", expect=1).stderr
    cli("users", "enable", "alice")
    assert re.search(r"alice\s.*active", cli("users", "list").stdout)
    assert "no user" in cli("users", "enable", "nobody", expect=1).stderr
    assert (
        "password set for alice" in cli("users", "set-password", "alice", "--password-stdin", stdin="new pw\n").stdout
    )
    assert "no user" in cli("users", "set-password", "nobody", "--password-stdin", stdin="pw\n", expect=1).stderr


def test_users_create_refuses_duplicates_bad_names_and_empty_passwords(cli: Cli) -> None:
    cli("users", "create", "alice", "--password-stdin", stdin="pw\n")

    assert "taken" in cli("users", "create", "ALICE", "--password-stdin", stdin="pw\n", expect=1).stderr
    assert "invalid username" in cli("users", "create", "al ice", "--password-stdin", stdin="pw\n", expect=2).stderr
    assert "empty" in cli("users", "create", "carol", "--password-stdin", stdin="\n", expect=2).stderr


def test_keys_create_list_revoke(cli: Cli) -> None:
    cli("users", "create", "alice", "--password-stdin", stdin="pw\n")

    created = cli("keys", "create", "--user", "alice", "--name", "laptop")
    printed = KEY_PATTERN.findall(created.stdout + created.stderr)
    assert len(printed) == 1  # shown exactly once
    presented = parse_api_key(printed[0])
    assert presented is not None
    assert presented.kind is KeyKind.USER
    assert presented.digest == key_digest(printed[0])

    agent = cli("keys", "create", "--user", "ALICE", "--agent", "notes")
    agent_key = KEY_PATTERN.findall(agent.stdout)
    assert [k[:4] for k in agent_key] == ["bak_"]

    listed = cli("keys", "list").stdout + cli("keys", "list", "--user", "alice").stdout
    assert KEY_PATTERN.search(listed) is None  # never the keys
    assert printed[0][:12] + "…" in listed
    assert agent_key[0][:12] + "…" in listed
    assert "laptop" in listed
    assert "notes" in listed

    key_id = re.search(r"created key (key_[0-9a-f]+)", created.stderr)
    assert key_id is not None
    cli("keys", "revoke", key_id.group(1))
    revoked_row = next(line for line in cli("keys", "list").stdout.splitlines() if key_id.group(1) in line)
    assert re.search(r"\d{4}-\d\d-\d\dT.*\d{4}-\d\d-\d\dT", revoked_row)  # created and revoked timestamps
    assert "no key" in cli("keys", "revoke", "key_missing", expect=1).stderr


def test_agent_key_limit_and_unknown_user(cli: Cli) -> None:
    cli("users", "create", "alice", "--password-stdin", stdin="pw\n")
    for _ in range(3):
        cli("keys", "create", "--user", "alice", "--agent", "notes")

    refused = cli("keys", "create", "--user", "alice", "--agent", "notes", expect=1)
    assert "revoke one first" in refused.stderr
    assert KEY_PATTERN.search(refused.stdout + refused.stderr) is None
    assert "no user" in cli("keys", "create", "--user", "bob", expect=1).stderr
    assert "no user" in cli("keys", "list", "--user", "bob", expect=1).stderr


def test_agent_keys_only_for_own_registered_agents(cli: Cli) -> None:
    cli("users", "create", "alice", "--password-stdin", stdin="pw\n")
    cli("users", "create", "bob", "--password-stdin", stdin="pw\n")

    others = cli("keys", "create", "--user", "alice", "--agent", "diary", expect=1)
    assert "owned by 'bob'" in others.stderr
    missing = cli("keys", "create", "--user", "alice", "--agent", "nosuch", expect=1)
    assert "no agent 'nosuch'" in missing.stderr
    assert KEY_PATTERN.search(others.stdout + others.stderr + missing.stdout + missing.stderr) is None
    assert "(none)" not in cli("keys", "list").stdout
    assert "bak_" not in cli("keys", "list").stdout


def test_ensure_demo_prints_password_and_key_once(cli: Cli) -> None:
    first = cli("users", "ensure-demo").stdout
    password = re.search(r"password: (\S+)", first)
    keys = KEY_PATTERN.findall(first)
    assert password is not None
    assert len(keys) == 1
    assert keys[0].startswith("oag_")
    second = cli("users", "ensure-demo").stdout
    assert "exists" in second
    assert password.group(1) not in second
    assert KEY_PATTERN.search(second) is None
    assert re.search(r"demo\s.*active", cli("users", "list").stdout)


def test_apply_warns_about_owners_that_are_not_users(cli: Cli, tmp_path: Path) -> None:
    cli("users", "create", "alice", "--password-stdin", stdin="pw\n")
    agents = tmp_path / "more.toml"
    agents.write_text(
        '[[agents]]\nid = "mine"\nname = "Mine"\nowner = "ALICE"\n\n'
        '[[agents]]\nid = "lost"\nname = "Lost"\nowner = "ghost"\n',
        encoding="utf-8",
    )
    applied = cli("agents", "apply", str(agents))
    assert "owner 'ghost' is not a user yet" in applied.stderr
    assert "ALICE" not in applied.stderr  # usernames compare ignoring case
    listed = cli("agents", "list").stdout
    assert re.search(r"lost\s.*ghost\s.*required", listed)
