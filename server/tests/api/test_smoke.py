from __future__ import annotations

import httpx

from tests.helpers import bearer


async def test_empty_catalogue_lists_nothing(client: httpx.AsyncClient, client_key: str) -> None:
    response = await client.get("/v1/products", headers=bearer(client_key))
    assert response.status_code == 200
    assert response.json() == {
        "data": [],
        "pagination": {"total": 0, "limit": 20, "offset": 0, "has_more": False},
    }
