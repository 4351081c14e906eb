"""The pages module on its own: CSRF tokens and the security headers' stylesheet hash."""

from __future__ import annotations

import base64
import hashlib
import re

from hivegate.auth.oauth.pages import PAGE_HEADERS, TEMPLATES_DIR, CsrfTokens


def test_csrf_token_is_bound_to_purpose_request_browser_and_key() -> None:
    tokens = CsrfTokens(b"k" * 32)
    token = tokens.issue("consent", "req-1", "cookie-1")
    assert tokens.check(token, "consent", "req-1", "cookie-1")
    assert not tokens.check(token, "login", "req-1", "cookie-1")
    assert not tokens.check(token, "consent", "req-2", "cookie-1")
    assert not tokens.check(token, "consent", "req-1", "cookie-2")
    assert not tokens.check(token, "consent", "req-1", None)
    assert not tokens.check("", "consent", "req-1", "cookie-1")
    assert not CsrfTokens(b"j" * 32).check(token, "consent", "req-1", "cookie-1")
    assert re.fullmatch(r"[0-9a-f]{64}", token)


def test_csrf_token_is_not_a_mac_under_the_signing_key_itself() -> None:
    import hmac

    key = b"k" * 32
    token = CsrfTokens(key).issue("login", "r", "b")
    assert token != hmac.new(key, b"login\x00r\x00b", hashlib.sha256).hexdigest()


def test_inline_stylesheet_is_allowed_by_its_hash_and_nothing_else_inline() -> None:
    css = (TEMPLATES_DIR / "pages.css").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    csp = PAGE_HEADERS["Content-Security-Policy"]
    assert f"style-src 'sha256-{digest}'" in csp
    assert "script-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
