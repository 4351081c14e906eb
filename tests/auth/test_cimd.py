"""Client ID metadata documents: URL rules, SSRF guards, document validation and the cache.

Every document is served by a real HTTP(S) server on 127.0.0.1 in a thread; host names other than ``localhost``
are answered by a fake ``socket.getaddrinfo`` so no query leaves the machine.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hivegate.auth.oauth.cimd import ClientMetadataError, ClientMetadataResolver, is_client_metadata_url
from tests.auth.tls import (
    DOC_PATH,
    REDIRECT_URI,
    DocServer,
    LoopbackPKI,
    Reply,
    make_loopback_pki,
    valid_document,
)


@pytest.fixture
def server() -> Iterator[DocServer]:
    doc_server = DocServer()
    yield doc_server
    doc_server.close()


@pytest.fixture
async def resolver() -> AsyncIterator[ClientMetadataResolver]:
    """Loopback and http allowed, as for local development."""
    res = ClientMetadataResolver(allow_private_addresses=True, allow_http=True, timeout_seconds=5)
    yield res
    await res.aclose()


@pytest.fixture
async def strict_resolver() -> AsyncIterator[ClientMetadataResolver]:
    """Production settings."""
    res = ClientMetadataResolver(timeout_seconds=5)
    yield res
    await res.aclose()


AddrInfo = list[tuple[Any, ...]]


@dataclass
class FakeDNS:
    """Names mapped to addresses (None: the name does not exist), and the names looked up, in order."""

    names: dict[str, list[str] | None] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    """Answers ``socket.getaddrinfo`` for the names in ``names``; other names go to the real resolver."""
    dns = FakeDNS()
    real: Callable[..., AddrInfo] = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> AddrInfo:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in dns.names:
            return real(host, port, *args, **kwargs)
        dns.lookups.append(name)
        addresses = dns.names[name]
        if addresses is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        infos: AddrInfo = []
        for address in addresses:
            if ipaddress.ip_address(address).version == 6:
                infos.append((socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, int(port), 0, 0)))
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port))))
        return infos

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return dns


# --- URL shape ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client_id", "expected"),
    [
        ("https://client.example.com/oauth/client.json", True),
        ("https://client.example.com:8443/c?v=1", True),
        ("https://client.example.com/", False),
        ("https://client.example.com", False),
        ("https://client.example.com?x=/a", False),
        ("http://client.example.com/oauth/client.json", False),
        ("0b4e5c1a-7d52-4d8e-9d5b-0a4f0e5f7c11", False),
        ("", False),
    ],
)
def test_is_client_metadata_url(client_id: str, expected: bool) -> None:
    assert is_client_metadata_url(client_id) is expected


def test_is_client_metadata_url_http_when_allowed() -> None:
    assert is_client_metadata_url("http://127.0.0.1:8080/client.json", allow_http=True)
    assert not is_client_metadata_url("http://127.0.0.1:8080/", allow_http=True)


@pytest.mark.parametrize(
    ("client_id", "reason"),
    [
        ("https://client.example.com/c.json#frag", "fragment"),
        ("https://client.example.com/c.json#", "fragment"),
        ("https://user:pw@client.example.com/c.json", "user name or password"),
        ("https://user@client.example.com/c.json", "user name or password"),
        ("https://client.example.com/", "must have a path"),
        ("https://client.example.com", "must have a path"),
        ("https://client.example.com/a/../c.json", "path segments"),
        ("https://client.example.com/./c.json", "path segments"),
        ("https://client.example.com/a/%2E%2E/c.json", "path segments"),
        ("ftp://client.example.com/c.json", "must use https"),
        ("HTTPS://client.example.com/c.json", "must use https"),
        ("https://client.example.com/c json", "whitespace"),
        ("https://client.example.com\\@127.0.0.1/c.json", "backslash"),
        ("https://client.example.com/" + "a" * 2048, "longer than 2048"),
        ("https:///c.json", "no host"),
    ],
)
async def test_client_id_url_refused(resolver: ClientMetadataResolver, client_id: str, reason: str) -> None:
    with pytest.raises(ClientMetadataError, match="client_id") as caught:
        await resolver.resolve(client_id)
    assert reason in str(caught.value)


# --- Happy path and cache ----------------------------------------------------------------------------------------


async def test_resolves_document(server: DocServer, resolver: ClientMetadataResolver) -> None:
    client_id = server.serve(server.url(), {"scope": "agent:alpha", "logo_uri": "https://client.example.com/l.png"})

    client = await resolver.resolve(client_id)

    assert client.client_id == client_id
    assert client.token_endpoint_auth_method == "none"
    assert client.client_secret is None
    assert [str(uri) for uri in client.redirect_uris or []] == [REDIRECT_URI]
    assert client.grant_types == ["authorization_code", "refresh_token"]
    assert client.response_types == ["code"]
    assert client.client_name == "Test client"
    assert client.scope == "agent:alpha"
    [request] = server.seen
    assert request.path == DOC_PATH
    assert request.headers["host"] == f"127.0.0.1:{server.port}"
    assert request.headers["accept"] == "application/json"


async def test_defaults_when_optional_members_absent(server: DocServer, resolver: ClientMetadataResolver) -> None:
    client_id = server.url()
    server.routes[DOC_PATH] = Reply(json.dumps({"client_id": client_id, "redirect_uris": [REDIRECT_URI]}).encode())

    client = await resolver.resolve(client_id)

    assert client.token_endpoint_auth_method == "none"
    assert client.grant_types == ["authorization_code"]  # RFC 7591 §2 default
    assert client.response_types == ["code"]


async def test_accepts_json_suffix_media_type_and_ignores_issuer(
    server: DocServer, resolver: ClientMetadataResolver
) -> None:
    client_id = server.serve(
        server.url(), {"issuer": "https://other.example"}, headers={"Content-Type": "application/cimd+json"}
    )

    client = await resolver.resolve(client_id)

    assert client.issuer is None


async def test_cache_hit(server: DocServer, resolver: ClientMetadataResolver) -> None:
    client_id = server.serve(server.url())

    first = await resolver.resolve(client_id)
    first.client_name = "changed by a caller"
    second = await resolver.resolve(client_id)

    assert len(server.seen) == 1
    assert second.client_name == "Test client"  # callers get copies


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _expiry_fetches(
    server: DocServer, cache_control: str | None, advance: list[float], age: str | None = None, **options: Any
) -> int:
    """Requests the server saw when resolving once, then once after each clock advance."""
    clock = Clock()
    headers = {"Content-Type": "application/json"}
    if cache_control is not None:
        headers["Cache-Control"] = cache_control
    if age is not None:
        headers["Age"] = age
    client_id = server.serve(server.url(), headers=headers)
    res = ClientMetadataResolver(allow_private_addresses=True, allow_http=True, clock=clock, **options)
    try:
        await res.resolve(client_id)
        for seconds in advance:
            clock.now += seconds
            await res.resolve(client_id)
    finally:
        await res.aclose()
    return len(server.seen)


async def test_default_ttl(server: DocServer) -> None:
    assert await _expiry_fetches(server, None, [299, 2]) == 2


async def test_max_age_respected(server: DocServer) -> None:
    assert await _expiry_fetches(server, "public, max-age=60", [59, 2]) == 2


async def test_age_counts_against_max_age(server: DocServer) -> None:
    assert await _expiry_fetches(server, "max-age=60", [29, 2], age="30") == 2


async def test_max_age_capped(server: DocServer) -> None:
    assert await _expiry_fetches(server, "max-age=31536000", [99, 2], default_ttl_seconds=50, max_ttl_seconds=100) == 2


@pytest.mark.parametrize("cache_control", ["no-store", "no-cache", "max-age=0"])
async def test_not_cached(server: DocServer, cache_control: str) -> None:
    assert await _expiry_fetches(server, cache_control, [0]) == 2


async def test_cache_entries_bounded(server: DocServer) -> None:
    first = server.serve(server.url("/a.json"))
    second = server.serve(server.url("/b.json"))
    res = ClientMetadataResolver(allow_private_addresses=True, allow_http=True, max_entries=1)
    try:
        await res.resolve(first)
        await res.resolve(second)  # evicts the first
        await res.resolve(second)
        await res.resolve(first)
    finally:
        await res.aclose()
    assert [seen.path for seen in server.seen] == ["/a.json", "/b.json", "/a.json"]


# --- Document validation -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document_client_id", "label"),
    [
        ("https://evil.example/oauth/client.json", "other host"),
        ("{url}/", "trailing slash"),
        ("{url}?x", "query"),
        (None, "absent"),
    ],
)
async def test_mismatched_client_id(
    server: DocServer, resolver: ClientMetadataResolver, document_client_id: str | None, label: str
) -> None:
    url = server.url()
    document = valid_document(url)
    if document_client_id is None:
        del document["client_id"]
    else:
        document["client_id"] = document_client_id.format(url=url)
    server.routes[DOC_PATH] = Reply(json.dumps(document).encode())

    with pytest.raises(ClientMetadataError, match="does not equal its URL"):
        await resolver.resolve(url)


@pytest.mark.parametrize("content_length", [True, False])
async def test_oversize_document(server: DocServer, content_length: bool) -> None:
    client_id = server.url()
    padding = "x" * 5000
    server.serve(client_id, {"client_name": padding}, content_length=content_length)
    res = ClientMetadataResolver(allow_private_addresses=True, allow_http=True, max_bytes=4096)
    try:
        with pytest.raises(ClientMetadataError, match="larger than 4096 bytes"):
            await res.resolve(client_id)
    finally:
        await res.aclose()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(b"<html>hi</html>", headers={"Content-Type": "text/html"}), "served as application/json"),
        (Reply(b"{}", headers={}), "served as application/json"),
        (Reply(b"{not json"), "not valid JSON"),
        (Reply(b"\xff\xfe\xfa"), "not valid JSON"),
        (Reply(b"[" * 30000 + b"]" * 30000), "not valid JSON"),
        (Reply(b'["a", "b"]'), "must be a JSON object"),
        (Reply(b'"https://x/y"'), "must be a JSON object"),
        (Reply(b"{}", status=404), "HTTP 404"),
        (Reply(b"{}", status=500), "HTTP 500"),
        (
            Reply(b"{}", headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}),
            "must not be compressed",
        ),
    ],
)
async def test_bad_response(server: DocServer, resolver: ClientMetadataResolver, reply: Reply, reason: str) -> None:
    server.routes[DOC_PATH] = reply

    with pytest.raises(ClientMetadataError) as caught:
        await resolver.resolve(server.url())
    assert reason in str(caught.value)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirect_not_followed(server: DocServer, resolver: ClientMetadataResolver, status: int) -> None:
    target = server.serve(server.url("/elsewhere.json"))
    server.routes[DOC_PATH] = Reply(b"", status=status, headers={"Location": target})

    with pytest.raises(ClientMetadataError, match=f"redirect \\(HTTP {status}\\); redirects are not followed"):
        await resolver.resolve(server.url())
    assert [seen.path for seen in server.seen] == [DOC_PATH]


@pytest.mark.parametrize(
    ("redirect_uris", "reason"),
    [
        (["javascript:alert(document.cookie)"], "redirect_uris[0]: redirect URI scheme 'javascript' is not allowed"),
        (["data:text/html,hi"], "redirect_uris[0]: redirect URI scheme 'data' is not allowed"),
        (
            [REDIRECT_URI, "https://client.example.com/cb#x"],
            "redirect_uris[1]: redirect URI must not contain a fragment",
        ),
        (["http://client.example.com/cb"], "only on 127.0.0.1, [::1] or localhost"),
        (["https://user@client.example.com/cb"], "userinfo"),
        (["myapp:/cb"], "'myapp' is not allowed"),
        ([42], "redirect_uris[0] is not a string"),
        ([], "must list redirect_uris"),
        ("https://client.example.com/cb", "must list redirect_uris"),
        (None, "must list redirect_uris"),
    ],
)
async def test_bad_redirect_uris(
    server: DocServer, resolver: ClientMetadataResolver, redirect_uris: object, reason: str
) -> None:
    client_id = server.serve(server.url(), {"redirect_uris": redirect_uris})

    with pytest.raises(ClientMetadataError) as caught:
        await resolver.resolve(client_id)
    assert reason in str(caught.value)


async def test_https_and_private_use_redirect_uris_accepted(
    server: DocServer, resolver: ClientMetadataResolver
) -> None:
    uris = ["https://client.example.com/cb", "http://[::1]:9000/cb", "http://localhost/cb", "com.example.app:/cb"]
    client_id = server.serve(server.url(), {"redirect_uris": uris})

    client = await resolver.resolve(client_id)

    assert [str(uri) for uri in client.redirect_uris or []] == uris


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ({"client_secret": "s3cret"}, "must not contain client_secret"),
        ({"client_secret_expires_at": 0}, "must not contain client_secret_expires_at"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "token_endpoint_auth_method must be 'none'"),
        ({"token_endpoint_auth_method": "client_secret_post"}, "token_endpoint_auth_method must be 'none'"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "token_endpoint_auth_method must be 'none'"),
        ({"grant_types": ["client_credentials"]}, "grant_types must include authorization_code"),
        ({"grant_types": "authorization_code"}, "grant_types must be a list of strings"),
        ({"response_types": ["token"]}, "response_types must include code"),
        ({"client_uri": "not a url"}, "invalid client metadata: client_uri:"),
    ],
)
async def test_bad_members(
    server: DocServer, resolver: ClientMetadataResolver, members: dict[str, Any], reason: str
) -> None:
    client_id = server.serve(server.url(), members)

    with pytest.raises(ClientMetadataError) as caught:
        await resolver.resolve(client_id)
    assert reason in str(caught.value)


# --- SSRF guards -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"])
async def test_loopback_refused_by_default(server: DocServer, host: str) -> None:
    client_id = server.serve(server.url(host=host))
    res = ClientMetadataResolver(allow_http=True)
    try:
        with pytest.raises(ClientMetadataError, match="resolves to a loopback address, which is not allowed"):
            await res.resolve(client_id)
    finally:
        await res.aclose()
    assert server.seen == []


async def test_http_refused_by_default(server: DocServer) -> None:
    client_id = server.serve(server.url())
    res = ClientMetadataResolver(allow_private_addresses=True)
    try:
        with pytest.raises(ClientMetadataError, match="client_id URL must use https"):
            await res.resolve(client_id)
    finally:
        await res.aclose()
    assert server.seen == []


@pytest.mark.parametrize(
    ("addresses", "kind"),
    [
        (["93.184.215.14", "10.0.0.5"], "a private"),  # every address is checked, not just the first
        (["192.168.1.10"], "a private"),
        (["169.254.169.254"], "a link-local"),  # cloud metadata service
        (["100.64.0.1"], "a non-public"),  # shared address space (CGNAT)
        (["240.0.0.1"], "a reserved"),
        (["::1"], "a loopback"),
        (["fe80::1"], "a link-local"),
        (["fd00::1"], "a private"),
        (["::ffff:10.0.0.1"], "a private"),
        (["64:ff9b::7f00:1"], "a loopback"),  # NAT64 of 127.0.0.1
        (["2002:7f00:1::1"], "a loopback"),  # 6to4 of 127.0.0.1
        (["224.0.1.1"], "a multicast"),
        (["0.0.0.0"], "an unspecified"),
    ],
)
async def test_resolved_address_refused(
    strict_resolver: ClientMetadataResolver, fake_dns: FakeDNS, addresses: list[str], kind: str
) -> None:
    fake_dns.names["client.example.test"] = addresses

    with pytest.raises(ClientMetadataError, match=f"resolves to {kind} address, which is not allowed"):
        await strict_resolver.resolve("https://client.example.test/client.json")


@pytest.mark.parametrize("address", ["0.0.0.0", "224.0.0.1", "ff02::1"])
async def test_unspecified_and_multicast_refused_even_when_private_allowed(
    resolver: ClientMetadataResolver, fake_dns: FakeDNS, address: str
) -> None:
    fake_dns.names["client.example.test"] = [address]

    with pytest.raises(ClientMetadataError, match="not allowed"):
        await resolver.resolve("http://client.example.test/client.json")


async def test_connects_to_checked_address_without_re_resolving(
    server: DocServer, resolver: ClientMetadataResolver, fake_dns: FakeDNS
) -> None:
    # 127.0.0.2 is loopback too but nothing listens there: the resolver falls back to the next checked address.
    fake_dns.names["client.example.test"] = ["127.0.0.2", "127.0.0.1"]
    client_id = server.serve(server.url(host="client.example.test"))

    client = await resolver.resolve(client_id)

    assert client.client_id == client_id
    assert fake_dns.lookups == [
        "client.example.test"
    ]  # resolved once; the connections went to the addresses it returned
    [request] = server.seen
    assert request.headers["host"] == f"client.example.test:{server.port}"


async def test_unresolvable_host(strict_resolver: ClientMetadataResolver, fake_dns: FakeDNS) -> None:
    fake_dns.names["nothing-here.invalid"] = None

    with pytest.raises(ClientMetadataError) as caught:
        await strict_resolver.resolve("https://nothing-here.invalid/client.json")

    message = str(caught.value)
    assert message == "the client_id host name could not be resolved"
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


async def test_connection_refused(resolver: ClientMetadataResolver) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(ClientMetadataError, match=r"^could not connect to the client_id host$"):
        await resolver.resolve(f"http://127.0.0.1:{port}/client.json")


async def test_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        res = ClientMetadataResolver(allow_private_addresses=True, allow_http=True, timeout_seconds=0.3)
        try:
            started = time.monotonic()
            with pytest.raises(ClientMetadataError, match=r"timed out after 0\.3 seconds"):
                await res.resolve(f"http://127.0.0.1:{port}/client.json")
            assert time.monotonic() - started < 3
        finally:
            await res.aclose()


def test_settings_validated() -> None:
    with pytest.raises(ValueError, match="timeout_seconds"):
        ClientMetadataResolver(timeout_seconds=0)
    with pytest.raises(ValueError, match="max_bytes"):
        ClientMetadataResolver(max_bytes=0)
    with pytest.raises(ValueError, match="default_ttl_seconds"):
        ClientMetadataResolver(default_ttl_seconds=600, max_ttl_seconds=60)
    with pytest.raises(ValueError, match="max_entries"):
        ClientMetadataResolver(max_entries=0)


# --- HTTPS with a test CA ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> LoopbackPKI:
    """A throwaway CA and a server certificate for localhost and 127.0.0.1 signed by it."""
    return make_loopback_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_server(pki: LoopbackPKI) -> Iterator[DocServer]:
    doc_server = DocServer(tls=pki.server_context)
    yield doc_server
    doc_server.close()


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
async def test_https_with_ssl_context(tls_server: DocServer, pki: LoopbackPKI, host: str) -> None:
    client_id = tls_server.serve(tls_server.url(host=host))
    res = ClientMetadataResolver(allow_private_addresses=True, verify=pki.client_context())
    try:
        client = await res.resolve(client_id)
    finally:
        await res.aclose()
    assert client.client_id == client_id
    assert is_client_metadata_url(client_id)


async def test_https_with_ca_bundle_path(tls_server: DocServer, pki: LoopbackPKI) -> None:
    client_id = tls_server.serve(tls_server.url(host="localhost"))
    res = ClientMetadataResolver(allow_private_addresses=True, verify=str(pki.ca_file))
    try:
        client = await res.resolve(client_id)
    finally:
        await res.aclose()
    assert client.client_id == client_id


async def test_https_name_checked_against_certificate(
    tls_server: DocServer, pki: LoopbackPKI, fake_dns: FakeDNS
) -> None:
    """Connecting to the checked address keeps the certificate check on the URL's host name."""
    fake_dns.names["client.example.test"] = ["127.0.0.1"]
    client_id = tls_server.serve(tls_server.url(host="client.example.test"))
    res = ClientMetadataResolver(allow_private_addresses=True, verify=pki.client_context())
    try:
        with pytest.raises(ClientMetadataError, match=r"^TLS connection to the client_id host failed$"):
            await res.resolve(client_id)
    finally:
        await res.aclose()


async def test_https_untrusted_certificate(tls_server: DocServer) -> None:
    client_id = tls_server.serve(tls_server.url(host="localhost"))
    res = ClientMetadataResolver(allow_private_addresses=True)
    try:
        with pytest.raises(ClientMetadataError, match=r"^TLS connection to the client_id host failed$"):
            await res.resolve(client_id)
    finally:
        await res.aclose()
    assert tls_server.seen == []
