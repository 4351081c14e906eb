"""Sealed pending authorization requests on their own (issue 7 item 4: nothing is stored before sign-in)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from hivegate.auth.oauth.pending import PendingRequests
from hivegate.auth.tokens import TokenCodec

KEY = b"pending-requests-test-key-" + b"k" * 32
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def _seal(
    pending: PendingRequests,
    *,
    state: str | None = "s" * 2048,
    scopes: tuple[str, ...] = ("agent:alpha", "agent:beta"),
    resource: str | None = "http://127.0.0.1:8094/alpha/mcp",
) -> str:
    return pending.seal(
        client_id="https://app.example/client.json",
        redirect_uri="http://127.0.0.1:33418/callback",
        redirect_uri_provided_explicitly=True,
        state=state,
        scopes=scopes,
        code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        resource=resource,
        now=NOW,
    )


def _resigned(sealed: str) -> str:
    return sealed[:-2] + ("AA" if not sealed.endswith("AA") else "BB")


def _payload_swapped(sealed: str) -> str:
    header, _, signature = sealed.split(".")
    return f"{header}.{header}.{signature}"


FORGERIES: dict[str, Callable[[str], str]] = {
    "signature": _resigned,
    "payload": _payload_swapped,
    "padding": lambda sealed: sealed + "=",  # not the one compact spelling
    "empty": lambda sealed: "",
    "garbage": lambda sealed: "a.b.c",
    "oversized": lambda sealed: "x" * 20_000,
}


def test_round_trip_until_expiry() -> None:
    pending = PendingRequests(KEY, 600)
    sealed = _seal(pending)

    opened = pending.open(sealed, NOW + timedelta(seconds=599))

    assert opened is not None
    assert (opened.client_id, opened.redirect_uri, opened.state) == (
        "https://app.example/client.json",
        "http://127.0.0.1:33418/callback",
        "s" * 2048,
    )
    assert opened.redirect_uri_provided_explicitly is True
    assert opened.scopes == ("agent:alpha", "agent:beta")
    assert opened.resource == "http://127.0.0.1:8094/alpha/mcp"
    assert (opened.created_at, opened.expires_at) == (NOW, NOW + timedelta(seconds=600))
    assert (opened.user_id, opened.browser_binding) == (None, None)
    assert len(opened.id) >= 43
    assert pending.open(sealed, NOW + timedelta(seconds=600)) is None  # expired at exp
    assert len(sealed) < 4096  # fits a URL with the largest state allowed


def test_optional_fields_stay_none() -> None:
    pending = PendingRequests(KEY, 600)
    opened = pending.open(_seal(pending, state=None, resource=None, scopes=()), NOW)
    assert opened is not None
    assert (opened.state, opened.resource, opened.scopes) == (None, None, ())


def test_each_seal_has_its_own_id() -> None:
    pending = PendingRequests(KEY, 600)
    first, second = pending.open(_seal(pending), NOW), pending.open(_seal(pending), NOW)
    assert first is not None
    assert second is not None
    assert first.id != second.id


@pytest.mark.parametrize("forgery", FORGERIES)
def test_forged_or_malformed_requests_do_not_open(forgery: str) -> None:
    pending = PendingRequests(KEY, 600)
    assert pending.open(FORGERIES[forgery](_seal(pending)), NOW) is None


def test_another_key_or_token_kind_does_not_open() -> None:
    """The key is derived from the signing key: neither another server's request nor an access token opens."""
    pending = PendingRequests(KEY, 600)
    assert pending.open(_seal(PendingRequests(b"another-signing-key-" + b"x" * 32, 600)), NOW) is None
    access, _ = TokenCodec("http://127.0.0.1:8094", KEY, 3600).mint(
        subject="usr_1",
        audience=["http://127.0.0.1:8094/alpha/mcp"],
        client_id="c",
        scopes=["agent:alpha"],
        grant_id="g",
    )
    assert pending.open(access, NOW) is None
    # signed with the raw signing key and the right type: still refused (the key is a derived one)
    raw = jwt.encode(
        {
            "jti": "x" * 43,
            "iat": 0,
            "exp": 2**40,
            "client_id": "c",
            "redirect_uri": "r",
            "rdx": True,
            "scope": [],
            "code_challenge": "c",
        },
        KEY,
        algorithm="HS256",
        headers={"typ": "hivegate-authz-request+jwt"},
    )
    assert pending.open(raw, NOW) is None
