"""The one renderer for hivegate errors on the OAuth plane (``/oauth/*`` JSON endpoints).

Spec: RFC 6749 §5.2 (error response: ``error``, ``error_description``); the ``error`` value is the
error class's ``oauth_code`` (``temporarily_unavailable`` for 503s, ``server_error`` otherwise), and
``code`` carries hivegate's stable error code, as ``data.code`` does on the MCP plane. The browser
pages render the same errors as HTML (:meth:`hivegate.auth.oauth.pages.Pages.error`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from hivegate.errors import GatewayError

__all__ = ["oauth_error_response"]


def oauth_error_response(exc: GatewayError) -> JSONResponse:
    """``{"error": exc.oauth_code, "error_description": exc.message, "code": exc.code}`` with ``exc``'s status.

    Carries ``exc.headers`` (``Retry-After`` on a 503) and ``Cache-Control: no-store`` (RFC 6749 §5.1).
    """
    body = {"error": exc.oauth_code, "error_description": exc.message, "code": exc.code}
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache", **exc.headers}
    return JSONResponse(body, status_code=exc.http_status, headers=headers)
