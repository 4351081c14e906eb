"""Whom a stdio upstream's out-of-call log message or request goes to (``mcp_upstream._caller_of``): the
only call in flight, and only while every call on that child was one signed-in user's. From the attack
trial: on a shared ``auth = "none"`` agent, caller A's late log message reached caller B."""

from __future__ import annotations

from typing import Any, cast

from hivegate.backends.mcp_upstream import _caller_of, _Callers


def ctx(name: str) -> Any:
    return cast(Any, name)  # a request context stands in by identity only


def test_the_only_call_of_one_signed_in_user_gets_it() -> None:
    callers = _Callers()
    callers.enter(ctx("first"), "u-alice")
    assert _caller_of(callers) == "first"
    callers.enter(ctx("second"), "u-alice")
    assert _caller_of(callers) is None  # two in flight: whose is it?
    callers.calls.pop(id("first"))
    assert _caller_of(callers) == "second"


def test_an_anonymous_caller_never_gets_another_calls_message() -> None:
    callers = _Callers()
    callers.enter(ctx("anonymous"), None)
    assert _caller_of(callers) is None


def test_once_a_second_user_called_nobody_gets_one_out_of_band() -> None:
    callers = _Callers()
    callers.enter(ctx("alice's"), "u-alice")
    callers.calls.clear()  # alice's call ended; her upstream work may still log
    callers.enter(ctx("bob's"), "u-bob")
    assert _caller_of(callers) is None
