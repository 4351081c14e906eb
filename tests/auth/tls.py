"""Loopback HTTP(S) test servers and a throwaway PKI, shared by the CIMD unit tests and the OAuth e2e test.

``DocServer`` answers GETs on 127.0.0.1 from a table of replies (HTTPS with an ``ssl.SSLContext``) and records
them; ``make_loopback_pki`` makes a CA (written as a PEM file, for clients to trust) and a server certificate
for ``localhost`` and ``127.0.0.1`` signed by it.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "DOC_PATH",
    "REDIRECT_URI",
    "DocServer",
    "LoopbackPKI",
    "Reply",
    "Seen",
    "make_loopback_pki",
    "valid_document",
]

DOC_PATH = "/oauth/client.json"
REDIRECT_URI = "http://127.0.0.1:33418/callback"


@dataclass
class Reply:
    """What the test server answers on one path."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    content_length: bool = True


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up early (oversize bodies) is expected; keep stderr quiet."""


class DocServer:
    """An HTTP server on 127.0.0.1 (HTTPS with ``tls``) answering from ``routes`` and recording requests."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Reply] = {}
        self.seen: list[Seen] = []
        self.scheme = "https" if tls else "http"
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
                reply = server.routes.get(self.path, Reply(b"not found", 404, {"Content-Type": "text/plain"}))
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.content_length:
                    self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port: int = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def url(self, path: str = DOC_PATH, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def serve(self, client_id: str, document: dict[str, Any] | None = None, **reply: Any) -> str:
        """Serve a valid document for ``client_id`` (merged with ``document``) on its path; return ``client_id``."""
        path = client_id.split(str(self.port), 1)[1]
        doc = valid_document(client_id) | (document or {})
        self.routes[path] = Reply(json.dumps(doc).encode(), **reply)
        return client_id

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def valid_document(client_id: str) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "client_name": "Test client",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


@dataclass
class LoopbackPKI:
    ca_file: Path
    server_context: ssl.SSLContext

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_loopback_pki(directory: Path) -> LoopbackPKI:
    """A throwaway CA and a server certificate for localhost and 127.0.0.1 signed by it, written to ``directory``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("hivegate test CA"))
        .issuer_name(_name("hivegate test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file = directory / "server.pem"
    cert_file.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file)
    return LoopbackPKI(ca_file, server_context)
