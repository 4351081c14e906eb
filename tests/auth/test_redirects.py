"""The redirect-URI policy shared by dynamic client registration and client ID metadata documents."""

from __future__ import annotations

import pytest

from hivegate.auth.oauth.redirects import check_redirect_uri


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
        "HTTP://LOCALHOST:3000/cb",
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
    ],
)
def test_refused(uri: str, reason: str) -> None:
    with pytest.raises(ValueError, match="redirect URI") as caught:
        check_redirect_uri(uri)
    assert reason in str(caught.value)
