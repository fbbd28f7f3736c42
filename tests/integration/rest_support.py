"""The REST gateway under test: its URL, an admin client, tokens and HTTP clients (the fixture: conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from harness import wait_for

from jetcron.sdk.client import Client


@dataclass
class Rest:
    url: str
    admin: Client
    """An admin NATS client (issues tokens, checks what is stored)."""

    async def token(self, tenant: str | None) -> str:
        """A new token, once the gateway knows it: it learns tokens from its watch of the tokens bucket, which under
        a loaded machine came after a login made at once ("that token is not valid")."""
        made = await self.admin.call("tokens.create", {"tenant": tenant} if tenant else {"admin": True})
        token = str(made["token"])
        async with self.http(token) as http:
            async def known() -> bool:
                return (await http.get("/api/v1/jobs", params={"limit": 1})).status_code != 401

            await wait_for(known, 10, what="the gateway to know a new token")
        return token

    def http(self, token: str | None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)
