"""The SSE event journal: replay by stream, byte budgets per account and in total, session end.

Issue 7 items 1 and 2 (the event-store part): events are kept by session and stream, and their
weight in bytes is bounded per account (principal) and in total; one account flooding cannot
push out another's events while the total has room, and a session's events go when it ends.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import JSONRPCNotification

from hivegate.mcp.event_journal import EVENT_OVERHEAD_BYTES, EventJournal, SessionEvents

KIB = 1024


def _progress(text: str) -> JSONRPCNotification:
    return JSONRPCNotification(
        jsonrpc="2.0", method="notifications/progress", params={"progressToken": 1, "progress": 1, "message": text}
    )


def _size(text: str) -> int:
    return EVENT_OVERHEAD_BYTES + len(_progress(text).model_dump_json(by_alias=True, exclude_unset=True).encode())


def _texts(session: SessionEvents, event_id: str) -> list[str] | None:
    found = session.replay_after(event_id)
    if found is None:
        return None
    messages: list[Any] = [event.message for event in found[1]]
    return [m.params["message"] for m in messages]


def test_replay_is_the_later_events_of_one_stream_of_one_session_in_order() -> None:
    """Issue 7 item 1: same stream id in two sessions, two streams in one session: nothing crosses."""
    journal = EventJournal(1024 * KIB, 1024 * KIB)
    mine, theirs = journal.open_session("user:a", "user:a"), journal.open_session("user:b", "user:b")
    cursor = mine.append("7", None, new_stream=True)
    their_cursor = theirs.append("7", None, new_stream=True)
    for word in ("one", "two", "three"):
        mine.append("7", _progress(word))
        theirs.append("7", _progress("their " + word))
        mine.append("_GET_stream", _progress("get " + word))

    assert _texts(mine, cursor) == ["one", "two", "three"]
    replayed = mine.replay_after(cursor)
    assert replayed is not None
    assert replayed[0] == "7"
    assert _texts(theirs, their_cursor) == ["their one", "their two", "their three"]
    assert mine.replay_after(their_cursor) is None
    assert not mine.holds(their_cursor)
    assert theirs.replay_after(cursor) is None
    assert mine.replay_after("never-issued") is None


def test_a_new_stream_under_a_reused_id_does_not_join_the_old_one() -> None:
    journal = EventJournal(1024 * KIB, 1024 * KIB)
    session = journal.open_session("user:a", "user:a")
    old = session.append("1", None, new_stream=True)
    session.append("1", _progress("old"))
    new = session.append("1", None, new_stream=True)
    session.append("1", _progress("new"))
    assert _texts(session, old) == ["old"]
    assert _texts(session, new) == ["new"]


def test_one_account_flooding_stays_in_its_budget_and_leaves_the_others_alone() -> None:
    """Issue 7 item 2: a flood evicts its own oldest events first; another account's events stay."""
    journal = EventJournal(64 * KIB, 1024 * KIB)
    victim = journal.open_session("user:victim", "user:victim")
    victim_cursor = victim.append("1", None, new_stream=True)
    victim.append("1", _progress("kept"))
    flooder = journal.open_session("address:10.0.0.9", "anonymous")
    first = flooder.append("1", None, new_stream=True)
    body = "x" * (5 * KIB)
    last = first
    for _ in range(200):
        last = flooder.append("1", _progress(body))
        assert journal.bytes_of("address:10.0.0.9") <= 64 * KIB
        assert journal.bytes <= 1024 * KIB
    assert journal.bytes_of("address:10.0.0.9") > 64 * KIB - _size(body)
    assert not flooder.holds(first)  # its oldest went first
    assert flooder.holds(last)
    assert _texts(victim, victim_cursor) == ["kept"]
    assert journal.bytes == journal.bytes_of("user:victim") + journal.bytes_of("address:10.0.0.9")


def test_over_the_total_the_oldest_events_of_all_go_first() -> None:
    journal = EventJournal(64 * KIB, 100 * KIB)
    sessions = [journal.open_session(f"user:{n}", f"user:{n}") for n in range(4)]
    issued: list[tuple[SessionEvents, str]] = []
    body = "y" * (10 * KIB)
    for _ in range(3):
        for session in sessions:
            issued.append((session, session.append("1", _progress(body))))
            assert journal.bytes <= 100 * KIB
    held = [session.holds(event_id) for session, event_id in issued]
    assert held == sorted(held)  # a prefix went (the oldest of all), the rest is kept
    assert held.count(False) == 3  # 12 events of ~10.4 KiB in 100 KiB: the three oldest went


def test_a_message_larger_than_a_budget_leaves_a_cursor_and_no_gap() -> None:
    journal = EventJournal(16 * KIB, 1024 * KIB)
    session = journal.open_session("user:a", "user:a")
    before = session.append("1", None, new_stream=True)
    session.append("1", _progress("small"))
    huge = session.append("1", _progress("z" * (32 * KIB)))
    session.append("1", _progress("after"))
    assert not session.holds(before)  # resuming from it would skip the huge message silently
    assert _texts(session, huge) == ["after"]
    assert journal.bytes <= 16 * KIB


def test_a_stream_emptied_by_its_own_append_keeps_its_later_events() -> None:
    journal = EventJournal(8 * KIB, 1024 * KIB)
    session = journal.open_session("user:a", "user:a")
    session.append("1", _progress("a" * (5 * KIB)))
    second = session.append("1", _progress("b" * (5 * KIB)))  # pushes out the first: the stream was empty
    session.append("1", _progress("c"))
    assert _texts(session, second) == ["c"]


def test_closing_a_session_frees_its_bytes() -> None:
    """Issue 7 item 2: a session's events go when it ends (the e2e tests cover DELETE and expiry)."""
    journal = EventJournal(64 * KIB, 1024 * KIB)
    session = journal.open_session("user:a", "user:a")
    other = journal.open_session("user:a", "user:a")
    cursor = session.append("1", None, new_stream=True)
    session.append("1", _progress("x" * KIB))
    kept = other.append("1", _progress("other"))
    session.close()
    session.close()
    assert not session.holds(cursor)
    assert journal.bytes == journal.bytes_of("user:a") == _size("other")
    assert other.holds(kept)
    assert not session.holds(session.append("1", _progress("late")))
    other.close()
    assert journal.bytes == 0
    assert len(journal) == 0


def test_budgets_below_one_event_are_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        EventJournal(EVENT_OVERHEAD_BYTES - 1, 1024)


_OPERATION = st.tuples(
    st.integers(min_value=0, max_value=3),  # session
    st.integers(min_value=0, max_value=1),  # stream
    st.one_of(st.none(), st.sampled_from([0, 100, 3 * KIB, 5 * KIB, 9 * KIB])),  # None: a priming event
    st.sampled_from([False] * 9 + [True]),  # close the session instead (it is reopened on its next event)
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_OPERATION, min_size=10, max_size=120))
def test_budgets_hold_and_every_kept_cursor_resumes_without_a_gap(operations: list[Any]) -> None:
    """Issue 7 item 2: after every step, bytes within both budgets; a kept cursor replays exactly the
    messages appended to its stream after it."""
    journal = EventJournal(8 * KIB, 20 * KIB)
    accounts = ["user:a", "user:a", "user:b", "address:c"]
    sessions: dict[int, SessionEvents] = {}
    appended: dict[tuple[int, int], list[tuple[str, str | None]]] = {}
    for index, (number, stream, size, close) in enumerate(operations):
        if close:
            if number in sessions:
                sessions.pop(number).close()
                appended = {k: v for k, v in appended.items() if k[0] != number}
            continue
        session = sessions.get(number)
        if session is None:
            session = sessions[number] = journal.open_session(accounts[number], accounts[number])
        text = None if size is None else f"{index}:" + "m" * size
        event_id = session.append(str(stream), None if text is None else _progress(text))
        appended.setdefault((number, stream), []).append((event_id, text))

        assert journal.bytes <= 20 * KIB
        for account in set(accounts):
            assert journal.bytes_of(account) <= 8 * KIB
        for (held_by, _), events in appended.items():
            for position, (cursor, _) in enumerate(events):
                if sessions[held_by].holds(cursor):
                    later = [t for _, t in events[position + 1 :] if t is not None]
                    assert _texts(sessions[held_by], cursor) == later


def test_anonymous_addresses_together_keep_only_their_share() -> None:
    """Issue 7 item 2 (attack trial): many anonymous addresses cannot push a user's events out.

    Each address has its own per-account budget, and an attacker has many addresses: without a
    share of their own, sixteen of them fill the default 128 MiB total and evict every user's
    events (a user's resume then gets 400 ``unknown_event_id``). Anonymous accounts together keep
    at most ``bytes_anonymous``; over it their own oldest events go.
    """
    journal = EventJournal(48 * KIB, 100 * KIB, bytes_anonymous=50 * KIB)
    victim = journal.open_session("user:victim", "user:victim")
    victim_cursor = victim.append("1", None, new_stream=True)
    for _ in range(4):
        victim.append("1", _progress("v" * (10 * KIB)))
    flooders = [journal.open_session(f"addr:10.0.0.{n}", "anonymous") for n in range(20)]
    body = "x" * (2 * KIB)
    for _ in range(8):
        for flooder in flooders:
            flooder.append("1", _progress(body))
            anonymous = sum(journal.bytes_of(f"addr:10.0.0.{n}") for n in range(20))
            assert anonymous <= 50 * KIB
            assert journal.bytes <= 100 * KIB
    assert _texts(victim, victim_cursor) == ["v" * (10 * KIB)] * 4
    with pytest.raises(ValueError, match="bytes_anonymous"):
        EventJournal(16 * KIB, 100 * KIB, bytes_anonymous=200 * KIB)
