"""The redirect-URI policy shared by dynamic client registration (RFC 7591) and client ID metadata documents.

:func:`check_redirect_uri` accepts three kinds of absolute URI and refuses everything else:

``https`` with a host
    Any host and port, for web clients.
``http`` on a loopback host
    Only when the host is exactly ``127.0.0.1``, ``[::1]`` or ``localhost`` (any port, any path), for native
    apps listening on a loopback port (RFC 8252 §7.3). ``http`` on any other host — including
    ``127.0.0.1.example.com`` and private network addresses — is refused: the code would cross the network in
    clear text.
a reverse-domain private-use scheme
    A scheme containing a dot, such as ``com.example.app:/oauth/callback`` (RFC 8252 §7.1). OAuth allows these for
    native apps, and a dot in the scheme is what RFC 8252 asks for (a reversed domain name the app's publisher
    controls). Schemes without a dot (``myapp:``) are refused: they are easy to claim by another app on the same
    device and are not what RFC 8252 recommends.

Always refused: fragments (RFC 6749 §3.1.2), userinfo (``user@host``), whitespace, control characters and
backslashes (parsers disagree about them), and every other scheme — notably ``javascript:``, ``data:``,
``file:``, ``vbscript:``, ``blob:`` and ``about:``. The scheme is compared case-insensitively; the rest of the
URI is left as written, since the authorization server later compares redirect URIs by exact string match.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_REDIRECT_HOSTS", "MAX_REDIRECT_URI_LENGTH", "check_redirect_uri"]

LOOPBACK_REDIRECT_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
"""Hosts on which a plain ``http`` redirect URI is allowed (``::1`` is written ``[::1]`` in the URI)."""

MAX_REDIRECT_URI_LENGTH = 2048
"""Longer redirect URIs are refused."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_PRIVATE_USE_SCHEME = re.compile(r"[a-z][a-z0-9+\-]*(\.[a-z0-9][a-z0-9+\-]*)+")
_FORBIDDEN_CHARACTERS = re.compile(r"[\x00-\x20\x7f\\]")
_DANGEROUS_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "blob", "about", "filesystem"})


def check_redirect_uri(uri: str) -> None:
    """Raise :class:`ValueError` saying why ``uri`` may not be registered as a redirect URI; return if it may.

    The policy is described in this module's docstring.
    """
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
    if scheme in ("https", "http"):
        _check_web_uri(uri, scheme)
    elif _PRIVATE_USE_SCHEME.fullmatch(scheme):
        _check_private_use_uri(uri)
    else:
        raise ValueError(
            f"redirect URI scheme {scheme!r} is not allowed: use https, http on a loopback host "
            "(127.0.0.1, [::1], localhost), or a reverse-domain private-use scheme such as com.example.app"
        )


def _check_web_uri(uri: str, scheme: str) -> None:
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - parses the port, raising ValueError if it is not a number in range
    except ValueError:
        raise ValueError("redirect URI is not a valid URL") from None
    if not uri[len(scheme) + 1 :].startswith("//") or not parts.netloc:
        raise ValueError(f"{scheme} redirect URI has no host")
    if "@" in parts.netloc:
        raise ValueError("redirect URI must not contain userinfo")
    host = parts.hostname
    if not host:
        raise ValueError(f"{scheme} redirect URI has no host")
    if scheme == "http" and host not in LOOPBACK_REDIRECT_HOSTS:
        raise ValueError("http redirect URIs are allowed only on 127.0.0.1, [::1] or localhost; use https")


def _check_private_use_uri(uri: str) -> None:
    rest = uri.split(":", 1)[1]
    if not rest:
        raise ValueError("private-use redirect URI has nothing after the scheme")
    if rest.startswith("//"):
        authority = re.split(r"[/?]", rest[2:], maxsplit=1)[0]
        if "@" in authority:
            raise ValueError("redirect URI must not contain userinfo")
