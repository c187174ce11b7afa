"""The ceiling app: the smallest ASGI app that answers with the same bytes as the service.

``make bench`` serves it with the same server as ``commerce-api serve`` (granian, one worker,
the very options ``app.serving.granian_options`` gives it, under the same scheduling:
``app.serving.in_worker``) and reports every figure of the real service as a ratio to it.
``GET /v1/products/<id>`` answers the bytes of the file named by BENCH_CEILING_DETAIL, every
other path those of BENCH_CEILING_LIST.

Run as ``python -m bench.ceiling PORT`` from the repository root.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from starlette.types import Receive, Scope, Send


def _response(variable: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    body = Path(os.environ[variable]).read_bytes()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return headers, body


LIST = _response("BENCH_CEILING_LIST")
DETAIL = _response("BENCH_CEILING_DETAIL")


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    headers, body = DETAIL if scope["path"].startswith("/v1/products/") else LIST
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def served() -> Any:
    """The app as ``serve``'s workers serve theirs (granian's factory target)."""
    from commerce_api.app.serving import in_worker
    from commerce_api.settings import Settings

    return in_worker(app, Settings())


def main(port: int) -> None:
    from granian import Granian

    from commerce_api.app.serving import granian_options
    from commerce_api.settings import Settings

    options = granian_options(Settings(log_level="warning"), "127.0.0.1", port, 1)
    Granian("bench.ceiling:served", **options).serve()


if __name__ == "__main__":
    main(int(sys.argv[1]))
