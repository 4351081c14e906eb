"""The format of PKCE values: code verifiers (RFC 7636 §4.1) and S256 code challenges (RFC 7636 §4.2).

The SDK's token handler hashes whatever ``code_verifier`` it is given and compares the digest with the
stored challenge, so a verifier of the wrong length or alphabet only fails by luck of the hash, and its
authorization endpoint takes any string as an S256 challenge. hivegate checks both formats first:

- a ``code_verifier`` is 43 to 128 characters of ``[A-Za-z0-9-._~]`` (RFC 7636 §4.1); anything else is
  a malformed request, ``invalid_request`` (RFC 6749 §5.2), refused before the code is looked up, so a
  malformed request does not use up the code. A well-formed verifier that does not hash to the challenge
  is ``invalid_grant`` (RFC 7636 §4.6, the SDK's answer);
- an S256 ``code_challenge`` is ``BASE64URL(SHA256(verifier))`` without padding (RFC 7636 §4.2): exactly
  43 characters of ``[A-Za-z0-9_-]`` that decode to 32 bytes and re-encode to the same text (the last
  character carries 4 bits, so only 16 of the 64 letters can end a real challenge). A challenge no
  verifier could match is refused at ``/oauth/authorize`` with ``invalid_request`` (RFC 7636 §4.4.1).
"""

from __future__ import annotations

import base64
import binascii
import re

__all__ = ["MAX_VERIFIER_LENGTH", "MIN_VERIFIER_LENGTH", "code_verifier_problem", "is_s256_challenge"]

MIN_VERIFIER_LENGTH = 43
"""Shortest code verifier (RFC 7636 §4.1)."""
MAX_VERIFIER_LENGTH = 128
"""Longest code verifier (RFC 7636 §4.1)."""

_UNRESERVED = re.compile(r"[A-Za-z0-9\-._~]*")
_BASE64URL_43 = re.compile(r"[A-Za-z0-9_-]{43}")


def code_verifier_problem(verifier: str) -> str | None:
    """Why ``verifier`` is not a code verifier (a message for ``error_description``), or None when it is one.

    Spec: RFC 7636 §4.1 (``code-verifier = 43*128unreserved``, ``unreserved = ALPHA / DIGIT / "-" / "." /
    "_" / "~"``).
    """
    if not MIN_VERIFIER_LENGTH <= len(verifier) <= MAX_VERIFIER_LENGTH:
        return f"code_verifier must be {MIN_VERIFIER_LENGTH} to {MAX_VERIFIER_LENGTH} characters long (RFC 7636 §4.1)"
    if _UNRESERVED.fullmatch(verifier) is None:
        return "code_verifier may contain only A-Z, a-z, 0-9, '-', '.', '_' and '~' (RFC 7636 §4.1)"
    return None


def is_s256_challenge(challenge: str) -> bool:
    """Whether ``challenge`` is ``BASE64URL(SHA256(x))`` for some ``x``: 43 characters, 32 bytes, canonical.

    Spec: RFC 7636 §4.2 (S256) and Appendix A (base64url without padding).
    """
    if _BASE64URL_43.fullmatch(challenge) is None:
        return False
    try:
        digest = base64.urlsafe_b64decode(challenge + "=")
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern admits only valid base64url
        return False
    return len(digest) == 32 and base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == challenge
