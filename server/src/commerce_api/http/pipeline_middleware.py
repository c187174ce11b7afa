"""The request pipeline (``pipeline.Pipeline``) around the routes: each request counted
against its quota before the routes see it (a 429 instead when it is over), the pipeline's
headers on every answer, each answer observed, a failure too (as the server's 500)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from commerce_api.http.context import context
from commerce_api.http.pipeline import Pipeline


class PipelineMiddleware:
    """The pipeline around the routes (outside the error guard, so that a 500 is finished
    like any answer). Written as plain ASGI: no task or stream per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pipeline: Pipeline | None = getattr(scope["app"].state, "pipeline", None)
        if scope["type"] != "http" or pipeline is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        ctx = context(scope)
        if not pipeline.exempt(scope["path"]) and not await pipeline.admit(scope, ctx):
            await pipeline.answer(scope, ctx, send, "", started, 429, b"")
            return
        status = 500  # if the app fails before answering, the server answers 500

        async def finishing_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), *pipeline.headers(ctx)]
            await send(message)

        try:
            await self.app(scope, receive, finishing_send)
        finally:
            pipeline.observe(scope, ctx, None, status, started)
