"""Headless Chromium works for the test suite: fill and submit a form served on loopback.

A stdlib HTTP server on 127.0.0.1 (port 0, in a thread) serves a form; Chromium fills the input,
clicks submit, and we check both sides: the server received the value and the page shows its reply.
"""

from __future__ import annotations

import html
import queue
import threading
from collections.abc import Generator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from playwright.sync_api import expect

from tests.browser import TIMEOUT_MS, chromium_page

pytestmark = pytest.mark.browser

WAIT_SECONDS = TIMEOUT_MS / 1000

FORM_PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>form</title></head>
<body>
  <form method="post" action="/submit">
    <label for="name">Name</label> <input id="name" name="name">
    <button id="send" type="submit">Send</button>
  </form>
</body></html>
"""


class _FormServer:
    """A loopback HTTP server with one form; every posted ``name`` lands in ``received``."""

    def __init__(self) -> None:
        self.received: queue.Queue[str] = queue.Queue()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/":
                    self.send_error(404)
                    return
                self._reply(FORM_PAGE)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fields = parse_qs(self.rfile.read(length).decode("utf-8"))
                name = fields.get("name", [""])[0]
                received.put(name)
                body = f'<!doctype html><title>done</title><p id="result">Received: {html.escape(name)}</p>'
                self._reply(body.encode("utf-8"))

            def _reply(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@contextmanager
def _serve_form() -> Generator[_FormServer]:
    server = _FormServer()
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(timeout=WAIT_SECONDS)


def test_chromium_fills_and_submits_a_form() -> None:
    with _serve_form() as server, chromium_page() as page:
        page.goto(server.url + "/")
        page.fill("#name", "hello hivegate")
        page.click("#send")

        assert server.received.get(timeout=WAIT_SECONDS) == "hello hivegate"
        expect(page.locator("#result")).to_have_text("Received: hello hivegate", timeout=TIMEOUT_MS)
        assert page.title() == "done"
