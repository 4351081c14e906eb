"""The redirect-URI policy shared by dynamic client registration and client ID metadata documents."""

from __future__ import annotations

import string

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hivegate.auth.oauth.redirects import (
    RedirectPolicy,
    check_redirect_uri,
    compile_redirect_pattern,
    redirect_uri_matches,
)
from hivegate.settings import SettingsError, load_settings


@pytest.mark.parametrize(
    "uri",
    [
        "https://client.example.com/callback",
        "https://client.example.com:8443/oauth/cb?x=1",
        "https://client.example.com",
        "http://127.0.0.1/callback",
        "http://127.0.0.1:49152/callback",
        "http://[::1]:8080/cb",
        "http://localhost:3000/cb",
        "com.example.app:/oauth2redirect/example-provider",
        "com.example.app:/",
        "io.github.someone.tool://callback",
    ],
)
def test_accepted(uri: str) -> None:
    check_redirect_uri(uri)


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("", "empty"),
        ("/callback", "not an absolute URI"),
        ("callback", "not an absolute URI"),
        ("javascript:alert(1)", "'javascript' is not allowed"),
        ("JavaScript:alert(1)", "'javascript' is not allowed"),
        ("data:text/html,<script>alert(1)</script>", "'data' is not allowed"),
        ("file:///etc/passwd", "'file' is not allowed"),
        ("vbscript:msgbox", "'vbscript' is not allowed"),
        ("ftp://client.example.com/cb", "'ftp' is not allowed"),
        ("myapp:/callback", "'myapp' is not allowed"),
        ("https://client.example.com/cb#frag", "fragment"),
        ("https://client.example.com/cb#", "fragment"),
        ("http://127.0.0.1/cb#x", "fragment"),
        ("com.example.app:/cb#x", "fragment"),
        ("http://client.example.com/callback", "only on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.1.nip.io/callback", "only on 127.0.0.1, [::1] or localhost"),
        ("http://localhost.evil.example/callback", "only on 127.0.0.1, [::1] or localhost"),
        ("http://10.0.0.1/callback", "only on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.2/callback", "only on 127.0.0.1, [::1] or localhost"),
        ("https://user:pw@client.example.com/cb", "userinfo"),
        ("http://localhost@evil.example/cb", "userinfo"),
        ("http://127.0.0.1:80@evil.example/cb", "userinfo"),
        ("com.example.app://user@host/cb", "userinfo"),
        ("https:///cb", "no host"),
        ("https:client.example.com/cb", "no host"),
        ("http://127.0.0.1:99999/cb", "not a valid URL"),
        ("http://127.0.0.1:abc/cb", "not a valid URL"),
        ("https://client.example.com/c b", "whitespace"),
        ("https://client.example.com/cb\n", "whitespace"),
        ("http://127.0.0.1\\@evil.example/cb", "backslash"),
        ("https://client.example.com/\u00e9", "non-ASCII"),
        ("com.example.app:", "nothing after the scheme"),
        ("https://client.example.com/" + "a" * 2048, "longer than 2048"),
        # Issue 7 item 9: only the loopback spellings clients use, no dot segments, no escape tricks, canonical
        ("HTTP://LOCALHOST:3000/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://LOCALHOST:3000/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://localhost./cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://0x7f.1/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://127.1/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://2130706433/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://[0:0::1]/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://[::ffff:127.0.0.1]/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.1:080/cb", "only on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.1:80/cb", "canonical form: write it as http://127.0.0.1/cb"),
        ("https://Client.example.com/cb", "canonical form: write it as https://client.example.com/cb"),
        ("https://client.example.com:443/cb", "canonical form"),
        ("http://127.0.0.1/a/../cb", "'.' or '..' path segments"),
        ("http://127.0.0.1/./cb", "'.' or '..' path segments"),
        ("https://client.example.com/cb/..", "'.' or '..' path segments"),
        ("com.example.app:/a/../cb", "'.' or '..' path segments"),
        ("http://127.0.0.1/%2e%2e/cb", "percent-encodes the unreserved character '.'"),
        ("http://127.0.0.1/%2E/cb", "percent-encodes the unreserved character '.'"),
        ("http://127.0.0.1/%63b", "percent-encodes the unreserved character 'c'"),
        ("http://127.0.0.1/c%zz", "malformed percent-escape"),
        ("http://127.0.0.1/c%2", "malformed percent-escape"),
        ("http://127.0.0.1%40evil.example/cb", "only on 127.0.0.1, [::1] or localhost"),
    ],
)
def test_refused(uri: str, reason: str) -> None:
    with pytest.raises(ValueError, match="redirect URI") as caught:
        check_redirect_uri(uri)
    assert reason in str(caught.value)


# -- Issue 7 item 9: matching at /authorize, exact except the loopback port ---------------------------------

LOOPBACK_HOSTS = ("127.0.0.1", "[::1]", "localhost")
_segment = st.text(alphabet=string.ascii_letters + string.digits + "-_~", min_size=1, max_size=12)
_paths = st.lists(_segment, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _query(key: str, value: str) -> str:
    return f"?{key}={value}"


def _web_uri(host: str, path: str, query: str) -> str:
    return f"https://{host}.example.com{path}{query}"


_queries = st.one_of(st.just(""), st.builds(_query, _segment, _segment))
_ports = st.integers(min_value=1, max_value=65535)


@st.composite
def loopback_uris(draw: st.DrawFn) -> tuple[str, str, int | None]:
    """A registrable loopback redirect URI as (host, path-and-query, port or None)."""
    host = draw(st.sampled_from(LOOPBACK_HOSTS))
    rest = draw(_paths) + draw(_queries)
    port = draw(st.one_of(st.none(), _ports.filter(lambda p: p != 80)))
    return host, rest, port


def _loopback(host: str, rest: str, port: int | None) -> str:
    return f"http://{host}{'' if port is None else f':{port}'}{rest}"


@settings(max_examples=200, deadline=None)
@given(loopback_uris(), _ports)
def test_loopback_matches_on_any_port(uri: tuple[str, str, int | None], port: int) -> None:
    """Issue 7 item 9: a registered loopback redirect URI is registrable and matches itself on every port."""
    host, rest, registered_port = uri
    registered = _loopback(host, rest, registered_port)
    check_redirect_uri(registered)
    assert redirect_uri_matches(registered, registered)
    assert redirect_uri_matches(registered, _loopback(host, rest, port))
    assert redirect_uri_matches(registered, _loopback(host, rest, None))


_MUTATIONS: list[tuple[str, str]] = [
    ("userinfo", "http://user@{host}{port}{rest}"),
    ("host spelled otherwise", "http://{HOST}{port}{rest}"),
    ("https instead of http", "https://{host}{port}{rest}"),
    ("HTTP scheme", "HTTP://{host}{port}{rest}"),
    ("dot segment", "http://{host}{port}/x/..{rest}"),
    ("single-dot segment", "http://{host}{port}/.{rest}"),
    ("encoded dot segment", "http://{host}{port}/x/%2e%2e{rest}"),
    ("trailing slash", "http://{host}{port}{rest}/"),
    ("extra query", "http://{host}{port}{rest}{sep}extra=1"),
    ("fragment", "http://{host}{port}{rest}#frag"),
    ("other loopback address", "http://127.0.0.2{port}{rest}"),
    ("hex loopback", "http://0x7f.0.0.1{port}{rest}"),
    ("trailing-dot host", "http://{host}.{port}{rest}"),
    ("port with leading zero", "http://{host}:0{bare_port}{rest}"),
    ("port out of range", "http://{host}:70000{rest}"),
    ("backslash", "http://{host}{port}\\{rest}"),
    ("at-sign after host", "http://{host}{port}@evil.example{rest}"),
]


@settings(max_examples=300, deadline=None)
@given(loopback_uris(), st.sampled_from(_MUTATIONS), _ports)
def test_loopback_mutations_never_match(uri: tuple[str, str, int | None], mutation: tuple[str, str], port: int) -> None:
    """Issue 7 item 9: nothing but the port may differ: no userinfo, dot segments, spellings or escape tricks."""
    host, rest, registered_port = uri
    registered = _loopback(host, rest, registered_port)
    name, template = mutation
    requested = template.format(
        host=host,
        HOST={"localhost": "LocalHost", "127.0.0.1": "127.000.0.1", "[::1]": "[0::1]"}[host],
        port=f":{port}",
        bare_port=port,
        rest=rest,
        sep="&" if "?" in rest else "?",
    )
    assert requested != registered
    assert not redirect_uri_matches(registered, requested), name


_web_uris = st.builds(_web_uri, _segment.map(str.lower), _paths, _queries)


@settings(max_examples=200, deadline=None)
@given(_web_uris, st.text(alphabet=string.printable, max_size=4), st.integers(min_value=0, max_value=40))
def test_other_uris_match_only_exactly(registered: str, noise: str, cut: int) -> None:
    """Issue 7 item 9: an https redirect URI matches only itself, character for character (no port freedom)."""
    check_redirect_uri(registered)
    assert redirect_uri_matches(registered, registered)
    changed = registered[:cut] + noise + registered[cut:]
    assert redirect_uri_matches(registered, changed) == (changed == registered)
    with_port = registered.replace(".example.com", ".example.com:8443", 1)
    assert not redirect_uri_matches(registered, with_port)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_matching_implies_registrable_shape(registered: str, requested: str) -> None:
    """Issue 7 item 9: arbitrary strings match only when equal, or when both are loopback http with one path."""
    if redirect_uri_matches(registered, requested) and registered != requested:
        assert registered.startswith("http://")
        assert requested.startswith("http://")


# -- Issue 7 item 10: the operator allow-list ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "uri", "allowed"),
    [
        (["https://claude.ai/api/mcp/auth_callback"], "https://claude.ai/api/mcp/auth_callback", True),
        (["https://claude.ai/api/mcp/auth_callback"], "https://claude.ai/api/mcp/auth_callback2", False),
        (["https://claude.ai/api/mcp/auth_callback"], "https://evil.example/cb", False),
        (["https://*.example.com/cb"], "https://a.example.com/cb", True),
        (["https://*.example.com/cb"], "https://a.b.example.com/cb", False),
        (["https://*.example.com/cb"], "https://example.com/cb", False),
        (["https://*.example.com/cb"], "https://evil.example/x.example.com/cb", False),
        (["https://app.example.com/oauth/*/callback"], "https://app.example.com/oauth/c-17/callback", True),
        (["https://app.example.com/oauth/*/callback"], "https://app.example.com/oauth/a/b/callback", False),
        (["https://app.example.com/cb?tenant=*"], "https://app.example.com/cb?tenant=acme", True),
        (["https://app.example.com/cb?tenant=*"], "https://app.example.com/cb?tenant=acme&x=1", False),
        (["http://127.0.0.1/callback"], "http://127.0.0.1:53682/callback", True),
        (["http://127.0.0.1/callback"], "http://127.0.0.1/callback", True),
        (["http://127.0.0.1/callback"], "http://localhost:53682/callback", False),
        (["http://localhost/*"], "http://localhost:3334/oauth", True),
        (["http://localhost/*"], "http://localhost:3334/oauth/callback", False),
        (
            ["cursor://anysphere.cursor-retrieval/oauth/user-mcp/callback"],
            "cursor://anysphere.cursor-retrieval/oauth/user-mcp/callback",
            True,
        ),
        (["https://*.example.com/cb"], "https://a.example.com/cb#x", False),  # the floor still holds
        (["https://*.example.com/cb"], "https://u@a.example.com/cb", False),
        (["https://*.example.com/*"], "https://a.example.com/..", False),
        (["https://a.example.com/cb", "http://[::1]/cb"], "http://[::1]:8080/cb", True),
    ],
)
def test_allow_list(patterns: list[str], uri: str, allowed: bool) -> None:
    """Issue 7 item 10: with an allow-list, a URI is accepted iff it passes the floor and matches a pattern."""
    policy = RedirectPolicy(patterns)
    if allowed:
        policy.check(uri)
    else:
        with pytest.raises(ValueError, match="redirect URI"):
            policy.check(uri)


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        "callback",
        "*://example.com/cb",
        "javascript:*",
        "HTTPS://example.com/cb",
        "https://example.com/cb#*",
        "https://user@example.com/cb",
        "http://example.com/cb",
        "http://127.0.0.1:8080/cb",
        "http://*.0.0.1/cb",
        "https://example.com/c b",
    ],
)
def test_bad_patterns_are_refused(pattern: str) -> None:
    """Issue 7 item 10: a pattern that could admit an unsafe URI is refused (at start-up, naming the key)."""
    with pytest.raises(ValueError, match="pattern"):
        compile_redirect_pattern(pattern)
    with pytest.raises(SettingsError, match=r"security\.allowed_redirect_uris"):
        load_settings(security={"allowed_redirect_uris": [pattern]})


@settings(max_examples=200, deadline=None)
@given(_web_uris)
def test_allow_list_replaces_the_default_rule(uri: str) -> None:
    """Issue 7 item 10: an https URI the default rule takes is refused when no pattern matches it."""
    RedirectPolicy().check(uri)
    with pytest.raises(ValueError, match="allowed_redirect_uris"):
        RedirectPolicy(["https://only.example.org/cb"]).check(uri)
    RedirectPolicy([uri]).check(uri)  # a pattern without wildcards admits exactly itself


_SCHEMES = st.sampled_from(["http://", "https://", "HTTP://", "com.example.app:", "com.example.app://", "javascript:"])
_HOSTS = st.sampled_from(
    [
        *("127.0.0.1", "[::1]", "localhost", "LOCALHOST", "0x7f.1", "127.1", "example.com", "Example.com"),
        *("user@localhost", "localhost@example.com", "127.0.0.1.example.com", ""),
    ]
)
_PORTS_RAW = st.sampled_from(["", "", ":80", ":443", ":8080", ":0", ":080", ":99999"])
_PATH_PIECES = st.sampled_from(
    ["/cb", "/", "/.", "/..", "/%2e", "/%2E%2E", "/%41", "/%zz", "/%2F", "/a b", "/\\", "/\u00e9", "/~x", "/a-b"]
)
_TAILS = st.sampled_from(["", "", "?x=1", "?x=1&y=/..", "#f", "#", "?@"])


def _uri(scheme: str, host: str, port: str, path: list[str], tail: str) -> str:
    return scheme + host + port + "".join(path) + tail


_MIXED_URIS = st.builds(_uri, _SCHEMES, _HOSTS, _PORTS_RAW, st.lists(_PATH_PIECES, max_size=3), _TAILS)


@settings(max_examples=1000, deadline=None)
@given(_MIXED_URIS)
def test_whatever_is_accepted_is_safe(uri: str) -> None:
    """Issue 7 item 9: any URI the default policy accepts has no fragment, userinfo, dot segment or odd spelling."""
    try:
        check_redirect_uri(uri)
    except ValueError:
        return
    event("accepted")
    scheme, _, rest = uri.partition(":")
    assert scheme in ("http", "https") or "." in scheme
    assert "#" not in uri
    assert not any(c in uri for c in " \t\\")
    assert uri.isascii()
    authority = rest[2:].split("/", 1)[0].split("?", 1)[0] if rest.startswith("//") else ""
    assert "@" not in authority
    path = (rest[2 + len(authority) :] if rest.startswith("//") else rest).split("?", 1)[0]
    assert not {".", ".."} & set(path.split("/"))
    assert "%2e" not in uri.lower()
    assert "%41" not in uri
    if scheme == "http":
        assert authority.rsplit(":", 1)[0] in ("127.0.0.1", "[::1]", "localhost") or authority == "[::1]"
