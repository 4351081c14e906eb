"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document): resolve a URL ``client_id``.

A client that has not registered may use an ``https`` URL as its ``client_id``. The authorization server fetches
that URL, which serves the client's RFC 7591 metadata as JSON with a ``client_id`` equal to the URL; the document's
``redirect_uris`` are then the client's registered redirect URIs. :class:`ClientMetadataResolver` does the fetch
and the validation and returns the SDK's :class:`~mcp.shared.auth.OAuthClientInformationFull` for a public client
(``token_endpoint_auth_method="none"``).

The fetch is a request to an address chosen by an unauthenticated party, so it is guarded against SSRF:

- the URL must be ``https`` (``http`` only with ``allow_http``), with a host, a path other than ``/``, no
  userinfo, no fragment and no ``.``/``..`` segments;
- the host is resolved once and **every** address it resolves to is checked: loopback, private, link-local,
  shared (CGNAT), reserved, documentation and other non-global addresses are refused unless
  ``allow_private_addresses``; unspecified and multicast addresses are always refused. IPv4 addresses embedded in
  IPv6 ones (IPv4-mapped, NAT64, 6to4, Teredo) are checked too;
- the request goes to the checked address itself (the host name is sent as ``Host`` and as the TLS server name,
  so the certificate is still verified for the name), never through a proxy, never re-resolved, without
  keep-alive, and redirects are not followed;
- the whole resolution and fetch must finish within ``timeout_seconds``; the body must be at most ``max_bytes``
  (counted on the wire; compressed responses are refused), have a JSON content type and status 200.

Documents are cached per ``client_id`` for the response's ``Cache-Control: max-age`` (less ``Age``), or
``default_ttl_seconds`` without one, capped at ``max_ttl_seconds``; ``no-store``, ``no-cache`` or ``max-age=0``
mean not cached. At most ``max_entries`` documents are kept (least recently used evicted first). Failures are not
cached.

:class:`ClientMetadataError` messages say what was wrong with the client's URL or document and nothing about the
gateway's network (no exception text, resolver or socket errors); they are fit for an OAuth ``error_description``.
Details go to this module's logger.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import os
import re
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError

from hivegate.auth.oauth.redirects import RedirectPolicy

__all__ = [
    "MAX_CLIENT_ID_LENGTH",
    "ClientMetadataError",
    "ClientMetadataResolver",
    "is_client_metadata_url",
]

logger = logging.getLogger(__name__)

MAX_CLIENT_ID_LENGTH = 2048
"""Longer URL client ids are refused before any I/O."""

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
_FORBIDDEN_CHARACTERS = re.compile(r"[\x00-\x20\x7f\\]")
_DOT_SEGMENTS = frozenset({".", "..", "%2e", "%2e%2e", ".%2e", "%2e."})
_REFUSED_SECRET_MEMBERS = ("client_secret", "client_secret_expires_at")
_DROPPED_MEMBERS = ("issuer", "client_id_issued_at")


class ClientMetadataError(Exception):
    """The client's metadata document could not be resolved or is invalid.

    The message is safe to show to the client (use it as the OAuth ``error_description``).
    """


def is_client_metadata_url(client_id: str, *, allow_http: bool = False) -> bool:
    """Whether ``client_id`` looks like a metadata-document URL: ``https://`` (or ``http://`` with ``allow_http``)
    with a path other than ``/``.

    A cheap shape test without I/O, to decide whether a ``client_id`` goes to :class:`ClientMetadataResolver`
    rather than to the registered-client store; the resolver validates the URL fully and explains any refusal.
    """
    schemes = ("https://", "http://") if allow_http else ("https://",)
    if not client_id.startswith(schemes):
        return False
    return _raw_path(client_id) not in ("", "/")


def _raw_path(url: str) -> str:
    """The path of ``url`` as written (before any normalisation): after the authority, before ``?`` or ``#``."""
    rest = url.split("://", 1)[1]
    path_start = rest.find("/")
    if path_start < 0 or any(0 <= rest.find(c) < path_start for c in "?#"):
        return ""
    return re.split(r"[?#]", rest[path_start:], maxsplit=1)[0]


@dataclass(frozen=True, slots=True)
class _Target:
    url: httpx.URL
    host: str  # ASCII host name or IP literal, without brackets
    host_header: str
    literal: _IPAddress | None


@dataclass(slots=True)
class _CacheEntry:
    client: OAuthClientInformationFull
    expires_at: float


class _ConnectFailedError(Exception):
    """Connecting to one resolved address failed; the next one may be tried."""


class ClientMetadataResolver:
    """Fetch, validate and cache client ID metadata documents (see the module docstring for the guards).

    ``allow_private_addresses`` and ``allow_http`` exist for tests and local development, where the document is
    served on loopback; leave them off in production. ``verify`` sets the TLS trust: ``True`` (the certifi
    bundle, as httpx does by default), ``False`` (no verification — never in production), the path of a CA bundle
    file or CA directory, or an :class:`ssl.SSLContext` (tests use one trusting a throwaway CA).
    ``clock`` (monotonic seconds) exists for tests of cache expiry. ``redirect_policy`` decides which of the
    document's ``redirect_uris`` are acceptable (default: :class:`~hivegate.auth.oauth.redirects.RedirectPolicy`
    with no allow-list; the gateway passes the one built from ``security.allowed_redirect_uris``).
    """

    def __init__(
        self,
        *,
        allow_private_addresses: bool = False,
        allow_http: bool = False,
        timeout_seconds: float = 5.0,
        max_bytes: int = 65536,
        default_ttl_seconds: int = 300,
        max_ttl_seconds: int = 86400,
        max_entries: int = 1024,
        verify: ssl.SSLContext | str | bool = True,
        clock: Callable[[], float] = time.monotonic,
        redirect_policy: RedirectPolicy | None = None,
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        if not 0 <= default_ttl_seconds <= max_ttl_seconds:
            raise ValueError("need 0 <= default_ttl_seconds <= max_ttl_seconds")
        if max_entries <= 0:
            raise ValueError("max_entries must be positive")
        self._allow_private = allow_private_addresses
        self._allow_http = allow_http
        self._timeout = timeout_seconds
        self._max_bytes = max_bytes
        self._default_ttl = default_ttl_seconds
        self._max_ttl = max_ttl_seconds
        self._max_entries = max_entries
        self._clock = clock
        self._redirect_policy = redirect_policy if redirect_policy is not None else RedirectPolicy()
        self._cache: OrderedDict[str, _CacheEntry] = OrderedDict()
        self._client = httpx.AsyncClient(
            verify=_ssl_context(verify),
            follow_redirects=False,
            trust_env=False,  # no proxies from the environment: the connection must go to the checked address
            timeout=httpx.Timeout(timeout_seconds),
            limits=httpx.Limits(max_keepalive_connections=0),  # a connection is never reused for another name
        )

    async def aclose(self) -> None:
        """Close the HTTP client. The resolver must not be used afterwards."""
        await self._client.aclose()

    async def resolve(self, client_id: str) -> OAuthClientInformationFull:
        """Return the public client described by the metadata document at ``client_id``.

        Raises :class:`ClientMetadataError` when the URL is not acceptable, the document cannot be fetched, or it
        is not a valid metadata document for a public client with ``client_id`` equal to the URL.
        """
        now = self._clock()
        entry = self._cache.get(client_id)
        if entry is not None:
            if entry.expires_at > now:
                self._cache.move_to_end(client_id)
                return entry.client.model_copy(deep=True)
            del self._cache[client_id]
        target = self._parse_client_id(client_id)
        body, ttl = await self._fetch(target, client_id)
        client = _client_from_document(client_id, body, self._redirect_policy)
        if ttl > 0:
            self._cache[client_id] = _CacheEntry(client, now + ttl)
            self._cache.move_to_end(client_id)
            while len(self._cache) > self._max_entries:
                self._cache.popitem(last=False)
        return client.model_copy(deep=True)

    def _parse_client_id(self, client_id: str) -> _Target:
        if len(client_id) > MAX_CLIENT_ID_LENGTH:
            raise ClientMetadataError(f"client_id URL is longer than {MAX_CLIENT_ID_LENGTH} characters")
        if _FORBIDDEN_CHARACTERS.search(client_id) or not client_id.isascii():
            raise ClientMetadataError(
                "client_id URL contains whitespace, a control character, a backslash or non-ASCII characters"
            )
        if not client_id.startswith(("https://", "http://") if self._allow_http else ("https://",)):
            raise ClientMetadataError("client_id URL must use https")
        _check_url_parts(client_id)
        try:
            url = httpx.URL(client_id)
            host = url.raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeDecodeError):
            raise ClientMetadataError("client_id is not a valid URL") from None
        if not host:
            raise ClientMetadataError("client_id URL has no host")
        try:
            literal: _IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        return _Target(url=url, host=host, host_header=url.netloc.decode("ascii"), literal=literal)

    async def _fetch(self, target: _Target, client_id: str) -> tuple[bytes, int]:
        try:
            with anyio.fail_after(self._timeout):
                addresses = await self._addresses(target)
                for address in addresses:
                    try:
                        return await self._fetch_from(target, address)
                    except _ConnectFailedError:
                        continue
        except TimeoutError:
            logger.info("client metadata document %s: timed out after %ss", client_id, self._timeout)
            raise ClientMetadataError(
                f"fetching the client metadata document timed out after {self._timeout:g} seconds"
            ) from None
        raise ClientMetadataError("could not connect to the client_id host")

    async def _addresses(self, target: _Target) -> list[_IPAddress]:
        """The addresses to try, all of them checked; raises if the host does not resolve or any address is refused."""
        if target.literal is not None:
            addresses = [target.literal]
        else:
            try:
                infos = await anyio.getaddrinfo(
                    target.host,
                    target.url.port or (443 if target.url.scheme == "https" else 80),
                    type=socket.SOCK_STREAM,
                    proto=socket.IPPROTO_TCP,
                )
            except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
                logger.info("client metadata host %s did not resolve: %r", target.host, exc)
                raise ClientMetadataError("the client_id host name could not be resolved") from None
            addresses = []
            for *_, sockaddr in infos:
                address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
                if address not in addresses:
                    addresses.append(address)
            if not addresses:
                raise ClientMetadataError("the client_id host name could not be resolved")
        for address in addresses:
            reason = _address_refusal(address, allow_private=self._allow_private)
            if reason is not None:
                logger.info("client metadata host %s: refused address %s (%s)", target.host, address, reason)
                raise ClientMetadataError(f"the client_id host resolves to {reason} address, which is not allowed")
        return addresses

    async def _fetch_from(self, target: _Target, address: _IPAddress) -> tuple[bytes, int]:
        extensions: dict[str, Any] = {}
        if target.url.scheme == "https" and target.literal is None:
            extensions["sni_hostname"] = target.host  # TLS server name and certificate check use the host name
        request = self._client.build_request(
            "GET",
            target.url.copy_with(host=str(address)),
            headers={
                "Host": target.host_header,
                "Accept": "application/json",
                "Accept-Encoding": "identity",
                "User-Agent": "hivegate",
            },
            extensions=extensions,
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.ConnectError as exc:
            if _caused_by_tls(exc):
                logger.info("client metadata host %s (%s): TLS failure: %r", target.host, address, exc)
                raise ClientMetadataError("TLS connection to the client_id host failed") from None
            logger.info("client metadata host %s (%s): connect failed: %r", target.host, address, exc)
            raise _ConnectFailedError from None
        except httpx.HTTPError as exc:
            raise _fetch_failure(exc, f"client metadata host {target.host} ({address})") from None
        try:
            return await self._read(response), self._ttl(response.headers)
        except httpx.HTTPError as exc:
            raise _fetch_failure(exc, f"client metadata host {target.host} ({address}): reading failed") from None
        finally:
            await response.aclose()

    async def _read(self, response: httpx.Response) -> bytes:
        status = response.status_code
        if 300 <= status < 400:
            raise ClientMetadataError(
                f"the client metadata document URL answered with a redirect (HTTP {status}); redirects are not followed"
            )
        if status != 200:
            raise ClientMetadataError(f"the client metadata document URL answered HTTP {status}, not 200")
        media_type = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json" and not (
            media_type.startswith("application/") and media_type.endswith("+json")
        ):
            raise ClientMetadataError("the client metadata document must be served as application/json")
        if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
            raise ClientMetadataError("the client metadata document must not be compressed")
        too_large = ClientMetadataError(f"the client metadata document is larger than {self._max_bytes} bytes")
        length = response.headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > self._max_bytes:
            raise too_large
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > self._max_bytes:
                raise too_large
        return bytes(body)

    def _ttl(self, headers: httpx.Headers) -> int:
        max_age: int | None = None
        for directive in headers.get("cache-control", "").split(","):
            name, _, value = directive.strip().partition("=")
            name = name.strip().lower()
            if name in ("no-store", "no-cache"):
                return 0
            if name == "max-age":
                value = value.strip().strip('"')
                if value.isdigit():
                    max_age = int(value)
        if max_age is None:
            return self._default_ttl
        age = headers.get("age", "0").strip()
        if age.isdigit():
            max_age -= int(age)
        return max(0, min(max_age, self._max_ttl))


def _check_url_parts(client_id: str) -> None:
    """The draft's rules on the URL as written: no fragment, no userinfo, a path, no dot segments."""
    if "#" in client_id:
        raise ClientMetadataError("client_id URL must not contain a fragment")
    authority = re.split(r"[/?]", client_id.split("://", 1)[1], maxsplit=1)[0]
    if "@" in authority:
        raise ClientMetadataError("client_id URL must not contain a user name or password")
    path = _raw_path(client_id)
    if path in ("", "/"):
        raise ClientMetadataError("client_id URL must have a path")
    if any(segment.lower() in _DOT_SEGMENTS for segment in path.split("/")):
        raise ClientMetadataError("client_id URL must not contain '.' or '..' path segments")


def _address_refusal(address: _IPAddress, *, allow_private: bool) -> str | None:
    """Why ``address`` may not be fetched from (an article and adjective: "a private"), or None if it may."""
    # IPv4 addresses embedded in an IPv6 one first: they say more about where the packets end up.
    for candidate in [*_embedded_ipv4(address), address]:
        if candidate.is_unspecified:
            return "an unspecified"
        if candidate.is_multicast:
            return "a multicast"
        if not allow_private and not candidate.is_global:
            return _non_global_kind(candidate)
    return None


def _embedded_ipv4(address: _IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses carried in an IPv6 one (IPv4-mapped, NAT64 well-known prefix, 6to4, Teredo)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    embedded: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        embedded.append(address.ipv4_mapped)
    if address in _NAT64_PREFIX:
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        embedded.append(address.sixtofour)
    if address.teredo is not None:
        embedded.extend(address.teredo)
    return embedded


def _non_global_kind(address: _IPAddress) -> str:
    if address.is_loopback:
        return "a loopback"
    if address.is_link_local:
        return "a link-local"
    if address.is_reserved:
        return "a reserved"
    if address.is_private:
        return "a private"
    return "a non-public"


def _ssl_context(verify: ssl.SSLContext | str | bool) -> ssl.SSLContext | bool:
    if verify is True:
        return _default_ssl_context()
    if isinstance(verify, str):  # a CA bundle file or a directory of CA certificates
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    return verify


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    """httpx's default (certifi) trust, built once: loading the bundle costs a noticeable fraction of a second."""
    return httpx.create_ssl_context(trust_env=False)


def _fetch_failure(exc: httpx.HTTPError, where: str) -> Exception:
    """What a failed fetch or read of a metadata document raises: ``TimeoutError`` for a timeout (the
    caller's deadline handling), else a :class:`ClientMetadataError` (the cause goes to the log only)."""
    if isinstance(exc, httpx.TimeoutException):
        return TimeoutError()
    logger.info("%s: %r", where, exc)
    return ClientMetadataError("could not fetch the client metadata document")


def _caused_by_tls(exc: BaseException) -> bool:
    cause: BaseException | None = exc
    for _ in range(16):  # exception chains are short; the bound guards against a cycle
        if cause is None:
            return False
        if isinstance(cause, ssl.SSLError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _client_from_document(client_id: str, body: bytes, policy: RedirectPolicy) -> OAuthClientInformationFull:
    """Validate a fetched metadata document and return the public client it describes."""
    try:
        parsed: object = json.loads(body)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ClientMetadataError("the client metadata document is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise ClientMetadataError("the client metadata document must be a JSON object")
    document = cast(dict[str, Any], parsed)
    if document.get("client_id") != client_id:
        raise ClientMetadataError("the client_id in the client metadata document does not equal its URL")
    _check_no_secret(document)
    _check_redirect_uris(document, policy)
    grant_types = _string_list(document, "grant_types", default=["authorization_code"])
    if "authorization_code" not in grant_types:
        raise ClientMetadataError("grant_types must include authorization_code")
    response_types = _string_list(document, "response_types", default=["code"])
    if "code" not in response_types:
        raise ClientMetadataError("response_types must include code")
    fields = {key: value for key, value in document.items() if key not in _DROPPED_MEMBERS}
    fields.update(
        client_id=client_id,
        token_endpoint_auth_method="none",
        grant_types=grant_types,
        response_types=response_types,
    )
    try:
        return OAuthClientInformationFull.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "document"
        raise ClientMetadataError(f"invalid client metadata: {where}: {first['msg']}") from None


def _check_no_secret(document: dict[str, Any]) -> None:
    for member in _REFUSED_SECRET_MEMBERS:
        if member in document:
            raise ClientMetadataError(
                f"the client metadata document must not contain {member}: such a client has no secret"
            )
    method = document.get("token_endpoint_auth_method")
    if method is not None and method != "none":
        raise ClientMetadataError("token_endpoint_auth_method must be 'none' for a client identified by a URL")


def _check_redirect_uris(document: dict[str, Any], policy: RedirectPolicy) -> None:
    redirect_uris = document.get("redirect_uris")
    if not isinstance(redirect_uris, list) or not redirect_uris:
        raise ClientMetadataError("the client metadata document must list redirect_uris")
    for index, uri in enumerate(cast(list[object], redirect_uris)):
        if not isinstance(uri, str):
            raise ClientMetadataError(f"redirect_uris[{index}] is not a string")
        try:
            policy.check(uri)  # the strings as written: the SDK's model below would normalise them
        except ValueError as exc:
            raise ClientMetadataError(f"redirect_uris[{index}]: {exc}") from None


def _string_list(document: dict[str, Any], member: str, *, default: list[str]) -> list[str]:
    value = document.get(member)
    if value is None:
        return list(default)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in cast(list[object], value)):
        raise ClientMetadataError(f"{member} must be a list of strings")
    return list(cast(list[str], value))
