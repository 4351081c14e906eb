"""Settings: the one place that reads configuration (environment and TOML file).

Precedence, highest first: keyword arguments (the CLI's flags), ``HIVEGATE_<GROUP>__<FIELD>``
environment variables, the TOML config file's ``[server]``, ``[database]``, ``[mcp]`` and
``[security]`` tables, then defaults. A config file may also hold ``[[agents]]`` tables; those
are read by :mod:`hivegate.agents.loader`, not here.

Settings are read once (:func:`load_settings`) and passed to ``Gateway.open``; nothing else in
hivegate reads the environment.

A relative SQLite path written in the config file (``[database].url``) is resolved against that
file's folder, so every command given the same ``--config`` opens the same database whatever its
working directory; a relative path from the environment or ``--database-url`` stays relative to
the working directory, like any other path a shell passes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from hivegate.auth.oauth.redirects import compile_redirect_pattern
from hivegate.storage.sql.engine import DatabaseLimits

__all__ = [
    "DEFAULT_SECRET",
    "MIN_SECRET_BYTES",
    "Settings",
    "SettingsError",
    "describe_database_url",
    "load_settings",
    "resolve_sqlite_path",
    "sqlite_file",
]

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
    connect_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 5.0
    """How long opening a database connection may take (PostgreSQL); then 503 ``store_unavailable``."""
    statement_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 10.0
    """How long one statement may run (PostgreSQL ``statement_timeout``) or wait for a lock (SQLite busy timeout)."""
    pool_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 5.0
    """How long a request waits for a free pooled connection before 503 ``store_unavailable``."""
    sqlite_synchronous: Literal["normal", "full"] = "normal"
    """SQLite only: ``normal`` keeps every commit through a crash or ``kill -9`` of the process (WAL mode);
    ``full`` also through a power loss, at one ``fsync`` per write (see ``DatabaseLimits``)."""

    def limits(self) -> DatabaseLimits:
        """The stores' time limits (and SQLite's commit durability) from these settings."""
        return DatabaseLimits(
            connect_timeout_seconds=self.connect_timeout_seconds,
            statement_timeout_seconds=self.statement_timeout_seconds,
            pool_timeout_seconds=self.pool_timeout_seconds,
            sqlite_synchronous=self.sqlite_synchronous,
        )

    def describe(self) -> str:
        """The database in use, for people: ``SQLite file /abs/path.db``, the PostgreSQL URL with its
        password masked (``postgresql+asyncpg://app:***@db:5432/hivegate``), or ``memory://``."""
        return describe_database_url(self.url)


class McpSettings(_Group):
    default_page_size: Annotated[int, Field(ge=1, le=1000)] = 50
    session_idle_timeout_seconds: Annotated[float, Field(gt=0)] = 300.0
    """A handshake-era session with no request in flight (no open GET stream either) for this long is ended
    (its id then answers 404 and the client initializes again), and its budget slot returned."""
    max_sessions_per_agent: Annotated[int, Field(ge=1)] = 10_000
    """Open handshake-era sessions per endpoint (each agent's, and ``/mcp``); 503 beyond (the SDK's cap)."""
    max_sessions_per_principal: Annotated[int, Field(ge=1)] = 128
    """Open handshake-era sessions one principal may hold over every endpoint of the process; 429 beyond."""
    max_sessions_total: Annotated[int, Field(ge=1)] = 10_000
    """Open handshake-era sessions over every endpoint of the process (about 40 KiB each); 503 beyond."""
    max_listen_streams_per_principal: Annotated[int, Field(ge=1)] = 16
    """Open 2026-07-28 ``subscriptions/listen`` streams per principal; 429 beyond."""
    max_listen_streams_total: Annotated[int, Field(ge=1)] = 1024
    """Open ``subscriptions/listen`` streams over every endpoint of the process; 503 beyond."""
    max_get_streams_per_principal: Annotated[int, Field(ge=1)] = 64
    """Open handshake-era GET (SSE) streams per principal; 429 beyond."""
    max_get_streams_total: Annotated[int, Field(ge=1)] = 4096
    """Open handshake-era GET streams over every endpoint of the process; 503 beyond."""
    max_body_bytes_in_flight_per_principal: Annotated[int, Field(ge=1024)] = 32 * 1024 * 1024
    """Bytes of request bodies one principal's MCP requests in progress are reading or holding; 429 beyond."""
    max_body_bytes_in_flight_total: Annotated[int, Field(ge=1024)] = 256 * 1024 * 1024
    """Bytes of request bodies all MCP requests in progress of the process are reading or holding; 503 beyond."""
    anonymous_budget_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Share of each ``max_*_total`` that anonymous callers (``auth = "none"`` agents, keyed by client
    address) may hold together; 503 beyond it, so many addresses cannot lock users out. ``1``: no share."""
    budget_retry_after_seconds: Annotated[int, Field(ge=1, le=3600)] = 30
    """``Retry-After`` sent with a refusal of the caps above."""
    sse_retry_interval_ms: Annotated[int, Field(ge=0)] = 1000
    """``retry:`` advice on handshake-era SSE streams (SEP-1699 polling)."""
    fast_path: bool = True
    """Serve plain 2026-07-28 JSON requests on hivegate's lean path (same handlers as the SDK path)."""
    event_store_bytes_per_principal: Annotated[int, Field(ge=4096)] = 8 * 1024 * 1024
    """Handshake-era SSE events kept for resumption per principal (per client address when anonymous), in bytes."""
    event_store_bytes_total: Annotated[int, Field(ge=4096)] = 128 * 1024 * 1024
    """Handshake-era SSE events kept for resumption in the whole process, in bytes."""
    max_batch_messages: Annotated[int, Field(ge=1, le=10_000)] = 64
    """Most messages in one JSON-RPC batch of a 2025-03-26 session (a larger batch: 400 / -32600)."""

    @model_validator(mode="after")
    def _per_principal_within_total(self) -> McpSettings:
        for resource in ("sessions", "listen_streams", "get_streams", "body_bytes_in_flight"):
            if getattr(self, f"max_{resource}_per_principal") > getattr(self, f"max_{resource}_total"):
                raise ValueError(f"max_{resource}_per_principal must not exceed max_{resource}_total")
        return self


class A2ASettings(_Group):
    task_retention_seconds: Annotated[int, Field(ge=60)] = 7 * 24 * 3600
    """How long a finished A2A task (completed, failed, canceled, rejected) is kept after its last save;
    then the periodic purge deletes it. Tasks not yet finished are kept."""


class RateLimitSettings(_Group):
    enabled: bool = True
    """Limit calls per credential × agent (``docs/security.md``, "Rate limits"); false: no limit."""
    calls_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = 60
    """Calls of one agent per minute one credential may make (a token bucket: a burst of this many,
    then this many per minute); an agent's ``rate_limit_per_minute`` and ``per_key`` override it."""
    per_key: dict[str, Annotated[int, Field(ge=1, le=1_000_000)]] = {}
    """Calls per minute by API key id (``hivegate keys list``), for every agent the key reaches
    (TOML: ``[rate_limits.per_key]`` then ``"<key id>" = 600``). An agent's own limit wins."""
    max_buckets: Annotated[int, Field(ge=1000)] = 100_000
    """Buckets (credential × agent pairs) kept in memory; the least recently used is dropped beyond it."""


class FilesSettings(_Group):
    folder: Path | None = None
    """Where uploaded files' bytes are kept. Default: ``files`` next to the SQLite database file, or
    ``.hivegate/files`` under the working directory for PostgreSQL; in memory for ``memory://``. A relative
    path written in the config file is relative to that file's folder."""
    max_file_bytes: Annotated[int, Field(ge=1)] = 25 * 1024 * 1024
    """Largest file one upload may store (413 ``payload_too_large`` beyond)."""
    max_bytes_per_user: Annotated[int, Field(ge=1)] = 1024 * 1024 * 1024
    """Bytes of unexpired files one user may hold (413 ``quota_exceeded`` beyond)."""
    max_files_per_user: Annotated[int, Field(ge=1)] = 1000
    """Unexpired files one user may hold (413 ``quota_exceeded`` beyond)."""
    retention_seconds: Annotated[int, Field(ge=60)] = 24 * 3600
    """How long an uploaded file is kept; then it is gone (404, ``invalid_params`` as an attachment) and
    the periodic purge deletes it."""
    max_attachment_bytes_per_call: Annotated[int, Field(ge=1)] = 100 * 1024 * 1024
    """Bytes of files one call may attach together (``invalid_params`` beyond): they are read into memory."""


class ConversationSettings(_Group):
    retention_seconds: Annotated[int, Field(ge=0)] = 30 * 24 * 3600
    """How long a conversation is kept after its last turn (``context_id`` then names nothing and the periodic
    purge deletes it with its turns); 0 keeps conversations until their owner deletes them."""


class IdempotencySettings(_Group):
    ttl_seconds: Annotated[int, Field(ge=60, le=30 * 24 * 3600)] = 24 * 3600
    """How long a finished call's outcome answers a retry with its ``idempotency_key`` (then the key is free)."""


def sqlite_file(url: str) -> Path | None:
    """The absolute file a SQLite URL names, or None for any other database (and ``:memory:``)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).resolve()


def describe_database_url(url: str) -> str:
    """A database URL as :meth:`DatabaseSettings.describe` shows it (never a password)."""
    if url.startswith("memory://"):
        return "memory:// (this process only; nothing is kept)"
    path = sqlite_file(url)
    if path is not None:
        return f"SQLite file {path}"
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(unparsable database URL)"


def resolve_sqlite_path(url: str, folder: Path) -> str:
    """``url`` with a relative SQLite file path made absolute under ``folder``; any other URL unchanged.

    ``sqlite+aiosqlite:///data/hg.db`` with folder ``/etc/hivegate`` becomes
    ``sqlite+aiosqlite:////etc/hivegate/data/hg.db`` (query options are kept).
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url  # reported when the store opens it
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if database.startswith("file:") or Path(database).is_absolute():
        return url
    return parsed.set(database=str((folder / database).resolve())).render_as_string(hide_password=False)


class _ConfigFileSource(TomlConfigSettingsSource):
    """The TOML file's settings, with a relative SQLite path resolved against the file's folder."""

    def __init__(self, settings_cls: type[BaseSettings], toml_file: Path) -> None:
        super().__init__(settings_cls, toml_file=toml_file)
        self._folder = toml_file.resolve().parent

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        database = data.get("database")
        if isinstance(database, dict) and isinstance(database.get("url"), str):
            data["database"] = {**database, "url": resolve_sqlite_path(database["url"], self._folder)}
        files = data.get("files")
        if isinstance(files, dict) and isinstance(files.get("folder"), str) and not Path(files["folder"]).is_absolute():
            data["files"] = {**files, "folder": str(self._folder / files["folder"])}
        return data


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
    refresh_reuse_grace_seconds: Annotated[int, Field(ge=0, le=300)] = 60
    """How long a rotated refresh token presented again still gets the successor already issued (a retry
    after a lost response); later reuse revokes the grant. 0: every reuse revokes."""
    authorization_code_ttl_seconds: Annotated[int, Field(ge=10, le=600)] = 120
    authorization_request_ttl_seconds: Annotated[int, Field(ge=60, le=3600)] = 600
    """How long a user has to sign in and consent after ``/oauth/authorize``."""
    login_max_failures: Annotated[int, Field(ge=1)] = 5
    """Failed sign-ins per username (and per client address) within ``login_window_seconds`` before throttling."""
    login_window_seconds: Annotated[int, Field(ge=1)] = 300
    password_checks_concurrency: Annotated[int, Field(ge=1, le=64)] = 4
    """Sign-in password checks (argon2id: ~64 MiB and one core each) run at once; more wait their turn."""
    registrations_per_hour: Annotated[int, Field(ge=1)] = 60
    """Dynamic client registrations accepted per client address per hour (429 beyond; per process)."""
    authorizations_per_minute: Annotated[int, Field(ge=1)] = 60
    """``/oauth/authorize`` calls and successful sign-ins accepted per client address (IPv6: per /64) per minute
    (429 beyond; per process). Nothing is stored before a sign-in; each sign-in stores one pending request."""
    client_metadata_documents: bool = True
    """Accept OAuth clients whose ``client_id`` is an https URL of a client ID metadata document (CIMD)."""
    client_metadata_allow_private_addresses: bool = False
    """Let CIMD fetches reach loopback and private addresses (local development and tests only: SSRF)."""
    client_metadata_ca_file: Path | None = None
    """PEM bundle trusted for CIMD fetches instead of the system's (tests with a local CA)."""
    credential_cache_seconds: Annotated[float, Field(ge=0, le=60)] = 1.0
    """How long a resolved API key or grant is trusted without asking the store again (0: ask every time).
    A revocation made elsewhere takes effect within this time."""
    allowed_redirect_uris: tuple[str, ...] = ()
    """Patterns of the redirect URIs clients may register (DCR and CIMD); empty: https, loopback http or a
    reverse-domain private-use scheme. Syntax: :func:`hivegate.auth.oauth.redirects.compile_redirect_pattern`."""

    @field_validator("allowed_redirect_uris")
    @classmethod
    def _redirect_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            compile_redirect_pattern(pattern)
        return value


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
    a2a: A2ASettings = A2ASettings()
    rate_limits: RateLimitSettings = RateLimitSettings()
    files: FilesSettings = FilesSettings()
    conversations: ConversationSettings = ConversationSettings()
    idempotency: IdempotencySettings = IdempotencySettings()
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
            sources.append(_ConfigFileSource(settings_cls, cls._toml_file))
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
        """``server.public_url``, or ``http://{host}:{port}`` (no trailing slash): the issuer and resource base.

        A wildcard bind address (``0.0.0.0``, ``::``) names no host a client can reach, so it stands for
        the loopback address of its family: set ``server.public_url`` to serve other machines.
        """
        if self.server.public_url is not None:
            return self.server.public_url
        host = _WILDCARD_HOSTS.get(self.server.host, self.server.host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.server.port}"


_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
"""Bind addresses that mean "every interface", and the loopback address that stands for each in URLs."""


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
