"""The PKCE value formats: code verifiers (RFC 7636 §4.1) and S256 challenges (§4.2). Issue 7 item 9."""

from __future__ import annotations

import base64
import hashlib
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from hivegate.auth.oauth.pkce import code_verifier_problem, is_s256_challenge

UNRESERVED = string.ascii_letters + string.digits + "-._~"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=UNRESERVED, min_size=43, max_size=128))
def test_every_well_formed_verifier_is_accepted(verifier: str) -> None:
    """Issue 7 item 9: 43–128 unreserved characters are a code verifier, and its S256 challenge is one too."""
    assert code_verifier_problem(verifier) is None
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    assert is_s256_challenge(challenge)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=UNRESERVED, max_size=42), st.text(alphabet=UNRESERVED, min_size=129, max_size=300)))
def test_wrong_lengths_are_refused(verifier: str) -> None:
    """Issue 7 item 9: shorter than 43 or longer than 128 characters is not a verifier."""
    problem = code_verifier_problem(verifier)
    assert problem is not None
    assert "43 to 128" in problem


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=UNRESERVED, min_size=21, max_size=64),
    st.text(min_size=1, max_size=1).filter(lambda c: c not in UNRESERVED),
    st.text(alphabet=UNRESERVED, min_size=21, max_size=63),
)
def test_characters_outside_the_alphabet_are_refused(head: str, bad: str, tail: str) -> None:
    """Issue 7 item 9: one character outside [A-Za-z0-9-._~] (space, '+', '/', '=', non-ASCII, newline) is enough."""
    verifier = head + bad + tail
    assert code_verifier_problem(verifier) is not None


def test_trailing_newline_is_refused() -> None:
    """Issue 7 item 9: ``$``-style anchoring would let a trailing newline through."""
    assert code_verifier_problem("a" * 43 + "\n") is not None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_challenges_are_43_canonical_base64url_characters_of_32_bytes(challenge: str) -> None:
    """Issue 7 item 9: a challenge is accepted exactly when it is the unpadded base64url of 32 bytes."""
    try:
        decoded = base64.urlsafe_b64decode(challenge + "=")
        canonical = base64.urlsafe_b64encode(decoded).decode().rstrip("=") == challenge
    except ValueError:
        decoded, canonical = b"", False
    expected = len(challenge) == 43 and canonical and len(decoded) == 32 and "=" not in challenge
    assert is_s256_challenge(challenge) == expected


def test_non_canonical_last_character_is_refused() -> None:
    """Issue 7 item 9: the 43rd character carries 4 bits; a challenge ending in 'B' cannot come from a verifier."""
    real = base64.urlsafe_b64encode(hashlib.sha256(b"x" * 43).digest()).decode().rstrip("=")
    assert is_s256_challenge(real)
    assert not is_s256_challenge(real[:42] + "B")
    assert not is_s256_challenge(real[:42])
    assert not is_s256_challenge(real + "=")
    assert not is_s256_challenge(real[:41] + "+" + real[42])  # standard base64's alphabet is not base64url
