"""The ceiling app: the smallest ASGI app that answers with the same bytes as the service.

``make bench`` serves it with the same server (uvicorn, one worker) and reports every figure of
the real service as a ratio to it. The body comes from the file named by BENCH_CEILING_BODY.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BODY = Path(os.environ["BENCH_CEILING_BODY"]).read_bytes()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
