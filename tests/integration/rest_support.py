"""The REST gateway under test: its URL, an admin client, tokens and HTTP clients (the fixture: conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from jetcron.sdk.client import Client


@dataclass
class Rest:
    url: str
    admin: Client
    """An admin NATS client (issues tokens, checks what is stored)."""

    async def token(self, tenant: str | None) -> str:
        made = await self.admin.call("tokens.create", {"tenant": tenant} if tenant else {"admin": True})
        return str(made["token"])

    def http(self, token: str | None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)
