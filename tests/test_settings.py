"""Settings: precedence (keywords > environment > TOML file > defaults), and errors that name the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from hivegate.settings import DEFAULT_SECRET, Settings, SettingsError, load_settings

CONFIG = """
[server]
host = "0.0.0.0"
port = 1111
allowed_hosts = ["gateway.example.com:*"]

[database]
url = "memory://"

[mcp]
default_page_size = 7

[[agents]]
id = "echo"
name = "Echo"
owner = "alice"
"""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``HIVEGATE_*`` variable from the developer's shell reaches these tests."""
    for name in list(os.environ):
        if name.upper().startswith("HIVEGATE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "hivegate.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_defaults_without_a_file() -> None:
    settings = load_settings()
    assert isinstance(settings, Settings)
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8094)
    assert settings.server.max_body_bytes == 4 * 1024 * 1024
    assert settings.config_file is None
    assert settings.uses_default_secret()


def test_file_values_are_read(config_file: Path) -> None:
    settings = load_settings(config_file)
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", 1111)
    assert settings.server.allowed_hosts == ("gateway.example.com:*",)
    assert settings.mcp.default_page_size == 7
    assert settings.database.url == "memory://"
    assert settings.config_file == config_file.resolve()


def test_environment_beats_the_file_field_by_field(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVEGATE_SERVER__PORT", "2222")
    monkeypatch.setenv("HIVEGATE_MCP__DEFAULT_PAGE_SIZE", "3")
    settings = load_settings(config_file)
    assert settings.server.port == 2222
    assert settings.mcp.default_page_size == 3
    assert settings.server.host == "0.0.0.0"  # the rest of [server] still comes from the file
    assert settings.server.allowed_hosts == ("gateway.example.com:*",)


def test_keyword_overrides_beat_the_environment(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVEGATE_SERVER__PORT", "2222")
    settings = load_settings(config_file, server={"port": 0})
    assert settings.server.port == 0
    assert settings.server.host == "0.0.0.0"


REAL_KEY = "a-real-key-of-at-least-thirty-two-bytes"


def test_environment_lists_and_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVEGATE_SERVER__ALLOWED_HOSTS", '["a.example:*", "b.example"]')
    monkeypatch.setenv("HIVEGATE_SECURITY__CURSOR_KEY", REAL_KEY)
    settings = load_settings()
    assert settings.server.allowed_hosts == ("a.example:*", "b.example")
    assert isinstance(settings.security.cursor_key, SecretStr)
    assert settings.security.cursor_key.get_secret_value() == REAL_KEY
    assert REAL_KEY not in repr(settings)
    assert settings.default_secrets() == ["security.token_signing_key"]
    monkeypatch.setenv("HIVEGATE_SECURITY__TOKEN_SIGNING_KEY", REAL_KEY[::-1])
    assert not load_settings().uses_default_secret()
    assert DEFAULT_SECRET != REAL_KEY


def test_short_secrets_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 7518 §3.2: an HS256 key has at least 256 bits."""
    monkeypatch.setenv("HIVEGATE_SECURITY__TOKEN_SIGNING_KEY", "too-short")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "security.token_signing_key (env HIVEGATE_SECURITY__TOKEN_SIGNING_KEY)" in str(refused.value)
    assert "32 bytes" in str(refused.value)


@pytest.mark.parametrize("suffix", ["\\u0000", "\\n", " "])
def test_secrets_with_control_characters_are_refused(tmp_path: Path, suffix: str) -> None:
    """A trailing NUL would make HMAC sign exactly like the published default (HMAC pads keys with zeros)."""
    config = tmp_path / "secrets.toml"
    config.write_text(f'[security]\ntoken_signing_key = "{DEFAULT_SECRET}{suffix}"\n', encoding="utf-8")
    with pytest.raises(SettingsError, match="control characters"):
        load_settings(config)


def test_a_wildcard_bind_address_is_not_the_base_url() -> None:
    """Fresh-clone trial of issue 7 (item 17, `make serve HOST=0.0.0.0`): a wildcard bind address is no URL a
    client can use, so without server.public_url the issuer and resource URLs name loopback."""
    assert load_settings(server={"host": "0.0.0.0", "port": 9000}).base_url() == "http://127.0.0.1:9000"
    assert load_settings(server={"host": "::", "port": 9000}).base_url() == "http://[::1]:9000"
    assert load_settings(server={"host": "10.1.2.3", "port": 9000}).base_url() == "http://10.1.2.3:9000"


def test_public_url_is_the_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(server={"port": 9000}).base_url() == "http://127.0.0.1:9000"
    monkeypatch.setenv("HIVEGATE_SERVER__PUBLIC_URL", "https://gw.example.com/")
    assert load_settings().base_url() == "https://gw.example.com"
    monkeypatch.setenv("HIVEGATE_SERVER__PUBLIC_URL", "gw.example.com")
    with pytest.raises(SettingsError, match=r"server\.public_url"):
        load_settings()


@pytest.mark.parametrize("value", ["not-a-number", "70000", "-1"])
def test_invalid_environment_value_names_the_key(
    config_file: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HIVEGATE_SERVER__PORT", value)
    with pytest.raises(SettingsError) as refused:
        load_settings(config_file)
    assert "server.port (env HIVEGATE_SERVER__PORT)" in str(refused.value)


def test_invalid_file_value_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[server]\nmax_body_bytes = 10\n\n[mcp]\ndefault_page_size = "many"\n', encoding="utf-8")
    with pytest.raises(SettingsError) as refused:
        load_settings(path)
    message = str(refused.value)
    assert "server.max_body_bytes (env HIVEGATE_SERVER__MAX_BODY_BYTES)" in message
    assert "mcp.default_page_size (env HIVEGATE_MCP__DEFAULT_PAGE_SIZE)" in message


def test_unknown_key_in_a_group_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text("[server]\nprot = 1\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"server\.prot"):
        load_settings(path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "absent.toml"
    with pytest.raises(SettingsError, match="not found"):
        load_settings(missing)
    with pytest.raises(SettingsError):
        load_settings(tmp_path)  # a folder is not a config file


def test_bad_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[server\nport = ", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"broken\.toml"):
        load_settings(path)


def test_settings_cannot_change_after_load(config_file: Path) -> None:
    """Configuration is read once: neither the settings nor their groups may be changed afterwards."""
    settings = load_settings(config_file)
    with pytest.raises(ValidationError):
        settings.server = settings.server  # type: ignore[misc]  # frozen model: assignment is the point of the test
    with pytest.raises(ValidationError):
        settings.server.port = 1  # the group is part of the configuration too
    assert settings.server.port == 1111
