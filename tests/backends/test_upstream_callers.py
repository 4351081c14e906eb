"""Whom a stdio upstream's out-of-call log message or request goes to (``mcp_upstream.caller_of``): the
only call in flight, and only while every call on that child was one signed-in user's. From the attack
trial: on a shared ``auth = "none"`` agent, caller A's late log message reached caller B."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from mcp_types import LOG_LEVEL_META_KEY

from hivegate.backends.upstream_callers import Callers, caller_of

_CONTEXTS: dict[str, Any] = {}


def ctx(name: str, version: str = "2025-11-25", meta: dict[str, Any] | None = None) -> Any:
    """A request context, by name (the same name, the same context): only its version and _meta are read."""
    return _CONTEXTS.setdefault(name, cast(Any, SimpleNamespace(name=name, protocol_version=version, meta=meta)))


def named(context: Any) -> str | None:
    return None if context is None else context.name


def test_the_only_call_of_one_signed_in_user_gets_it() -> None:
    callers = Callers()
    callers.enter(ctx("first"), "u-alice")
    assert named(caller_of(callers)) == "first"
    callers.enter(ctx("second"), "u-alice")
    assert caller_of(callers) is None  # two in flight: whose is it?
    callers.calls.pop(id(ctx("first")))
    assert named(caller_of(callers)) == "second"


def test_an_anonymous_caller_never_gets_another_calls_message() -> None:
    callers = Callers()
    callers.enter(ctx("anonymous"), None)
    assert caller_of(callers) is None


def test_once_a_second_user_called_nobody_gets_one_out_of_band() -> None:
    callers = Callers()
    callers.enter(ctx("alice's"), "u-alice")
    callers.calls.clear()  # alice's call ended; her upstream work may still log
    callers.enter(ctx("bob's"), "u-bob")
    assert caller_of(callers) is None


def test_a_2026_caller_gets_a_message_only_when_its_request_asked_for_log_messages() -> None:
    """Spec: MCP 2026-07-28 (SEP-2577): log messages are opt-in per request, and a 2026-07-28 client takes
    no request from the server. A plain call (it may be on the lean path, whose session sends nothing)
    gets nothing; one that set a log level gets its own."""
    plain = Callers()
    plain.enter(ctx("plain", "2026-07-28", {}), "u-alice")
    assert caller_of(plain) is None
    asked = Callers()
    asked.enter(ctx("asked", "2026-07-28", {LOG_LEVEL_META_KEY: "info"}), "u-alice")
    assert named(caller_of(asked)) == "asked"
