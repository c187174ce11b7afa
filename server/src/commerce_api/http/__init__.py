"""The HTTP layer every route module builds on: one request pipeline and its parts.

- ``pipeline``: ``Pipeline`` finishes every answer (authentication, the rate limit and its
  headers, the request id, metrics and the log), for the fast lane and the routes alike;
  ``RequestObserver`` hands answered requests to the metrics and the request log, in
  batches; ``pipeline_middleware``: ``PipelineMiddleware`` runs it around the routes.
- ``middleware``: the guard behind the pipeline that turns anything unexpected into the 500
  envelope (the guard ``serve`` puts around the whole app is ``app.server_guard``).
- ``request_body``: a body read ahead of the routes (the fast lane's orders), handed back
  whole to the routes when they take the request after all.
- ``request_head``: the head read once by name (the body's framing, the key) for the fast
  lane, and the request's caller (``authenticate``), checked once and memoised in its context.
- ``errors``: the error contract (``core.errors``) as responses, and FastAPI's and Starlette's
  own exceptions translated into it.
- ``context``: ``RequestContext``, the one typed object a request carries through the layers,
  and the request's id (``new_request_id``).
- ``dependencies``: the services container and the caller (FastAPI dependencies): which keys
  a route admits is the caller it declares (``CatalogPrincipal`` admits publishable keys).
- ``cors``: CORS on every ``/v1`` route, for ``COMMERCE_CORS_ORIGINS``, answered before the
  fast lane.
- ``routing``: the route class and the marks the fast lane derives its work from
  (``served_first``, ``places_orders``), JSON responses, the documented error responses.
- ``paging``: the query parameters every list endpoint pages with (``limit``, ``offset``,
  ``starting_after``, ``created_gte``, ``created_lt``).
- ``idempotency``: ``Idempotency-Key``'s HTTP side (the header, a POST run under its key, a
  response stored as the key's outcome and replayed; the rest is ``commerce_api.idempotency``);
  ``schemas``: request and response pieces every resource shares.
- ``openapi``: the published OpenAPI document and ``/docs``.

May import: ``core``, ``settings``, ``storage``, ``observability``, ``ratelimit``,
``accounts`` (every request authenticates) and ``idempotency``. It knows no domain: the
services it hands the routes are the protocols of ``services`` (a key's caller, the database,
the rate limiter, the secret box), and a route module that uses a domain's service (the
catalogue's cached reads, the order desk) types them with a protocol of its own.
"""
