"""An upstream MCP server for the ``mcp`` backend's selection and OAuth tests (official SDK, low-level).

``python tests/upstreams/mcp_selection_upstream.py [--oauth CLIENT_ID:SECRET]`` serves Streamable HTTP at
``/mcp`` on a free loopback port and prints ``mcp-selection-upstream listening on URL`` once it accepts
connections.

- **Tools** (paged by the upstream itself, :data:`PAGE` a page): ``t00`` … ``t11``, ``secret``,
  ``gh_native``, and two whose names are not valid MCP tool names (``bad name!``, ``x`` × 129). Every tool
  answers ``called NAME``.
- **Prompts** (paged likewise): ``p0`` … ``p5``, ``hidden``. ``prompts/get`` answers one message
  ``prompt NAME``; ``completion/complete`` of a prompt's argument answers ``NAME-a``, ``NAME-b``.
- **OAuth** (``--oauth``): ``POST /token`` is a client-credentials token endpoint (the client
  authenticated with HTTP Basic as ``CLIENT_ID:SECRET``) that issues ``tok-N``; ``/mcp`` answers 401 to
  a request without a token it issued and has not revoked; ``POST /revoke`` revokes every token issued;
  ``GET /stats`` gives ``{"token_requests": n, "unauthorized": n, "authorizations": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import secrets
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

PAGE = 4
TOOLS = [f"t{i:02d}" for i in range(12)] + ["secret", "gh_native", "bad name!", "x" * 129]
PROMPTS = [f"p{i}" for i in range(6)] + ["hidden"]
READY = "mcp-selection-upstream listening on "

Ctx = ServerRequestContext[Any]


def _page(items: list[Any], cursor: str | None) -> tuple[list[Any], str | None]:
    start = int(cursor) if cursor else 0
    end = start + PAGE
    return items[start:end], (str(end) if end < len(items) else None)


async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    tools = [types.Tool(name=name, input_schema={"type": "object"}) for name in TOOLS]
    page, cursor = _page(tools, params.cursor if params else None)
    return types.ListToolsResult(tools=page, next_cursor=cursor)


async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in TOOLS:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    return types.CallToolResult(content=[types.TextContent(text=f"called {params.name}")])


async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    prompts = [types.Prompt(name=name, arguments=[types.PromptArgument(name="topic")]) for name in PROMPTS]
    page, cursor = _page(prompts, params.cursor if params else None)
    return types.ListPromptsResult(prompts=page, next_cursor=cursor)


async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    if params.name not in PROMPTS:
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
    message = types.PromptMessage(role="user", content=types.TextContent(text=f"prompt {params.name}"))
    return types.GetPromptResult(messages=[message])


async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    ref = params.ref
    name = ref.name if isinstance(ref, types.PromptReference) else "resource"
    if name not in PROMPTS and name != "resource":
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name}")
    return types.CompleteResult(completion=types.Completion(values=[f"{name}-a", f"{name}-b"]))


server: Server[Any] = Server(
    "selection-upstream",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_completion=complete,
)


class TokenIssuer:
    """The client-credentials endpoint, and the check of ``/mcp`` requests against what it issued."""

    def __init__(self, client: str) -> None:
        self._basic = "Basic " + base64.b64encode(client.encode()).decode()
        self.issued: set[str] = set()
        self.token_requests = 0
        self.unauthorized = 0
        self.authorizations: list[str] = []

    async def token(self, request: Request) -> Response:
        self.token_requests += 1
        form = await request.form()
        if request.headers.get("authorization") != self._basic or form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = f"tok-{self.token_requests}-{secrets.token_hex(4)}"
        self.issued.add(token)
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": 3600})

    async def revoke(self, request: Request) -> Response:
        self.issued.clear()
        return JSONResponse({})

    async def stats(self, request: Request) -> Response:
        return JSONResponse(
            {
                "token_requests": self.token_requests,
                "unauthorized": self.unauthorized,
                "authorizations": self.authorizations,
            }
        )

    def guard(self, app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and str(scope["path"]).startswith("/mcp"):
                given = Headers(scope=scope).get("authorization", "")
                self.authorizations.append(given)
                if given.removeprefix("Bearer ") not in self.issued:
                    self.unauthorized += 1
                    response = JSONResponse({"error": "invalid_token"}, status_code=401)
                    await response(scope, receive, send)
                    return
            await app(scope, receive, send)

        return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--oauth", help="CLIENT_ID:SECRET: require tokens from /token")
    args = parser.parse_args()
    issuer = TokenIssuer(args.oauth) if args.oauth else None
    routes = []
    if issuer is not None:
        routes = [
            Route("/token", issuer.token, methods=["POST"]),
            Route("/revoke", issuer.revoke, methods=["POST"]),
            Route("/stats", issuer.stats, methods=["GET"]),
        ]
    app: ASGIApp = server.streamable_http_app(host="127.0.0.1", custom_starlette_routes=routes)
    if issuer is not None:
        app = issuer.guard(app)
    runner = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))

    async def serve() -> None:
        serving = asyncio.create_task(runner.serve())
        while not runner.started:  # uvicorn's own start-up flag: no other signal is given
            if serving.done():
                await serving
                return
            await asyncio.sleep(0.02)
        port = runner.servers[0].sockets[0].getsockname()[1]
        print(f"{READY}http://127.0.0.1:{port}", flush=True)
        await serving

    asyncio.run(serve())


if __name__ == "__main__":
    main()
