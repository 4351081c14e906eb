"""The official MCP SDK client's OAuth storage, in memory, for tests that drive ``OAuthClientProvider``."""

from __future__ import annotations

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["MemoryTokenStorage"]


class MemoryTokenStorage:
    """The SDK's ``TokenStorage`` protocol over two attributes: ``tokens`` and the registered ``client``."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
