"""The agent model: what an agents file declares, as pure, validated data.

An :class:`AgentSpec` is the unit the registry stores and the MCP surface serves.
It is immutable; a change is a new spec with a higher ``revision`` in the store.

TOML shape (``[[agents]]`` tables in an agents file)::

    [[agents]]
    id = "notes"                      # URL-safe: [A-Za-z0-9][A-Za-z0-9_-]{0,63}
    name = "Notes"
    description = "..."
    version = "1.0.0"
    owner = "alice"                   # required: the username whose keys and OAuth grants reach the agent
    mcp_enabled = true
    a2a_enabled = true                # the public A2A agent card (404 when false)
    visibility = "private"            # or "public": listed by discovery to every authenticated caller
    auth = "required"                 # or "none": served without credentials (demo, conformance)
    page_size = 50                    # items per page on the four list methods
    invoke_timeout_seconds = 60       # one call's deadline; then -32003 "Agent reply timeout" (service_timeout)
    rate_limit_per_minute = 120       # calls per minute per credential (default: rate_limits.calls_per_minute)
    backend = { type = "python", server = "notes_agent:server" }
    # or a remote A2A 1.0 agent (docs/backends.md):
    # backend = { type = "a2a", card_url = "https://host/x/.well-known/agent-card.json", bearer_env = "X_TOKEN" }
    cache = { ttl_ms = 0, scope = "private", methods = { "resources/read" = { ttl_ms = 60000, scope = "private" } } }

    [[agents.skills]]
    id = "summarize"; name = "Summarize"; description = "..."; tags = ["text"]
    expose_as_tool = true
    input_schema = { type = "object", properties = { text = { type = "string" } }, required = ["text"] }

    [[agents.resources]]
    uri = "note://readme"; name = "readme"; mime_type = "text/markdown"; text = "# hi"   # or blob (base64) or path

    [[agents.resource_templates]]
    uri_template = "doc://{name}"; name = "docs"; path = "docs/{name}.md"   # RFC 6570; path resolves under root

    [[agents.prompts]]
    name = "greet"; description = "..."
    arguments = [{ name = "who", required = true }]
    messages = [{ role = "user", text = "Say hello to {who}." }]
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "AGENT_ID_PATTERN",
    "DEFAULT_INVOKE_TIMEOUT_SECONDS",
    "MAX_INVOKE_TIMEOUT_SECONDS",
    "TOOL_NAME_PATTERN",
    "A2ABackendSpec",
    "AgentSpec",
    "BackendSpec",
    "CacheHintSpec",
    "CachePolicy",
    "CacheableMethod",
    "McpBackendSpec",
    "PromptArgumentSpec",
    "PromptMessageSpec",
    "PromptSpec",
    "PythonBackendSpec",
    "ResourceSpec",
    "ResourceTemplateSpec",
    "SkillSpec",
    "UpstreamOAuthSpec",
]

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
"""Agent ids are URL path segments: no escaping needed, at most 64 characters (the MCP tool-name bound)."""

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
"""A valid MCP tool name: 1–128 of ASCII letters, digits, ``_``, ``.`` and ``-`` (Spec: MCP 2025-11-25
server/tools#tool-names, SEP-986)."""
MAX_SELECTED_NAMES = 1000
"""The most names one ``include_*`` or ``exclude_*`` list of an ``mcp`` backend may hold."""

OWNER_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
"""An owner is a username (see :data:`hivegate.storage.credentials.USERNAME_PATTERN`)."""

RESERVED_URI_SCHEME = "hivegate://"

CacheableMethod = Literal[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
]


DEFAULT_INVOKE_TIMEOUT_SECONDS = 60.0
"""An agent call's default deadline (the original platform's MCP ``tools/call`` timeout)."""
MAX_INVOKE_TIMEOUT_SECONDS = 3600.0
"""The longest deadline an agent may declare (a call holds a connection and a task for that long)."""


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class CacheHintSpec(_Spec):
    """One SEP-2549 cache hint: ``ttl_ms`` (integer ≥ 0, milliseconds) and ``scope``.

    Spec: MCP 2026-07-28 SEP-2549 (CacheableResult).
    """

    ttl_ms: Annotated[int, Field(ge=0)] = 0
    scope: Literal["public", "private"] = "private"


class CachePolicy(_Spec):
    """An agent's cache hints: a default plus optional per-method overrides.

    The default is ``ttl_ms = 0`` and ``scope = "private"``: nothing is cached, and
    nothing is shared across users, unless the owner says so.
    """

    ttl_ms: Annotated[int, Field(ge=0)] = 0
    scope: Literal["public", "private"] = "private"
    methods: dict[CacheableMethod, CacheHintSpec] = Field(default_factory=dict)

    def hint_for(self, method: str) -> CacheHintSpec:
        """The hint for ``method``: its override, else the policy default."""
        override = self.methods.get(method)  # type: ignore[call-overload]  # str key into a Literal-keyed dict
        return override if override is not None else CacheHintSpec(ttl_ms=self.ttl_ms, scope=self.scope)


class SkillSpec(_Spec):
    """An A2A-style skill; with ``expose_as_tool`` it is also an MCP tool named ``id``.

    ``input_schema`` is a JSON Schema object (2020-12 keywords allowed); the default
    takes one required string ``message``.
    """

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    input_schema: dict[str, Any] | None = Field(default=None, alias="inputSchema")
    expose_as_tool: bool = False

    @field_validator("input_schema")
    @classmethod
    def _schema_is_object(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and value.get("type", "object") != "object":
            raise ValueError("inputSchema must describe an object (type = 'object')")
        return value


class ResourceSpec(_Spec):
    """A static resource: exactly one of ``text``, ``blob`` (base64) or ``path`` (a file under the agent's root)."""

    uri: Annotated[str, Field(min_length=1)]
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = Field(default=None, alias="mimeType")
    text: str | None = None
    blob: str | None = None
    path: str | None = None

    @field_validator("uri")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.lower().startswith(RESERVED_URI_SCHEME):
            raise ValueError(f"the {RESERVED_URI_SCHEME} scheme is reserved for hivegate's built-in resources")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ResourceSpec:
        if sum(x is not None for x in (self.text, self.blob, self.path)) != 1:
            raise ValueError(f"resource {self.uri!r}: give exactly one of text, blob or path")
        return self


class ResourceTemplateSpec(_Spec):
    """An RFC 6570 resource template and how a matching URI resolves.

    ``path`` is a file-path pattern under the agent's root using the template's
    variables (``"notes/{id}.md"``); ``text`` is a text pattern filled with them.
    With neither, the agent's backend resolves the URI.
    """

    uri_template: Annotated[str, Field(min_length=1)] = Field(alias="uriTemplate")
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = Field(default=None, alias="mimeType")
    path: str | None = None
    text: str | None = None
    completions: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Candidate values per template variable for ``completion/complete``."""

    @field_validator("uri_template")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            UriTemplate.parse(value)
        except InvalidUriTemplate as exc:
            raise ValueError(f"invalid RFC 6570 template: {exc}") from None
        return value


class PromptArgumentSpec(_Spec):
    name: str
    description: str | None = None
    required: bool = False
    completions: tuple[str, ...] = ()
    """Candidate values for ``completion/complete`` on this argument."""


class PromptMessageSpec(_Spec):
    """One prompt message; ``text`` may reference arguments as ``{name}``."""

    role: Literal["user", "assistant"] = "user"
    text: str


class PromptSpec(_Spec):
    name: Annotated[str, Field(min_length=1)]
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgumentSpec, ...] = ()
    messages: tuple[PromptMessageSpec, ...] = ()


class PythonBackendSpec(_Spec):
    """The in-process backend: ``callable = "module:function"`` or an SDK server (``server = "module:attr"``).

    ``module`` resolves with the agents file's folder first on ``sys.path``.
    """

    type: Literal["python"] = "python"
    callable: str | None = None
    server: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> PythonBackendSpec:
        if (self.callable is None) == (self.server is None):
            raise ValueError("python backend: give exactly one of callable or server")
        for ref in (self.callable, self.server):
            if ref is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", ref):
                raise ValueError(f"python backend: {ref!r} is not of the form 'module:attribute'")
        return self


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
"""An HTTP field name (RFC 9110 §5.1: a token)."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "a2a-version"})
"""Headers the HTTP client and the A2A client set themselves: an agents file cannot replace them."""


def _check_env_name(value: str | None, what: str) -> str | None:
    if value is not None and not _ENV_NAME.fullmatch(value):
        raise ValueError(f"{what} must name an environment variable")
    return value


def _check_http_url(value: str, what: str) -> str:
    if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value):
        raise ValueError(f"{what} must be an http:// or https:// URL")
    return value


class UpstreamOAuthSpec(_Spec):
    """OAuth 2.1 client credentials for an upstream (RFC 6749 §4.4): hivegate asks ``token_url`` for an
    access token as ``client_id`` (its secret read from the environment variable ``client_secret_env``) and
    sends it as ``Authorization: Bearer``; renewed before it expires, and once more after a 401."""

    token_url: str
    client_id: Annotated[str, Field(min_length=1, max_length=256)]
    client_secret_env: str
    scope: Annotated[str, Field(max_length=1024)] | None = None

    @field_validator("token_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_http_url(value, "oauth.token_url")

    @field_validator("client_secret_env")
    @classmethod
    def _env(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError("oauth.client_secret_env must name an environment variable")
        return value


class A2ABackendSpec(_Spec):
    """A remote A2A 1.0 agent, found by its agent card (docs/backends.md).

    Credentials for the upstream are the agent's own, never the caller's: static ``headers``, a bearer
    token read from the environment variable ``bearer_env``, or OAuth client credentials (``oauth``);
    at most one of the last two, and then no ``Authorization`` in ``headers``.
    """

    type: Literal["a2a"]
    card_url: str
    """The agent card's URL (e.g. ``https://host/agent/.well-known/agent-card.json``), or the agent's base
    URL (``https://host/agent``: the card is fetched from its well-known path, A2A 1.0 §8.2)."""
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_env: str | None = None
    oauth: UpstreamOAuthSpec | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=MAX_INVOKE_TIMEOUT_SECONDS)] = 30.0
    """The longest wait for the upstream's next bytes (connect, a reply, the next streamed event); then
    ``service_timeout``. The whole call is bounded by the agent's ``invoke_timeout_seconds``."""
    streaming: bool | None = None
    """Use ``SendStreamingMessage``: None (default) when the card says the agent streams."""
    max_result_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    """The most bytes one call may read from the upstream (its whole response or stream); beyond,
    the call fails with ``agent_service_unavailable`` and the connection is dropped. A reply is parsed
    on the event loop (by the a2a-sdk, in Python per JSON value): keep this small."""
    allowed_origins: Annotated[tuple[str, ...], Field(max_length=16)] = ()
    """Origins (``https://host[:port]``) besides the card's where its interfaces may be, and the agent's
    credentials may go; an interface anywhere else is not used (a card cannot send the gateway to an
    internal address)."""

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if not re.fullmatch(r"https?://[^\s/?#@]+", origin):
                raise ValueError(f"allowed_origins: {origin!r} is not an origin (scheme://host[:port])")
        return value

    @field_validator("card_url")
    @classmethod
    def _card(cls, value: str) -> str:
        return _check_http_url(value, "card_url")

    @field_validator("bearer_env")
    @classmethod
    def _bearer(cls, value: str | None) -> str | None:
        return _check_env_name(value, "bearer_env")

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        return cls.check_headers(value)

    @staticmethod
    def check_headers(value: dict[str, str]) -> dict[str, str]:
        """``value`` as headers an agents file may send upstream (at most 32, one-line values, no hop headers).

        Raises:
            ValueError: a name or value that cannot be one.
        """
        if len(value) > 32:
            raise ValueError("headers: at most 32")
        for name, field in value.items():
            if not _HEADER_NAME.fullmatch(name) or name.lower() in _HOP_HEADERS:
                raise ValueError(f"headers: {name!r} is not a header an agents file may set")
            if len(field) > 8192 or any(c in field for c in "\r\n\x00"):
                raise ValueError(f"headers: the value of {name!r} must be one line of at most 8192 characters")
        return value

    @model_validator(mode="after")
    def _one_credential(self) -> A2ABackendSpec:
        _check_one_credential("a2a", self.bearer_env, self.oauth, self.headers)
        return self


def _check_one_credential(
    kind: str, bearer_env: str | None, oauth: UpstreamOAuthSpec | None, headers: dict[str, str]
) -> None:
    """Refuse an upstream given two of a bearer from the environment, OAuth and an ``Authorization`` header.

    Raises:
        ValueError: it was.
    """
    given = [bearer_env is not None, oauth is not None, any(n.lower() == "authorization" for n in headers)]
    if sum(given) > 1:
        raise ValueError(f"{kind} backend: give at most one of bearer_env, oauth and an Authorization header")


_ToolName = Annotated[str, Field(pattern=TOOL_NAME_PATTERN)]
_PromptName = Annotated[str, Field(min_length=1, max_length=1024)]


class McpBackendSpec(_Spec):
    """An upstream MCP server whose tools, resources, templates, prompts and completions become the agent's
    (federation; docs/backends.md): over Streamable HTTP (``url``; the protocol era is detected) or over
    stdio (``command``, run as a child process with ``env`` added to a minimal environment).

    Credentials for an HTTP upstream are the agent's own, never the caller's: static ``headers``, a
    bearer token read from the environment variable ``bearer_env``, or OAuth client credentials
    (``oauth``); at most one of the last two, and then no ``Authorization`` in ``headers``.

    Selection (tools and prompts; resources and templates pass as they are): ``include_tools`` (when
    given) keeps only the upstream tools it names, ``exclude_tools`` drops those it names, likewise
    ``include_prompts`` and ``exclude_prompts`` (upstream names, without the prefix); ``prefix`` is put
    before every upstream tool and prompt name the agent shows, and taken off a call's name. An agent's
    own tool or prompt name inside that namespace is refused (:class:`AgentSpec`).
    """

    type: Literal["mcp"]
    url: str | None = None
    command: Annotated[tuple[str, ...], Field(min_length=1, max_length=64)] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_env: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0, le=MAX_INVOKE_TIMEOUT_SECONDS)] = 30.0
    """The longest wait for the upstream to connect or answer one request; then ``service_timeout``
    (a ``tools/call`` is bounded by the agent's ``invoke_timeout_seconds`` instead)."""
    max_result_bytes: Annotated[int, Field(ge=1024, le=256 * 1024 * 1024)] = 8 * 1024 * 1024
    """HTTP: the most bytes the upstream's answer to one request may have (its result, or its stream);
    beyond, the request fails with ``agent_service_unavailable`` and the rest is not read. stdio: the
    longest line (one message) the child may write; beyond, the child is cut off (killed), and the
    calls in flight on it fail with ``agent_service_unavailable``."""
    isolation: Literal["shared", "per_user"] = "shared"
    """stdio only: ``"shared"``, one process serves every caller of the agent; ``"per_user"``, each user
    (any of their credentials) gets a process of their own, started by their first call. ``per_user``
    needs ``auth = "required"`` (an anonymous caller has no user to give a process to)."""
    max_processes: Annotated[int, Field(ge=1, le=1024)] = 32
    """stdio, ``per_user``: the most processes the agent runs at once. A user's first call past it stops
    the least recently used idle process (no request in flight, none for a second), or, when every one is
    busy, is refused with ``agent_service_unavailable``."""
    idle_stop_seconds: Annotated[float, Field(ge=0, le=7 * 24 * 3600)] = 300.0
    """stdio only: a process with no request in flight and none for this long is stopped (the next call
    starts a new one); ``0`` keeps it running."""
    oauth: UpstreamOAuthSpec | None = None
    """HTTP only: OAuth client credentials for the upstream (as for ``a2a``)."""
    prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")] | None = None
    """Put before every upstream tool and prompt name (``gh_`` shows ``search`` as ``gh_search``): tool-name
    characters, 1–64 of them, so a prefixed tool name stays a valid one up to 128 characters."""
    include_tools: Annotated[tuple[_ToolName, ...], Field(max_length=MAX_SELECTED_NAMES)] | None = None
    """Only these upstream tools (names without the prefix); None (default): every one."""
    exclude_tools: Annotated[tuple[_ToolName, ...], Field(max_length=MAX_SELECTED_NAMES)] = ()
    """Upstream tools not shown (names without the prefix); applied after ``include_tools``."""
    include_prompts: Annotated[tuple[_PromptName, ...], Field(max_length=MAX_SELECTED_NAMES)] | None = None
    """Only these upstream prompts (names without the prefix); None (default): every one."""
    exclude_prompts: Annotated[tuple[_PromptName, ...], Field(max_length=MAX_SELECTED_NAMES)] = ()
    """Upstream prompts not shown (names without the prefix); applied after ``include_prompts``."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else _check_http_url(value, "url")

    @field_validator("bearer_env")
    @classmethod
    def _bearer(cls, value: str | None) -> str | None:
        return _check_env_name(value, "bearer_env")

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, field in value.items():
            if not _ENV_NAME.fullmatch(name) or "\x00" in field:
                raise ValueError(f"env: {name!r} is not an environment variable name (or its value holds NUL)")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        return A2ABackendSpec.check_headers(value)

    @model_validator(mode="after")
    def _one_transport(self) -> McpBackendSpec:
        if (self.url is None) == (self.command is None):
            raise ValueError("mcp backend: give exactly one of url (Streamable HTTP) and command (stdio)")
        if self.command is not None and (self.headers or self.bearer_env):
            raise ValueError("mcp backend: headers and bearer_env are for an HTTP upstream (url)")
        if self.url is not None and self.env:
            raise ValueError("mcp backend: env is for a stdio upstream (command)")
        fields = type(self).model_fields
        stdio_only = {
            n for n in ("isolation", "max_processes", "idle_stop_seconds") if getattr(self, n) != fields[n].default
        }
        if self.url is not None and stdio_only:
            raise ValueError(f"mcp backend: {', '.join(sorted(stdio_only))}: for a stdio upstream (command) only")
        if self.command is not None and self.oauth is not None:
            raise ValueError("mcp backend: oauth is for an HTTP upstream (url)")
        _check_one_credential("mcp", self.bearer_env, self.oauth, self.headers)
        return self


BackendSpec = Annotated[PythonBackendSpec | A2ABackendSpec | McpBackendSpec, Field(discriminator="type")]


class AgentSpec(_Spec):
    """One registered agent, as declared in an agents file and stored in the registry."""

    id: Annotated[str, Field(pattern=AGENT_ID_PATTERN)]
    name: str
    description: str = ""
    version: str = "0.0.0"
    owner: Annotated[str, Field(pattern=OWNER_PATTERN)]
    """Username of the user who owns the agent: their ``oag_`` keys and OAuth grants reach it."""
    mcp_enabled: bool = True
    a2a_enabled: bool = True
    """With ``False`` the agent has no A2A surface: its agent card is 404 (``agent_not_found``)."""
    visibility: Literal["private", "public"] = "private"
    """Who discovery (``GET /api/v1/agents``, the ``discover_agents`` tool) shows the agent to: ``"private"``,
    the callers that may reach it (its owner's credentials and grants); ``"public"``, every authenticated
    caller. Visibility never grants a call: the gate's rules decide who may use the agent."""
    auth: Literal["required", "none"] = "required"
    """``"none"`` serves the agent to anyone without credentials (demo and conformance agents)."""
    instructions: str | None = None
    skills: tuple[SkillSpec, ...] = ()
    resources: tuple[ResourceSpec, ...] = ()
    resource_templates: tuple[ResourceTemplateSpec, ...] = ()
    prompts: tuple[PromptSpec, ...] = ()
    cache: CachePolicy = CachePolicy()
    page_size: Annotated[int, Field(ge=1, le=1000)] | None = None
    """Items per page on the four list methods; default ``mcp.default_page_size`` (50)."""
    invoke_timeout_seconds: Annotated[float, Field(gt=0, le=MAX_INVOKE_TIMEOUT_SECONDS)] = (
        DEFAULT_INVOKE_TIMEOUT_SECONDS
    )
    """How long one call of the agent (message or skill tool) may run before it is cancelled and answered
    with ``service_timeout`` (JSON-RPC -32003 "Agent reply timeout"); seconds, in (0, 3600], default 60."""
    rate_limit_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    """Calls of this agent per minute one credential may make (every plane); default
    ``rate_limits.calls_per_minute`` (60) or the key's ``rate_limits.per_key`` entry, which this overrides."""
    root: str | None = None
    """Folder that file-backed resources resolve under (absolute, or relative to ``base_dir``)."""
    base_dir: str | None = None
    """Absolute folder of the agents file this spec came from; set by the loader. Backend modules
    import with it first on ``sys.path`` and a relative ``root`` resolves against it."""
    backend: BackendSpec | None = None

    @model_validator(mode="after")
    def _unique_names(self) -> AgentSpec:
        for label, names in (
            ("skill id", [s.id for s in self.skills]),
            ("resource uri", [r.uri for r in self.resources]),
            ("prompt name", [p.name for p in self.prompts]),
        ):
            dupes = {n for n in names if names.count(n) > 1}
            if dupes:
                raise ValueError(f"agent {self.id!r}: duplicate {label}: {sorted(dupes)}")
        if any(s.id == self.id for s in self.skills if s.expose_as_tool):
            raise ValueError(f"agent {self.id!r}: a skill exposed as a tool may not take the message tool's name")
        return self

    @model_validator(mode="after")
    def _per_user_needs_users(self) -> AgentSpec:
        backend = self.backend
        if isinstance(backend, McpBackendSpec) and backend.isolation == "per_user" and self.auth == "none":
            raise ValueError(
                f'agent {self.id!r}: isolation = "per_user" needs auth = "required" (an anonymous caller has '
                "no user to give a process to)"
            )
        return self

    @model_validator(mode="after")
    def _own_names_outside_the_upstreams(self) -> AgentSpec:
        """An ``mcp`` backend's upstream names are not known before it is connected: refuse the agent's own
        tool (skill exposed as a tool) and prompt names that fall in the upstream's namespace as far as the
        backend's settings tell: those starting with its ``prefix``, else those its ``include_*`` names."""
        backend = self.backend
        if not isinstance(backend, McpBackendSpec):
            return self
        for kind, own, included in (
            ("tool", [s.id for s in self.skills if s.expose_as_tool], backend.include_tools),
            ("prompt", [p.name for p in self.prompts], backend.include_prompts),
        ):
            if backend.prefix is not None:
                clash = sorted(n for n in own if n.startswith(backend.prefix))
                where = f"start with the mcp backend's prefix {backend.prefix!r}"
            else:
                clash = sorted(n for n in own if n in (included or ()))
                where = f"are in the mcp backend's include_{kind}s"
            if clash:
                raise ValueError(
                    f"agent {self.id!r}: its own {kind} names {clash} {where}: they would clash with the "
                    f"upstream's {kind}s (rename them, or change the backend's prefix)"
                )
        return self
