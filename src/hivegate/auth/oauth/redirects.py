"""Redirect URIs: which may be registered (RFC 7591, client ID metadata documents), which match at ``/authorize``.

Nothing here normalises a URI. A redirect URI is kept and compared as the client wrote it, so what the
user's browser is sent to is what was checked.

**The floor** (:class:`RedirectPolicy`, always): an absolute ASCII URI of at most 2,048 characters with no
fragment (RFC 6749 §3.1.2), no userinfo (``user@host``), no whitespace, control characters or backslashes
(parsers disagree about them), no ``.``/``..`` path segments (RFC 3986 §5.2.4; also percent-encoded), no
malformed or needless percent-escapes (``%zz``, or an escaped unreserved character such as ``%2e`` or
``%41``, RFC 3986 §2.3), and written in the canonical form a URL parser prints (lower-case scheme and host,
no default port, no leading zeros, IP addresses in their usual spelling — so ``http://0x7f.1/``,
``http://127.1/`` and ``http://[0:0::1]/`` are refused rather than read as loopback). ``javascript:``,
``data:``, ``file:``, ``vbscript:``, ``blob:``, ``about:`` and ``filesystem:`` are always refused, and
``http`` is allowed only on a loopback host: the code would otherwise cross the network in clear text.

**The default rule** (``security.allowed_redirect_uris`` empty), on top of the floor:

``https`` with a host
    Any host and port, for web clients.
``http`` on a loopback host
    Only when the host is written exactly ``127.0.0.1``, ``[::1]`` or ``localhost`` (any port, any path), for
    native apps listening on a loopback port (RFC 8252 §7.3). ``localhost`` is accepted although RFC 8252 §8.3
    prefers the IP literals, because the clients in wide use register it (mcp-remote's default, Claude Code);
    other spellings (``127.0.0.2``, ``LOCALHOST``, ``localhost.``, ``127.1``) are refused.
a reverse-domain private-use scheme
    A scheme containing a dot, such as ``com.example.app:/oauth/callback`` (RFC 8252 §7.1). Schemes without a
    dot (``myapp:``) are refused: another app on the same device can claim them easily.

**An operator allow-list** (``security.allowed_redirect_uris``, a list of patterns) replaces the default rule:
a URI must pass the floor and match one pattern (:func:`compile_redirect_pattern` gives the syntax). It can
admit a scheme without a dot (``cursor://…``) or narrow https to a few hosts, never lift the floor.

**Matching at** ``/authorize`` (:func:`redirect_uri_matches`): the requested URI must equal a registered
one character for character, except that a loopback ``http`` URI matches on any port (RFC 8252 §7.3, OAuth
2.1 §8.4.2): same host spelling, and the same path and query, exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import AnyUrl, ConfigDict, TypeAdapter, ValidationError

__all__ = [
    "LOOPBACK_REDIRECT_HOSTS",
    "MAX_REDIRECT_URI_LENGTH",
    "RedirectPattern",
    "RedirectPolicy",
    "check_redirect_uri",
    "compile_redirect_pattern",
    "redirect_uri_matches",
]

LOOPBACK_REDIRECT_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""Hosts on which a plain ``http`` redirect URI is allowed (``::1`` is written ``[::1]`` in the URI)."""

MAX_REDIRECT_URI_LENGTH = 2048
"""Longer redirect URIs are refused."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_PRIVATE_USE_SCHEME = re.compile(r"[a-z][a-z0-9+\-]*(\.[a-z0-9][a-z0-9+\-]*)+")
_FORBIDDEN_CHARACTERS = re.compile(r"[\x00-\x20\x7f\\]")
_DANGEROUS_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "blob", "about", "filesystem"})
_PERCENT = re.compile(r"%(..?)", re.DOTALL)
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
_UNRESERVED = re.compile(r"[A-Za-z0-9\-._~]")
_LOOPBACK = re.compile(r"http://(127\.0\.0\.1|\[::1\]|localhost)(?::([1-9][0-9]{0,4}))?(?=[/?]|\Z)(.*)", re.DOTALL)
_URL = TypeAdapter(AnyUrl, config=ConfigDict(url_preserve_empty_path=True))
"""Parses as the SDK's client models do (they keep an empty path), for the canonical-form check."""


@dataclass(frozen=True, slots=True)
class _Loopback:
    host: str
    """As written: ``127.0.0.1``, ``[::1]`` or ``localhost``."""
    port: int | None
    rest: str
    """Everything after the authority (path and query), as written."""


def _loopback(uri: str) -> _Loopback | None:
    """``uri`` split as a loopback ``http`` URI (exact host spellings, canonical port digits), or None."""
    match = _LOOPBACK.fullmatch(uri)
    if match is None:
        return None
    port = int(match.group(2)) if match.group(2) is not None else None
    if port is not None and port > 65535:
        return None
    return _Loopback(match.group(1), port, match.group(3))


def redirect_uri_matches(registered: str, requested: str) -> bool:
    """Whether the ``redirect_uri`` of an authorization request may stand for the ``registered`` one.

    Exact string comparison — no case folding, no percent-decoding, no dot-segment removal — except
    that two loopback ``http`` URIs (host written ``127.0.0.1``, ``[::1]`` or ``localhost``) match
    whatever their ports when host, path and query are identical.

    Spec: RFC 6749 §3.1.2.3 and OAuth 2.1 §4.1.3 (simple string comparison); RFC 8252 §7.3 (any port
    on loopback).
    """
    if requested == registered:
        return True
    ours = _loopback(registered)
    theirs = _loopback(requested)
    return ours is not None and theirs is not None and ours.host == theirs.host and ours.rest == theirs.rest


def _path_of(uri: str, scheme: str) -> str:
    rest = uri[len(scheme) + 1 :]
    if rest.startswith("//"):
        slash = re.search(r"[/?]", rest[2:])
        rest = rest[2 + slash.start() :] if slash is not None else ""
    return re.split(r"[?#]", rest, maxsplit=1)[0]


def _check_escapes_and_segments(uri: str, scheme: str) -> None:
    for match in _PERCENT.finditer(uri):
        escaped = match.group(1)
        if _HEX2.fullmatch(escaped) is None:
            raise ValueError("redirect URI contains a malformed percent-escape")
        if _UNRESERVED.fullmatch(chr(int(escaped, 16))):
            raise ValueError(f"redirect URI percent-encodes the unreserved character {chr(int(escaped, 16))!r}")
    for segment in _path_of(uri, scheme).split("/"):
        if segment in (".", ".."):
            raise ValueError("redirect URI must not contain '.' or '..' path segments")


def _authority(uri: str, scheme: str) -> str | None:
    rest = uri[len(scheme) + 1 :]
    if not rest.startswith("//"):
        return None
    return re.split(r"[/?#]", rest[2:], maxsplit=1)[0]


def _check_floor(uri: str) -> str:
    """Apply the floor (module docstring); return the lower-case scheme."""
    if not uri:
        raise ValueError("redirect URI is empty")
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        raise ValueError(f"redirect URI is longer than {MAX_REDIRECT_URI_LENGTH} characters")
    if _FORBIDDEN_CHARACTERS.search(uri):
        raise ValueError("redirect URI contains whitespace, a control character or a backslash")
    if not uri.isascii():
        raise ValueError("redirect URI contains non-ASCII characters (percent-encode them)")
    match = _SCHEME.match(uri)
    if match is None:
        raise ValueError("redirect URI is not an absolute URI (no scheme)")
    scheme = match.group(1).lower()
    if "#" in uri:
        raise ValueError("redirect URI must not contain a fragment")
    if scheme in _DANGEROUS_SCHEMES:
        raise ValueError(f"redirect URI scheme {scheme!r} is not allowed")
    authority = _authority(uri, scheme)
    if authority is not None and "@" in authority:
        raise ValueError("redirect URI must not contain userinfo")
    _check_escapes_and_segments(uri, scheme)
    if scheme in ("https", "http"):
        _check_web_uri(uri, scheme)
    _check_canonical(uri)
    return scheme


def _check_web_uri(uri: str, scheme: str) -> None:
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - parses the port, raising ValueError if it is not a number in range
    except ValueError:
        raise ValueError("redirect URI is not a valid URL") from None
    if not uri[len(scheme) + 1 :].startswith("//") or not parts.netloc or not parts.hostname:
        raise ValueError(f"{scheme} redirect URI has no host")
    if scheme == "http" and _loopback(uri) is None:
        raise ValueError("http redirect URIs are allowed only on 127.0.0.1, [::1] or localhost; use https")


def _check_canonical(uri: str) -> None:
    try:
        canonical = str(_URL.validate_python(uri))
    except ValidationError:
        raise ValueError("redirect URI is not a valid URI") from None
    if canonical != uri:
        raise ValueError(f"redirect URI is not in canonical form: write it as {canonical}")


def _default_rule(uri: str, scheme: str) -> None:
    if scheme in ("https", "http"):
        return  # the floor checked the host (and http's loopback host)
    if _PRIVATE_USE_SCHEME.fullmatch(scheme) is None:
        raise ValueError(
            f"redirect URI scheme {scheme!r} is not allowed: use https, http on a loopback host "
            "(127.0.0.1, [::1], localhost), or a reverse-domain private-use scheme such as com.example.app"
        )
    if not uri.split(":", 1)[1]:
        raise ValueError("private-use redirect URI has nothing after the scheme")


def check_redirect_uri(uri: str) -> None:
    """Raise :class:`ValueError` saying why ``uri`` may not be registered under the default rule; return if it may.

    Equivalent to ``RedirectPolicy().check(uri)``; see the module docstring.
    """
    _default_rule(uri, _check_floor(uri))


_AUTHORITY_WILDCARD = "[A-Za-z0-9-]+"
_PATH_WILDCARD = "[^/?#&]+"


@dataclass(frozen=True, slots=True)
class RedirectPattern:
    """One compiled entry of ``security.allowed_redirect_uris`` (build with :func:`compile_redirect_pattern`)."""

    text: str
    regex: re.Pattern[str]
    """Matches a whole URI (non-loopback patterns)."""
    loopback_host: str | None
    """For a loopback ``http`` pattern: the host as written; the port is then not compared."""
    rest: re.Pattern[str] | None
    """For a loopback ``http`` pattern: matches the path and query."""

    def matches(self, uri: str) -> bool:
        """Whether ``uri`` (already past the floor) is one this pattern allows."""
        if self.loopback_host is None:
            return self.regex.fullmatch(uri) is not None
        loopback = _loopback(uri)
        return (
            loopback is not None
            and loopback.host == self.loopback_host
            and self.rest is not None
            and self.rest.fullmatch(loopback.rest) is not None
        )


def _wildcards(text: str, wildcard: str) -> str:
    return wildcard.join(re.escape(part) for part in text.split("*"))


def compile_redirect_pattern(pattern: str) -> RedirectPattern:
    """Compile one ``security.allowed_redirect_uris`` entry.

    Syntax: a redirect URI, matched against the whole registered URI, case-sensitively and without
    normalisation, where ``*`` stands for one or more characters:

    - in the authority (host and port), of one DNS label or port: letters, digits and ``-`` — so
      ``https://*.example.com/cb`` matches ``https://a.example.com/cb`` but neither
      ``https://a.b.example.com/cb`` nor ``https://example.com/cb``;
    - after the authority, of one path segment or query value: anything but ``/``, ``?``, ``#`` and ``&`` —
      ``https://app.example.com/oauth/*/callback`` matches one segment in the middle.

    A loopback ``http`` pattern (``http://127.0.0.1/…``, ``http://[::1]/…``, ``http://localhost/…``)
    matches any port, as loopback redirect URIs do at ``/authorize`` (RFC 8252 §7.3); write it without
    a port. The scheme cannot contain ``*``.

    Raises:
        ValueError: the pattern has no scheme, a wildcard in the scheme, a fragment, userinfo, whitespace,
            a dangerous scheme (``javascript:`` …) or is ``http`` on a host other than a loopback one.
    """
    if not pattern or _FORBIDDEN_CHARACTERS.search(pattern) or not pattern.isascii():
        raise ValueError(f"redirect URI pattern {pattern!r} is empty or contains whitespace or non-ASCII characters")
    match = _SCHEME.match(pattern)
    if match is None:
        raise ValueError(f"redirect URI pattern {pattern!r} has no scheme (or a '*' in it)")
    scheme = match.group(1)
    if scheme != scheme.lower() or scheme in _DANGEROUS_SCHEMES:
        raise ValueError(f"redirect URI pattern {pattern!r}: scheme {scheme!r} is not allowed (write it lower-case)")
    if "#" in pattern:
        raise ValueError(f"redirect URI pattern {pattern!r} contains a fragment")
    authority = _authority(pattern, scheme)
    if authority is not None and "@" in authority:
        raise ValueError(f"redirect URI pattern {pattern!r} contains userinfo")
    if authority is None:
        regex = re.compile(re.escape(f"{scheme}:") + _wildcards(pattern[len(scheme) + 1 :], _PATH_WILDCARD))
        return RedirectPattern(pattern, regex, None, None)
    rest = pattern[len(scheme) + 3 + len(authority) :]
    regex = re.compile(
        re.escape(f"{scheme}://") + _wildcards(authority, _AUTHORITY_WILDCARD) + _wildcards(rest, _PATH_WILDCARD)
    )
    if scheme != "http":
        return RedirectPattern(pattern, regex, None, None)
    host = authority.rsplit(":", 1)[0] if not authority.endswith("]") else authority
    if f"http://{host}" != f"http://{authority}" or _loopback(f"http://{host}{rest}") is None:
        raise ValueError(
            f"redirect URI pattern {pattern!r}: http is allowed only on 127.0.0.1, [::1] or localhost, "
            "written without a port (any port matches)"
        )
    return RedirectPattern(pattern, regex, host, re.compile(_wildcards(rest, _PATH_WILDCARD)))


class RedirectPolicy:
    """Which redirect URIs clients may register: the floor plus the default rule or the operator's patterns.

    Args:
        allowed: ``security.allowed_redirect_uris``; empty keeps the default rule (module docstring).

    Raises:
        ValueError: a pattern that :func:`compile_redirect_pattern` refuses.
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self._patterns = tuple(compile_redirect_pattern(pattern) for pattern in allowed)

    def check(self, uri: str) -> None:
        """Raise :class:`ValueError` saying why ``uri`` may not be registered; return if it may.

        Spec: RFC 7591 §2 and §3.2.2 (the caller answers ``invalid_redirect_uri``); RFC 8252 §7;
        OAuth 2.1 §2.3.1.
        """
        scheme = _check_floor(uri)
        if not self._patterns:
            _default_rule(uri, scheme)
        elif not any(pattern.matches(uri) for pattern in self._patterns):
            raise ValueError("redirect URI is not allowed by this server (security.allowed_redirect_uris)")
