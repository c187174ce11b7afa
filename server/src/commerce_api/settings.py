"""Settings: the ``COMMERCE_*`` environment variables of the operator contract.

A ``.env`` file in the working directory is read too; real environment variables win, and a
value given to ``Settings(...)`` wins over both. Names are matched in any case
(``commerce_currency`` sets ``currency``); each value reaches its field as the text it is, for
pydantic to validate and convert (the lists' own validators split them at commas).

A plain pydantic model reads them, not pydantic-settings: importing that took longer than the
rest of a CLI command's start (its sources for cloud secret stores, CLI parsing and more), and
these few lines are all of it the contract uses.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

Environment = Literal["sandbox", "production"]
Tier = Literal["development", "production"]
LogFormat = Literal["auto", "json", "text"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]

DEFAULT_RETRY_SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _check_matchable(origin: str, scheme: str, netloc: str, port: int | None) -> None:
    """Refuse an origin no browser ever sends in ``Origin`` (so it could never match)."""
    if "*" in netloc:
        raise ValueError(
            f"{origin!r} has a wildcard, which CORS origins cannot: list each origin, "
            "e.g. https://shop.example,https://www.shop.example"
        )
    if port == _DEFAULT_PORTS[scheme]:
        raise ValueError(
            f"{origin!r} names {scheme}'s default port, which browsers leave out of Origin: "
            f"write it without :{port}"
        )
    if not netloc.isascii():
        raise ValueError(
            f"{origin!r} has a host outside ASCII, which browsers send in its punycode (xn--) "
            "form: write that"
        )


ENV_PREFIX = "COMMERCE_"
ENV_FILE = ".env"


class Settings(BaseModel):
    """Every ``COMMERCE_*`` setting. ``_env_file``: the dotenv file read (None: none)."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)

    def __init__(self, _env_file: str | os.PathLike[str] | None = ENV_FILE, **values: Any) -> None:
        super().__init__(**{**environment_values(_env_file), **values})

    database_url: str = "sqlite:///./commerce.db"
    # Deadlines on every wait for the database (storage/deadlines.py, docs/design.md): a
    # request during an outage or a partition is answered 503 within seconds. PostgreSQL: a new
    # connection, a statement (server side), a lock; a transaction left idle by its client is
    # ended by the server (shorter than the lock timeout, so that a host cut off holding a row
    # lock never stalls another waiting on it), and so is a connection whose client fell
    # silent; the whole of a transaction, client side. SQLite: a write waits for the file's lock
    # at most the lock timeout, and its transaction's deadline in all.
    database_connect_timeout_seconds: float = Field(default=2.0, gt=0)
    database_statement_timeout_seconds: float = Field(default=5.0, gt=0)
    database_lock_timeout_seconds: float = Field(default=3.0, gt=0)
    database_idle_in_transaction_timeout_seconds: float = Field(default=2.0, gt=0)
    database_dead_connection_seconds: float = Field(default=3.0, ge=1)
    database_transaction_timeout_seconds: float = Field(default=4.0, gt=0)
    # With a PostgreSQL URL through PgBouncer (`?pooler=pgbouncer`): a direct URL to PostgreSQL
    # for the one connection per process that LISTENs for change notifications (a session,
    # which transaction pooling does not give). Unset there: no listening, and the read path
    # reads the change stamps for every request instead of caching (docs/deployment.md).
    database_listen_url: str | None = None
    environment: Environment = "sandbox"
    redis_url: str | None = None
    redis_key_prefix: str = "commerce:"
    rate_limit_enabled: bool = True
    rate_limit_development: int = Field(default=1000, ge=1)
    rate_limit_production: int = Field(default=10000, ge=1)
    rate_limit_window_seconds: int = Field(default=3600, ge=1)
    # Publishable keys (`pk_…`, public in a storefront's pages) are counted apart from their
    # account's quota, per window: per key, and per key and client address.
    rate_limit_publishable_per_key: int = Field(default=100_000, ge=1)
    rate_limit_publishable_per_client: int = Field(default=1000, ge=1)
    webhook_retry_schedule: tuple[int, ...] = DEFAULT_RETRY_SCHEDULE
    # Receivers on loopback, private or link-local addresses: only by explicit opt-in, in every
    # environment (a sandbox offered to outside integrators must not reach the operator's
    # network). `serve --demo` opts in.
    webhook_allow_private_urls: bool = False
    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    webhook_poll_seconds: float = Field(default=0.5, gt=0)
    # An endpoint whose attempts have all failed for this long (no success in between) is
    # disabled: 3 days, as Stripe. A burst of failures never disables one.
    webhook_disable_after_seconds: int = Field(default=259_200, ge=1)
    # Live endpoints per account (Stripe's default too): each order fans out to every one.
    webhook_max_endpoints: int = Field(default=16, ge=1)
    # Attempts in progress to one endpoint at a time, counted across every dispatcher on the
    # database: a backlog reaches a small receiver this many at a time, not all at once. The
    # rest wait for a free slot (no backoff, no failure); other endpoints are not held up.
    webhook_max_in_flight_per_endpoint: int = Field(default=10, ge=1)
    # PostgreSQL: order batches a process keeps in their transactions at once. One waits on
    # the wire four times; with the database a millisecond or more away, a second overlaps
    # those waits (docs/deployment.md has the figures). SQLite's batches take turns anyway.
    order_batches_in_flight: int = Field(default=1, ge=1, le=8)
    # Encrypts webhook signing secrets at rest. Required in production; a sandbox without it
    # keeps a generated key in its own database.
    secret_key: str | None = Field(default=None, min_length=32)
    # The key before a rotation: still accepted for decryption (see crypto.py).
    secret_key_previous: str | None = Field(default=None, min_length=32)
    # Whether `serve` runs the webhook dispatcher in-process (`serve --no-dispatcher` sets it).
    run_dispatcher: bool = True
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    # A pending order older than this is canceled, its stock returned (0: never). Checked by
    # every process's housekeeping, every 10 minutes.
    pending_order_ttl_seconds: int = Field(default=86400, ge=0)
    # How long the audit trail (/v1/audit_events) keeps a row; older ones are pruned by every
    # process's housekeeping, every 10 minutes.
    audit_retention_days: int = Field(default=365, ge=1)
    # Units one order may reserve: per line (at most the schema's 10,000) and in all.
    order_max_units_per_line: int = Field(default=10_000, ge=1, le=10_000)
    order_max_units: int = Field(default=10_000, ge=1)
    # `serve`'s HTTP server (granian, configured in cli.py). A connection waiting for a request
    # head, whether new, idle after a response (keep-alive) or trickling one, is closed when it
    # has not arrived within the smaller of `header_timeout` and `keep_alive` (granian has one
    # timer for both; at most 60 s); `keep_alive` 0 turns keep-alive off. A body must arrive
    # within `body_timeout` of its head (app/server_guard.py). Each worker holds at most
    # `max_connections` connections; more wait in the kernel's queue until one closes.
    http_header_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    http_body_timeout_seconds: float = Field(default=30.0, gt=0)
    http_keep_alive_seconds: int = Field(default=5, ge=0)
    http_max_connections: int = Field(default=10_000, ge=1)
    # Requests one client address may have in flight in a worker; past it that client alone is
    # answered 503 (app/server_guard.py). With trusted proxies, the address they forward.
    http_max_requests_per_client: int = Field(default=64, ge=1)
    # Each `serve` worker's threads run under Linux's SCHED_BATCH policy (app/serving.py): the
    # server's I/O thread and the app's thread no longer preempt each other at every hand-over.
    # `false`: the default policy. Ignored where the platform has no such policy.
    http_batch_scheduling: bool = True
    # A request head (request line and headers) larger than this is answered 431.
    http_max_header_bytes: int = Field(default=64 * 1024, ge=1024, le=1024 * 1024)
    # A request with more header lines than this is answered 431 (in the error envelope). The
    # HTTP parser under granian refuses more than 100 itself, with a plain 431: hence the bound.
    http_max_headers: int = Field(default=64, ge=1, le=100)
    # Addresses or networks (comma-separated, e.g. `127.0.0.1,::1` or `10.0.0.0/8`; `*` for any,
    # where only the proxy can reach the server) whose X-Forwarded-For and X-Forwarded-Proto are
    # believed. Empty: no one's; the client address is the connection's.
    trusted_proxies: tuple[str, ...] = ()
    # Origins (comma-separated `scheme://host[:port]`, e.g. `https://shop.example`) whose pages
    # may call `/v1` from a browser (CORS on every `/v1` route: http/cors.py). Empty: none, no
    # answer carries a CORS header, and every preflight is refused.
    cors_origins: tuple[str, ...] = ()
    # Production only: every answer of the app carries `Strict-Transport-Security` with this
    # max-age (a year; 0 tells browsers to forget an earlier one).
    hsts_max_age_seconds: int = Field(default=31_536_000, ge=0)
    # `off` removes /metrics (it answers 404 like any unknown route).
    metrics: Literal["on", "off"] = "on"
    # An operator console session (/dashboard) ends after this long without a request.
    console_idle_seconds: int = Field(default=1800, ge=1)
    # A product with at most this many units in stock is low on stock (the console's overview
    # and its products page's low-stock filter).
    low_stock_threshold: int = Field(default=5, ge=0)
    # `auto`: JSON lines when stderr is not a terminal, readable text when it is.
    log_format: LogFormat = "auto"
    log_level: LogLevel = "info"

    @field_validator("metrics", "log_format", "log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("trusted_proxies", "cors_origins", mode="before")
    @classmethod
    def _parse_list(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if value == ("*",):  # granian's catch-all: only where nothing but the proxy reaches us
            return value
        for proxy in value:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"{proxy!r} is not an IP address or network (e.g. 127.0.0.1 or 10.0.0.0/8)"
                ) from None
        return value

    @field_validator("cors_origins")
    @classmethod
    def _check_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Each origin as a browser sends it in ``Origin``: the scheme and host in lower case,
        no path (one trailing slash is forgiven)."""
        origins = []
        for origin in value:
            parts = urlsplit(origin.lower())
            if (
                parts.scheme not in ("http", "https")
                or not parts.hostname
                or "@" in parts.netloc
                or parts.path not in ("", "/")
                or parts.query
                or parts.fragment
            ):
                raise ValueError(
                    f"{origin!r} is not an origin: write scheme://host[:port] without a path, "
                    "e.g. https://shop.example or http://localhost:3000"
                )
            try:
                port = parts.port  # a malformed one raises
            except ValueError:
                raise ValueError(f"{origin!r} has a malformed port") from None
            _check_matchable(origin, parts.scheme, parts.netloc, port)
            origins.append(f"{parts.scheme}://{parts.netloc}")
        return tuple(origins)

    @field_validator("webhook_retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            parts = [part.strip() for part in value.split(",") if part.strip()]
            if not parts:
                raise ValueError("must list at least one delay in seconds, e.g. 5,300,1800")
            return tuple(int(part) for part in parts)
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _check_schedule(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(delay < 0 for delay in value):
            raise ValueError("delays must be non-negative seconds")
        return value

    @property
    def allow_private_webhook_urls(self) -> bool:
        return self.webhook_allow_private_urls

    def rate_limit_for(self, tier: Tier) -> int:
        if tier == "production":
            return self.rate_limit_production
        return self.rate_limit_development


def environment_values(env_file: str | os.PathLike[str] | None) -> dict[str, str]:
    """The settings' values the environment gives, by field name: each ``COMMERCE_<FIELD>``
    (in any case) of ``env_file`` if it exists, then of the process's environment, which wins.
    Other names are ignored."""
    sources: list[Mapping[str, str | None]] = []
    if env_file is not None and Path(env_file).expanduser().is_file():
        from dotenv import dotenv_values

        sources.append(dotenv_values(Path(env_file).expanduser(), encoding="utf-8"))
    sources.append(os.environ)
    prefix = ENV_PREFIX.lower()
    values: dict[str, str] = {}
    for source in sources:
        for name, value in source.items():
            field = name.lower().removeprefix(prefix)
            if value is not None and field != name.lower() and field in Settings.model_fields:
                values[field] = value
    return values
