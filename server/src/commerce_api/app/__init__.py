"""The assembled application: ``create_app`` wires every package into one ASGI app.

- ``factory``: ``create_app`` (the routers, the middleware, the lifespan that opens the database,
  the read path, the rate limiter, the order desk and the webhook dispatcher).
- ``fastlane``: the requests worth answering before Starlette's routing (the catalogue reads and
  ``POST /v1/orders``), derived from the routes' own declarations.
- ``serving``: how ``serve`` runs it (granian's options, the app each worker serves inside the
  server guard, the workers' shared metrics directory); ``server_guard``: that guard, what
  granian leaves to the app (the head's size and lines, ``Host``, per-client requests in
  flight, the body's deadline).

The package itself imports none of them: ``serve`` reads ``serving`` before it may import the
app (see there). May import every other package; only the entry points (``cli``, ``demo``)
import it.
"""
