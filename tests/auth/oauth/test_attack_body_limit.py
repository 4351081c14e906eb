"""A body over an OAuth endpoint's limit gets the plane's error, not a bare text 413 (issue 7 item 5's rule).

Found by the attack trial of issue 7: the SDK's body-limit middleware in front of ``/oauth/*``
answered ``413 Request body too large`` as text without a ``Content-Type``, where every other
refusal of those endpoints is an RFC 6749 §5.2 JSON error (and on the sign-in and consent pages, an
HTML page). A declared ``Content-Length`` and a streamed (chunked) body are both refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hivegate.auth.oauth.provider import FORM_BODY_LIMIT
from tests.auth.oauth.conftest import Browser, OAuthServer

JSON_ENDPOINTS = ["/oauth/register", "/oauth/token", "/oauth/revoke"]
PAGES = ["/oauth/login", "/oauth/consent"]


async def _chunks(total: int) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        chunk = b"a=" + b"b" * 16382
        sent += len(chunk)
        yield chunk


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("path", JSON_ENDPOINTS + PAGES)
async def test_an_oversized_body_gets_the_planes_error(
    oauth: OAuthServer, browser: Browser, path: str, streamed: bool
) -> None:
    """413 with OAuth JSON (``invalid_request``) on the JSON endpoints, an HTML page on the browser pages."""
    size = FORM_BODY_LIMIT * 2
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    content = _chunks(size) if streamed else b"a=" + b"b" * size
    response = await browser.http.post(path, content=content, headers=headers)
    assert response.status_code == 413, response.text[:200]
    content_type = response.headers.get("content-type", "")
    if path in PAGES:
        assert content_type.startswith("text/html"), (content_type, response.text[:200])
    else:
        assert content_type.startswith("application/json"), (content_type, response.text[:200])
        assert response.json()["error"] == "invalid_request"
        assert response.headers["cache-control"] == "no-store"
