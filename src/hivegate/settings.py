"""Settings: the one place that reads configuration (environment and TOML file).

Precedence, highest first: keyword arguments (the CLI's flags), ``HIVEGATE_<GROUP>__<FIELD>``
environment variables, the TOML config file's ``[server]``, ``[database]``, ``[mcp]`` and
``[security]`` tables, then defaults. A config file may also hold ``[[agents]]`` tables; those
are read by :mod:`hivegate.agents.loader`, not here.

Settings are read once (:func:`load_settings`) and passed to ``create_app``; nothing else in
hivegate reads the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

__all__ = ["DEFAULT_SECRET", "MIN_SECRET_BYTES", "Settings", "SettingsError", "load_settings"]

DEFAULT_SECRET = "hivegate-development-secret-not-for-production"
"""The documented development default of every secret; ``hivegate serve`` refuses it outside ``--dev``."""

MIN_SECRET_BYTES = 32
"""Shortest accepted secret (RFC 7518 §3.2: an HS256 key of at least 256 bits)."""


class SettingsError(ValueError):
    """Invalid configuration; the message names the offending key (``server.port``, ``HIVEGATE_SERVER__PORT``)."""


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Group):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8094
    allowed_hosts: tuple[str, ...] = ("127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*")
    """``Host`` header values accepted (``name:*`` allows any port). ``["*"]`` disables the check."""
    allowed_origins: tuple[str, ...] = (
        "http://127.0.0.1",
        "http://127.0.0.1:*",
        "http://localhost",
        "http://localhost:*",
        "http://[::1]",
        "http://[::1]:*",
    )
    """``Origin`` header values accepted when one is present (DNS-rebinding protection); ``["*"]`` allows any."""
    max_body_bytes: Annotated[int, Field(ge=1024)] = 4 * 1024 * 1024
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    public_url: str | None = None
    """The gateway's public base URL (``https://gw.example.com``, no trailing slash): the OAuth issuer and
    the base of every resource URL. Default: the address ``serve`` listens on (``http://127.0.0.1:8094``)."""
    # HTTP limits of the embedded server (hivegate.http_server); all per process.
    header_read_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 10.0
    """A request's line and headers must arrive within this time of the connection opening (first request)
    or of the first byte after the previous request (408, then the connection is closed)."""
    body_read_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 60.0
    """A request's body gets this much more time: the whole request must arrive within
    ``header_read_timeout_seconds`` + this of its first byte (408, or a close once answered)."""
    max_header_bytes: Annotated[int, Field(ge=1024)] = 64 * 1024
    """Largest request head (request line and headers) accepted; a larger one gets 431."""
    max_headers: Annotated[int, Field(ge=8)] = 100
    """Most header fields in one request; more get 431."""
    keep_alive_timeout_seconds: Annotated[int, Field(ge=1, le=3600)] = 5
    """An idle keep-alive connection (no request in progress) is closed after this long."""
    max_connections: Annotated[int, Field(ge=1)] = 1000
    """Open HTTP connections accepted at once; a connection beyond it is closed at once, unanswered."""
    max_connections_per_client: Annotated[int, Field(ge=0)] = 128
    """Open HTTP connections accepted at once from one client IP address (0: no per-address limit)."""

    @field_validator("public_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ValueError("must be an absolute http(s) URL without query or fragment")
        return value.rstrip("/")


class DatabaseSettings(_Group):
    url: str = "sqlite+aiosqlite:///.hivegate/hivegate.db"
    """SQLAlchemy URL: ``sqlite+aiosqlite:///PATH``, ``postgresql+asyncpg://…`` or ``memory://``."""
    poll_interval_seconds: Annotated[float, Field(gt=0, le=3600)] = 1.0
    """How often a running server checks the registry revision for changes made elsewhere."""


class McpSettings(_Group):
    default_page_size: Annotated[int, Field(ge=1, le=1000)] = 50
    session_idle_timeout_seconds: Annotated[float, Field(gt=0)] = 1800.0
    max_sessions_per_agent: Annotated[int, Field(ge=1)] = 10_000
    sse_retry_interval_ms: Annotated[int, Field(ge=0)] = 1000
    """``retry:`` advice on handshake-era SSE streams (SEP-1699 polling)."""
    fast_path: bool = True
    """Serve plain 2026-07-28 JSON requests on hivegate's lean path (same handlers as the SDK path)."""


def _long_enough(value: SecretStr) -> SecretStr:
    secret = value.get_secret_value()
    if not secret.isprintable() or secret != secret.strip():
        # HMAC pads keys with NUL bytes: "default\0" would sign exactly like the public default.
        raise ValueError("must be printable, without control characters or surrounding whitespace")
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise ValueError(f"must be at least {MIN_SECRET_BYTES} bytes (e.g. `openssl rand -hex 32`)")
    return value


Secret = Annotated[SecretStr, AfterValidator(_long_enough)]


class SecuritySettings(_Group):
    cursor_key: Secret = SecretStr(DEFAULT_SECRET)
    """HMAC key that signs pagination cursors (so clients cannot forge them)."""
    token_signing_key: Secret = SecretStr(DEFAULT_SECRET)
    """HS256 key of the OAuth access tokens and of the login/consent forms' CSRF tokens."""
    access_token_ttl_seconds: Annotated[int, Field(ge=60, le=86_400)] = 3600
    refresh_token_ttl_seconds: Annotated[int, Field(ge=3600)] = 30 * 86_400
    authorization_code_ttl_seconds: Annotated[int, Field(ge=10, le=600)] = 120
    authorization_request_ttl_seconds: Annotated[int, Field(ge=60, le=3600)] = 600
    """How long a user has to sign in and consent after ``/oauth/authorize``."""
    login_max_failures: Annotated[int, Field(ge=1)] = 5
    """Failed sign-ins per username (and per client address) within ``login_window_seconds`` before throttling."""
    login_window_seconds: Annotated[int, Field(ge=1)] = 300
    registrations_per_hour: Annotated[int, Field(ge=1)] = 60
    """Dynamic client registrations accepted per client address per hour (429 beyond; per process)."""
    client_metadata_documents: bool = True
    """Accept OAuth clients whose ``client_id`` is an https URL of a client ID metadata document (CIMD)."""
    client_metadata_allow_private_addresses: bool = False
    """Let CIMD fetches reach loopback and private addresses (local development and tests only: SSRF)."""
    client_metadata_ca_file: Path | None = None
    """PEM bundle trusted for CIMD fetches instead of the system's (tests with a local CA)."""
    credential_cache_seconds: Annotated[float, Field(ge=0, le=60)] = 1.0
    """How long a resolved API key or grant is trusted without asking the store again (0: ask every time).
    A revocation made elsewhere takes effect within this time."""


class Settings(BaseSettings):
    """All of hivegate's configuration. Build with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="HIVEGATE_",
        env_nested_delimiter="__",
        extra="ignore",
        frozen=True,
    )

    server: ServerSettings = ServerSettings()
    database: DatabaseSettings = DatabaseSettings()
    mcp: McpSettings = McpSettings()
    security: SecuritySettings = SecuritySettings()
    config_file: Path | None = None
    """The TOML file these settings (and its ``[[agents]]``) came from, if any."""

    _toml_file: ClassVar[Path | None] = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if cls._toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=cls._toml_file))
        return tuple(sources)

    def default_secrets(self) -> list[str]:
        """Names of the secrets still set to the development default (``serve`` refuses them outside ``--dev``)."""
        names = {
            "security.cursor_key": self.security.cursor_key,
            "security.token_signing_key": self.security.token_signing_key,
        }
        return [name for name, value in names.items() if value.get_secret_value() == DEFAULT_SECRET]

    def uses_default_secret(self) -> bool:
        """Whether any secret still has the development default."""
        return bool(self.default_secrets())

    def base_url(self) -> str:
        """``server.public_url``, or ``http://{host}:{port}`` (no trailing slash): the issuer and resource base."""
        if self.server.public_url is not None:
            return self.server.public_url
        host = self.server.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.server.port}"


def _key_name(loc: tuple[int | str, ...]) -> str:
    dotted = ".".join(str(part) for part in loc)
    env = "HIVEGATE_" + "__".join(str(part).upper() for part in loc)
    return f"{dotted} (env {env})"


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Read settings from the environment, the TOML ``config_file`` and ``overrides``.

    ``overrides`` are nested dicts by group, e.g. ``server={"port": 0}``.

    Raises:
        SettingsError: a value is invalid or the file cannot be read; the message names the key.
    """
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        raise SettingsError(f"config file not found: {path}")

    class _Bound(Settings):
        _toml_file: ClassVar[Path | None] = path

    try:
        bound = _Bound(**overrides, config_file=path.resolve() if path else None)
    except ValidationError as exc:
        problems = "; ".join(f"{_key_name(err['loc'])}: {err['msg']}" for err in exc.errors())
        raise SettingsError(f"invalid settings: {problems}") from None
    except ValueError as exc:  # TOML syntax errors and unparsable environment values
        where = f"config file {path} or the environment" if path else "the environment"
        raise SettingsError(f"cannot read settings from {where}: {exc}") from None
    return Settings.model_construct(**{name: getattr(bound, name) for name in Settings.model_fields})
