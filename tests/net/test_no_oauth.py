"""A wrong or stale token never starts an OAuth flow, even in a client with OAuth switched on.

Hermes translates every streamable-http server with OAuth support that reacts to any 401.
Driven here with the official SDK's own OAuthClientProvider, which is what that support uses.
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.exceptions import OAuthRegistrationError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from .conftest import Endpoint


class _MemoryStorage:
    def __init__(self) -> None:
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        raise AssertionError("no token may ever be issued")

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def test_a_stale_token_dead_ends_oauth_discovery_with_the_fix_and_opens_no_browser(endpoint: Endpoint) -> None:
    opened: list[str] = []

    async def redirect(url: str) -> None:
        opened.append(url)

    async def callback() -> tuple[str, str | None]:
        raise AssertionError("no authorization callback may be awaited")

    url = f"http://127.0.0.1:{endpoint.port}/mcp"
    provider = OAuthClientProvider(
        url,
        OAuthClientMetadata(redirect_uris=["http://127.0.0.1:9/callback"], client_name="hermes-test"),
        _MemoryStorage(),
        redirect_handler=redirect,
        callback_handler=callback,  # type: ignore[arg-type]
    )

    async def call() -> None:
        headers = {"Authorization": "Bearer stale-token", "Host": endpoint.host}
        async with httpx2.AsyncClient(auth=provider, headers=headers, timeout=10) as http:
            await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})

    with pytest.raises(OAuthRegistrationError) as caught:
        asyncio.run(call())
    assert "has no OAuth" in str(caught.value) and "restart the bridge in Blender" in str(caught.value)
    assert opened == []
    assert endpoint.tools.calls == []
