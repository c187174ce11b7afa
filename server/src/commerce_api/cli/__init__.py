"""``commerce-api``: serve, migrate, and manage accounts, keys and the catalogue.

Commands print their result (an id or a secret) as the last line of standard output, so
scripts can take it with ``tail -n 1``; explanations go to standard error.

Each command imports what it runs inside its own function: importing the server, the services
and the database layer together took most of every command's start, and ``--help`` or ``keys
list`` need none of the server (``tests/cli/test_cli_imports.py`` holds them to that).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from commerce_api.cli.accounts import accounts_group, keys_group
from commerce_api.cli.common import (
    ConfigurationError,
    _apply_migrations,
    _note,
    _settings,
    _with_database,
    _writing,
)

if TYPE_CHECKING:
    from commerce_api.demo import DemoSeed
    from commerce_api.settings import Settings
    from commerce_api.storage.db import Database


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="commerce-api")
def main() -> None:
    """Commerce API: a self-hostable commerce backend.

    Settings come from COMMERCE_* environment variables (see the README), for example
    COMMERCE_DATABASE_URL=postgresql://user@host/db.
    """


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "--demo",
    is_flag=True,
    help="Load a demo catalogue if empty; print the demo client key (the same at each start).",
)
@click.option(
    "--no-dispatcher", is_flag=True, help="Do not run the webhook dispatcher in this process."
)
def serve(host: str, port: int, workers: int, demo: bool, no_dispatcher: bool) -> None:
    """Apply pending migrations, then serve the API."""
    from granian import Granian

    from commerce_api.app.serving import (
        check_port_free,
        granian_options,
        metrics_directory,
        served_app,
    )
    from commerce_api.storage.crypto import SecretKeyMissing, check_secret_key

    settings = _settings()
    if demo and settings.environment == "production":
        raise ConfigurationError(
            "--demo is for the sandbox: it would issue a live key and load a demo catalogue "
            "into production (unset COMMERCE_ENVIRONMENT or drop --demo)"
        )
    try:
        check_secret_key(settings)
    except SecretKeyMissing as exc:
        raise ConfigurationError(str(exc)) from None
    if workers > 1 and not settings.redis_url:
        raise click.UsageError(
            f"--workers {workers} needs COMMERCE_REDIS_URL: without Redis each worker would "
            f"count requests on its own and clients would get {workers}x their quota."
        )

    try:
        check_port_free(host, port)
    except OSError as exc:
        raise click.ClickException(
            f"cannot serve on {host}:{port}: {exc.strerror or exc}; stop what holds it or "
            "choose another --port"
        ) from None

    # Migrations first: a failure stops before the port is held. A database at head is known
    # to be so without the async engine (``storage.direct``): the workers import it anyway,
    # this process need not.
    _apply_migrations(settings)
    base = f"http://{'localhost' if host in {'127.0.0.1', '0.0.0.0'} else host}:{port}"  # noqa: S104
    _note(f"Commerce API ({settings.environment}) on {base}/v1 — reference at {base}/docs")
    sys.stdout.flush()
    if no_dispatcher:
        os.environ["COMMERCE_RUN_DISPATCHER"] = "false"  # read by every worker's settings
    if demo and "COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS" not in os.environ:
        # A demo on a laptop sends webhooks to receivers on the same laptop.
        os.environ["COMMERCE_WEBHOOK_ALLOW_PRIVATE_URLS"] = "true"
        _note("Demo: webhooks may go to private and loopback addresses (127.0.0.1, 10.x, …).")
    with metrics_directory(workers):
        # granian stops gracefully on SIGTERM or SIGINT (no new connections, the requests in
        # flight finish, then each worker's lifespan shutdown) and exits 0.
        server = Granian(
            f"{served_app.__module__}:{served_app.__name__}",
            **granian_options(settings, host, port, workers),
        )
        if demo:
            # granian's documented start-up hook, which granian calls once it has bound its
            # socket and before it starts the workers: the key is issued and printed only by a
            # server that holds the port (check_port_free refused a port held by another).
            server.on_startup(lambda: _set_up_demo(settings, base))
        server.serve()


def _set_up_demo(settings: Settings, base: str) -> None:
    """Load the demo catalogue into an empty database and print the demo key: the one kept
    beside the database from an earlier start while it is valid, else a new one (kept there)."""
    from commerce_api import demo as demo_setup

    key_file = demo_setup.demo_key_path(settings.database_url, Path.cwd())
    kept = demo_setup.read_kept_key(key_file) if key_file is not None else None

    async def seed(db: Database) -> DemoSeed:
        async with db.write() as conn:
            return await demo_setup.seed_demo(conn, settings.environment, kept)

    seeded = _with_database(seed, settings)
    if seeded.issued and key_file is not None:
        try:
            demo_setup.keep_key(key_file, seeded.secret)
        except OSError as exc:
            _note(f"Could not keep the key in {key_file} ({exc.strerror or exc}): the next")
            _note("start will print a new one.")
            key_file = None
    for note in demo_setup.key_notes(seeded, key_file, base):
        _note(note)
    click.echo(seeded.secret)  # stdout only: stderr is the log stream, and keys are never logged
    sys.stdout.flush()


@main.command()
def worker() -> None:
    """Run the webhook dispatcher alone (no HTTP), until SIGINT or SIGTERM."""
    import logging.config

    from commerce_api.observability import traces
    from commerce_api.observability.logging import logging_config
    from commerce_api.storage.deadlines import database_deadlines
    from commerce_api.webhooks.dispatcher import Dispatcher, stop_dispatcher
    from commerce_api.webhooks.service import open_secret_box

    settings = _settings()
    logging.config.dictConfig(logging_config(settings))

    async def run(db: Database) -> None:
        traces.start()  # if the OTEL_* variables ask; the provider exports its last at exit
        dispatcher = Dispatcher(settings, db, await open_secret_box(settings, db))
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        _note("Webhook dispatcher running; stop with Ctrl-C or SIGTERM.")
        running = asyncio.create_task(dispatcher.run(), name="webhook-dispatcher")
        stopped = asyncio.create_task(stopping.wait())
        await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        await stop_dispatcher(dispatcher, running)

    _with_database(run, settings, deadlines=database_deadlines(settings))


@main.command()
def migrate() -> None:
    """Apply pending database migrations; name each one applied."""
    from commerce_api.storage.migrations import describe

    applied = _apply_migrations()
    for revision in applied:
        click.echo(f"Applied {revision}: {describe(revision)}")
    if not applied:
        click.echo("Database is up to date.")


main.add_command(accounts_group)
main.add_command(keys_group)


@main.group()
def products() -> None:
    """The product catalogue."""


@products.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def products_import(file: Path) -> None:
    """Import products from a JSON array or a CSV file (all or nothing), streamed.

    Each record has name, description, price, category, inventory_count; a record with an id
    updates that product instead of creating one. Progress on a terminal; a summary after."""
    from commerce_api.catalog import importing
    from commerce_api.catalog.import_file import ImportFile
    from commerce_api.catalog.import_report import ImportReport

    gc.freeze()  # the collector then skips the process's long-lived objects at each batch
    with ImportFile(file) as source, ImportReport(source, sys.stderr) as report:
        try:
            result = _writing(
                lambda conn: importing.import_records(conn, None, source.records(), report.rows)
            )
        except importing.InvalidImport as exc:
            raise click.ClickException(f"{file}: {exc}; nothing was imported") from exc
    _note(report.summary(result.created, result.updated))
    click.echo(f"created={result.created} updated={result.updated}")


@main.group()
def orders() -> None:
    """Orders."""


@orders.command("fulfill")
@click.argument("order_id")
@click.option("--carrier", help="The parcel's carrier, such as UPS (with --tracking-number).")
@click.option("--tracking-number", help="The carrier's tracking number.")
@click.option("--tracking-url", help="An https page where the customer follows the parcel.")
def orders_fulfill(
    order_id: str, carrier: str | None, tracking_number: str | None, tracking_url: str | None
) -> None:
    """Mark a pending order fulfilled (sends order.fulfilled, with the tracking if given);
    prints its id."""
    from commerce_api.core.errors import APIError
    from commerce_api.orders import service as orders_service

    environment = _settings().environment
    try:
        tracking = orders_service.tracking_from_fields(carrier, tracking_number, tracking_url)
        order = _writing(
            lambda conn: orders_service.fulfill_order(
                conn, None, order_id, environment, tracking=tracking
            )
        )
    except APIError as exc:
        raise click.ClickException(exc.message) from exc
    click.echo(order["id"])
