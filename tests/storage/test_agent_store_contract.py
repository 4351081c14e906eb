"""The ``AgentStore`` contract, run over every store (memory, SQLite, PostgreSQL), plus SQL-only checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, event

import hivegate.storage
from hivegate.agents.model import AgentSpec
from hivegate.storage import AgentStore, ApplyReport, RegistryChanges, open_storage
from hivegate.storage.memory.agents import MemoryAgentStore
from hivegate.storage.memory.credentials import MemoryCredentialStore
from hivegate.storage.memory.oauth import MemoryOAuthStore
from hivegate.storage.sql.agents import SqlAgentStore
from hivegate.storage.sql.credentials import SqlCredentialStore
from hivegate.storage.sql.engine import create_sql_engine
from hivegate.storage.sql.migrate import alembic_config, upgrade
from hivegate.storage.sql.oauth import SqlOAuthStore
from hivegate.storage.sql.tables import metadata

CONCURRENT_APPLIES = 10
WAIT_SECONDS = 30


def agent(agent_id: str, description: str = "") -> AgentSpec:
    return AgentSpec(id=agent_id, name=agent_id.title(), description=description, owner="alice")


def rich_agent() -> AgentSpec:
    """A spec using every nested model and every aliased field."""
    return AgentSpec.model_validate(
        {
            "id": "notes",
            "name": "Notes",
            "owner": "team-a",
            "auth": "none",
            "skills": [
                {
                    "id": "summarize",
                    "name": "Summarize",
                    "tags": ["text"],
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                    "expose_as_tool": True,
                }
            ],
            "resources": [{"uri": "note://readme", "name": "readme", "mimeType": "text/markdown", "text": "# hi"}],
            "resource_templates": [
                {
                    "uriTemplate": "doc://{name}",
                    "name": "docs",
                    "path": "docs/{name}.md",
                    "completions": {"name": ["a"]},
                }
            ],
            "prompts": [
                {"name": "greet", "arguments": [{"name": "who", "required": True}], "messages": [{"text": "Hi {who}."}]}
            ],
            "cache": {"methods": {"resources/read": {"ttl_ms": 60000, "scope": "public"}}},
            "backend": {"type": "python", "server": "notes_agent:server"},
        }
    )


def ids(changes: RegistryChanges) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(a.spec.id for a in changes.upserted), changes.deleted


# --- the contract, over every store ---------------------------------------------------------


async def test_empty_store(store: AgentStore) -> None:
    assert await store.revision() == 0
    assert await store.list() == []
    assert await store.get("a") is None
    assert await store.changes_since(0) == RegistryChanges(revision=0)
    await store.ping()


async def test_apply_creates_and_stores(store: AgentStore) -> None:
    before = datetime.now(UTC)
    report = await store.apply([agent("b"), rich_agent(), agent("a")])
    after = datetime.now(UTC)

    assert report == ApplyReport(created=("b", "notes", "a"), revision=1)
    stored = await store.get("notes")
    assert stored is not None
    assert stored.spec == rich_agent()
    assert stored.revision == 1
    assert stored.updated_at.utcoffset() is not None
    assert stored.updated_at.utcoffset() == UTC.utcoffset(None)
    assert before <= stored.updated_at <= after
    assert await store.revision() == 1


async def test_apply_equal_specs_is_unchanged_and_bumps_nothing(store: AgentStore) -> None:
    await store.apply([agent("a"), rich_agent()])
    first = await store.get("notes")

    report = await store.apply([rich_agent(), agent("a")])

    assert report == ApplyReport(unchanged=("notes", "a"), revision=1)
    assert await store.revision() == 1
    assert await store.get("notes") == first
    assert await store.changes_since(1) == RegistryChanges(revision=1)


async def test_apply_mixed_batch_bumps_revision_once(store: AgentStore) -> None:
    await store.apply([agent("a"), agent("b")])

    report = await store.apply([agent("a", "new"), agent("b"), agent("c")])

    assert report == ApplyReport(created=("c",), updated=("a",), unchanged=("b",), revision=2)
    stored = await store.get("a")
    assert stored is not None
    assert stored.spec.description == "new"
    assert stored.revision == 2
    unchanged = await store.get("b")
    assert unchanged is not None
    assert unchanged.revision == 1


async def test_empty_apply_changes_nothing(store: AgentStore) -> None:
    await store.apply([agent("a")])
    assert await store.apply([]) == ApplyReport(revision=1)
    assert await store.revision() == 1


async def test_prune_deletes_absent_agents(store: AgentStore) -> None:
    await store.apply([agent("c"), agent("a"), agent("b")])

    report = await store.apply([agent("b")], prune=True)

    assert report == ApplyReport(unchanged=("b",), deleted=("a", "c"), revision=2)
    assert [a.spec.id for a in await store.list()] == ["b"]
    assert await store.get("a") is None
    assert ids(await store.changes_since(1)) == ((), ("a", "c"))


async def test_prune_with_nothing_to_delete_bumps_nothing(store: AgentStore) -> None:
    await store.apply([agent("a")])
    assert await store.apply([agent("a")], prune=True) == ApplyReport(unchanged=("a",), revision=1)


async def test_prune_everything(store: AgentStore) -> None:
    await store.apply([agent("a"), agent("b")])
    assert await store.apply([], prune=True) == ApplyReport(deleted=("a", "b"), revision=2)
    assert await store.list() == []


async def test_list_is_ordered_by_id(store: AgentStore) -> None:
    await store.apply([agent("m"), agent("B"), agent("z"), agent("a-1"), agent("a_1")])
    await store.apply([agent("c")])
    assert [a.spec.id for a in await store.list()] == sorted(["m", "B", "z", "a-1", "a_1", "c"])


async def test_revision_is_monotonic_and_bumped_only_on_change(store: AgentStore) -> None:
    seen = [await store.revision()]
    steps: list[Callable[[], Awaitable[object]]] = [
        lambda: store.apply([agent("a")]),
        lambda: store.apply([agent("a")]),
        lambda: store.apply([agent("a", "x")]),
        lambda: store.delete("missing"),
        lambda: store.delete("a"),
        lambda: store.delete("a"),
        lambda: store.apply([agent("a")]),
    ]
    for step in steps:
        await step()
        seen.append(await store.revision())
    assert seen == [0, 1, 1, 2, 2, 3, 3, 4]


async def test_delete_leaves_tombstone(store: AgentStore) -> None:
    await store.apply([agent("a"), agent("b")])

    assert await store.delete("a") is True
    assert await store.delete("a") is False
    assert await store.delete("never") is False

    assert await store.revision() == 2
    assert await store.get("a") is None
    assert [x.spec.id for x in await store.list()] == ["b"]
    assert await store.changes_since(1) == RegistryChanges(deleted=("a",), revision=2)
    assert ids(await store.changes_since(0)) == (("b",), ("a",))


async def test_changes_since_walks_history(store: AgentStore) -> None:
    await store.apply([agent("a"), agent("b")])  # 1
    await store.apply([agent("a", "v2"), agent("b")])  # 2
    await store.delete("b")  # 3

    assert ids(await store.changes_since(0)) == (("a",), ("b",))
    assert ids(await store.changes_since(1)) == (("a",), ("b",))
    assert ids(await store.changes_since(2)) == ((), ("b",))
    assert await store.changes_since(3) == RegistryChanges(revision=3)
    changes = await store.changes_since(1)
    assert changes.revision == 3
    assert changes.upserted[0].spec.description == "v2"
    assert changes.upserted[0].revision == 2


async def test_recreating_a_deleted_id(store: AgentStore) -> None:
    await store.apply([agent("a")])
    await store.delete("a")

    report = await store.apply([agent("a", "again")])

    assert report == ApplyReport(created=("a",), revision=3)
    stored = await store.get("a")
    assert stored is not None
    assert stored.spec.description == "again"
    assert stored.revision == 3
    assert ids(await store.changes_since(1)) == (("a",), ())
    assert await store.delete("a") is True
    assert ids(await store.changes_since(3)) == ((), ("a",))


async def test_duplicate_ids_raise_before_writing(store: AgentStore) -> None:
    await store.apply([agent("a")])

    with pytest.raises(ValueError, match="duplicate agent ids"):
        await store.apply([agent("b"), agent("a", "x"), agent("b", "y")], prune=True)

    assert await store.revision() == 1
    assert [(a.spec.id, a.spec.description) for a in await store.list()] == [("a", "")]


async def test_concurrent_applies_get_distinct_revisions(store: AgentStore) -> None:
    reports: list[ApplyReport] = []

    async def apply_one(index: int) -> None:
        reports.append(await store.apply([agent(f"agent-{index}")]))

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as group:
            for index in range(CONCURRENT_APPLIES):
                group.start_soon(apply_one, index)

    assert sorted(r.revision for r in reports) == list(range(1, CONCURRENT_APPLIES + 1))
    assert len(await store.list()) == CONCURRENT_APPLIES


async def test_concurrent_writes_to_one_id_are_serialized(store: AgentStore) -> None:
    reports: list[ApplyReport] = []
    deletions: list[bool] = []

    async def apply_one(index: int) -> None:
        reports.append(await store.apply([agent("shared", f"v{index}")]))

    async def delete_one() -> None:
        deletions.append(await store.delete("shared"))

    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as group:
            for index in range(CONCURRENT_APPLIES):
                group.start_soon(apply_one, index)
    with anyio.fail_after(WAIT_SECONDS):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(delete_one)

    assert sorted(r.revision for r in reports) == list(range(1, CONCURRENT_APPLIES + 1))
    assert sum(len(r.created) for r in reports) == 1
    assert sorted(deletions) == [False, False, True]
    assert await store.revision() == CONCURRENT_APPLIES + 1


async def test_close_is_idempotent(store_url: str) -> None:
    storage = await open_storage(store_url)
    await storage.close()
    await storage.close()


# --- the SQL stores ------------------------------------------------------------------------


async def test_failure_mid_transaction_writes_nothing(sql_store: SqlAgentStore) -> None:
    await sql_store.apply([agent("a"), agent("b")])

    def fail_on_revision_bump(_conn: Connection, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE REGISTRY_STATE"):
            raise RuntimeError("injected failure")

    event.listen(sql_store.engine.sync_engine, "before_cursor_execute", fail_on_revision_bump)
    try:
        with pytest.raises(RuntimeError, match="injected failure"):
            await sql_store.apply([agent("a", "changed"), agent("c")], prune=True)
    finally:
        event.remove(sql_store.engine.sync_engine, "before_cursor_execute", fail_on_revision_bump)

    assert await sql_store.revision() == 1
    assert [(x.spec.id, x.spec.description) for x in await sql_store.list()] == [("a", ""), ("b", "")]
    assert await sql_store.changes_since(1) == RegistryChanges(revision=1)


async def test_migrations_run_twice(clean_sql_url: str) -> None:
    await upgrade(clean_sql_url)
    await upgrade(clean_sql_url)
    storage = await open_storage(clean_sql_url)
    store = storage.agents
    try:
        await store.apply([agent("a")])
        await upgrade(clean_sql_url)
        assert await store.revision() == 1
        assert [x.spec.id for x in await store.list()] == ["a"]
    finally:
        await storage.close()


async def test_tables_match_migrations(clean_sql_url: str) -> None:
    await upgrade(clean_sql_url)
    engine = create_sql_engine(clean_sql_url)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), metadata))
    finally:
        await engine.dispose()
    assert diff == []


def test_alembic_commands_from_code_with_a_url(tmp_path: Path) -> None:
    """The ``alembic`` path without a passed connection: env.py opens its own engine from the URL option."""
    config = alembic_config(f"sqlite+aiosqlite:///{tmp_path / 'cli' / 'registry.db'}")

    command.upgrade(config, "head")
    command.check(config)  # raises when tables.py and the migrations disagree
    command.downgrade(config, "base")
    command.upgrade(config, "head")


async def test_sqlite_file_in_missing_folder_is_created(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "there" / "registry.db"

    storage = await open_storage(f"sqlite+aiosqlite:///{path}")
    store = storage.agents
    try:
        await store.ping()
        assert isinstance(store, SqlAgentStore)
    finally:
        await storage.close()

    assert path.is_file()


def test_in_memory_sqlite_is_refused() -> None:
    with pytest.raises(ValueError, match="in-memory"):
        create_sql_engine("sqlite+aiosqlite:///:memory:")


async def test_memory_url_gives_memory_stores() -> None:
    async with await open_storage("memory://") as storage:
        assert isinstance(storage.agents, MemoryAgentStore)
        assert isinstance(storage.credentials, MemoryCredentialStore)
        assert isinstance(storage.oauth, MemoryOAuthStore)
        assert storage.database == "memory://"


async def test_a_database_url_gives_the_three_sql_stores_on_one_engine(clean_sql_url: str) -> None:
    """Issue 8 item 6: one engine (one pool) for the three stores, migrated once."""
    async with await open_storage(clean_sql_url) as storage:
        assert isinstance(storage.agents, SqlAgentStore)
        assert isinstance(storage.credentials, SqlCredentialStore)
        assert isinstance(storage.oauth, SqlOAuthStore)
        assert storage.agents.engine is storage.credentials.engine is storage.oauth.engine
        await storage.ping()
        await storage.agents.apply([agent("a")])
        assert await storage.credentials.list_users() == []
        assert await storage.oauth.list_grants() == []


def test_public_surface() -> None:
    assert sorted(hivegate.storage.__all__) == sorted(
        [
            "DEFAULT_LIMITS",
            "A2ATasks",
            "MEMORY_URL",
            "AgentStore",
            "ApplyReport",
            "CredentialStore",
            "DatabaseLimits",
            "FileStore",
            "OAuthStore",
            "RegistryChanges",
            "Storage",
            "StoredAgent",
            "open_storage",
        ]
    )
