"""``make bench-catalogue``: a large catalogue that changes while it is read (issue 42).

For each backend it generates a CSV catalogue (``--products``, default 1,000,000: names,
descriptions, 8 categories, prices; one product in twenty has the word "usb" in its name or
description, a handful the rare word "zyxwv") and, for our checkout and the ``--baseline``
one in turn, each on a database of its own:

- loads it with the checkout's own ``commerce-api products import`` (wall time; peak RSS of
  the process, from ``wait4``);
- starts ``commerce-api serve`` (one worker, rate limiter off, ``--no-dispatcher``, pinned to
  CPU 0) and times, from the spawn, the first 200 of ``GET /v1/products`` and the moment every
  probe page (the deepest page, a category's deepest page, ``sort=price`` at half the
  catalogue) answers in < 50 ms in one pass;
- drives a mix of pages (first, deepest, category-deep, ``sort=price``/``-price``/``name`` at
  half the catalogue, and by id) with wrk, 16 connections, pinned to CPU 1; then searches
  (``q=usb``, the same with ``sort=price``, ``q=zyxwv``); the worker's RSS after them;
- drives the same mix while 10 price ``PATCH``es a second go through the API (admin key): each
  PATCH's status and latency, and, polling the list page that holds the product (default
  order), the delay from the PATCH's answer to the new price on that page;
- holds of the event loop: a probe (``GET /healthz``, which touches nothing) every 5 ms on an
  otherwise idle server, first quiet, then while 10 price PATCHes a second go through. A
  probe's latency over the quiet probe's is time the worker's event loop was not free (held
  by a callback, or waiting for the GIL held by another of its threads).

The sides run one after the other (not interleaved: a baseline that rebuilds its catalogue
after each write would load the CPU ours runs on). Only public interfaces are used (the CLI
and the HTTP API), so any checkout of this repository can be the baseline.

Results: bench/results/<output>.{md,json} (``--output``, default ``catalogue``), rewritten
after each side, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import platform
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from run import (
    BIN,
    CATEGORIES,
    REDIS_URL,
    RESULTS,
    Run,
    baseline_commit,
    bench_database,
    free_port,
    pinned,
    postgres_and_redis_available,
    run_process,
    with_children,
    wrk,
)

PAGE = 20
FAST_MS = 50.0
EDITS_PER_SECOND = 10
CONNECTIONS = 16
WRK_TIMEOUT_S = 30
# Bounds on every wait: a start that never gets fast, an edit never seen.
START_DEADLINE_S = 300.0
SEARCH_DEADLINE_S = 180.0  # from the spawn; a checkout that searches the database never is
VISIBLE_DEADLINE_S = 30.0
RARE = "zyxwv"
NOUNS = [
    "cable", "adapter", "charger", "lamp", "kettle", "jacket", "novel", "drill", "sofa", "puzzle",
    "tent", "ball", "mug", "towel", "speaker", "mouse", "keyboard", "battery", "hose", "shelf",
    "blanket", "boots", "rope", "glass", "pan", "clock", "mirror", "basket", "candle", "brush",
]  # fmt: skip
ADJECTIVES = [
    "red", "blue", "compact", "deluxe", "classic", "smart", "heavy", "light", "mini", "pro",
    "eco", "vintage", "green", "steel", "wooden", "quiet",
]  # fmt: skip
# One product in twenty says "usb" (half in the name, half in the description); a handful
# (spread over the catalogue) say RARE.
USB_EVERY = 20
RARE_COUNT = 5


def generate_csv(path: Path, products: int, seed: int = 42) -> dict[str, int]:
    """Write the catalogue; how many products carry "usb" and RARE."""
    rng = random.Random(seed)
    rare = {products * (2 * k + 1) // (2 * RARE_COUNT) for k in range(RARE_COUNT)}
    counts = {"usb": 0, RARE: 0}
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["name", "description", "price", "category", "inventory_count"])
        for i in range(products):
            adjective, noun = rng.choice(ADJECTIVES), rng.choice(NOUNS)
            name = f"{adjective.title()} {noun} {i}"
            description = f"A {adjective} {noun} for every day, model {rng.randrange(10**6)}."
            if i % USB_EVERY == 7:
                counts["usb"] += 1
                if i % (2 * USB_EVERY) == 7:
                    name = f"USB {name}"
                else:
                    description += " Charges over usb."
            if i in rare:
                counts[RARE] += 1
                description += f" Made by {RARE}."
            price = f"{rng.randrange(100, 100_000) / 100:.2f}"
            writer.writerow([name, description, price, CATEGORIES[i % len(CATEGORIES)], 1000])
    return counts


@dataclass
class Side:
    """One checkout's figures on one backend."""

    label: str
    backend: str
    products: int
    figures: dict[str, Any] = field(default_factory=dict)


# Loaded by a debug ``serve`` (PYTHONPATH): granian builds each worker's loop (uvloop or
# asyncio) and hands it to ``asyncio.set_event_loop``; there it gets asyncio's debug mode with a
# slow-callback threshold of SLOW_CALLBACK_S instead of 100 ms. Each callback (a task's step)
# that holds the loop longer is logged: "Executing <…> took 0.034 seconds".
SLOW_CALLBACK_S = 0.020
DEBUG_MARK = "bench-catalogue: event loop in debug mode"
SITECUSTOMIZE = f"""
import asyncio
import sys

_set_event_loop = asyncio.set_event_loop


def _debug_loop(loop):
    if loop is not None:
        loop.set_debug(True)
        loop.slow_callback_duration = {SLOW_CALLBACK_S}
        print("{DEBUG_MARK}", file=sys.stderr, flush=True)
    _set_event_loop(loop)


asyncio.set_event_loop = _debug_loop
"""
_SLOW = re.compile(r"Executing (.*?) took ([\d.]+) seconds")


def cli_env(database_url: str, backend: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMMERCE_")}
    env.pop("PYTHONPATH", None)  # a checkout's CLI runs its own code
    env["COMMERCE_DATABASE_URL"] = database_url
    env["COMMERCE_RATE_LIMIT_ENABLED"] = "false"
    if backend == "postgresql":
        env["COMMERCE_REDIS_URL"] = REDIS_URL
        env["COMMERCE_REDIS_KEY_PREFIX"] = f"commerce-bench-cat-{secrets.token_hex(4)}:"
    return env


def cli(command: str, *arguments: str, env: dict[str, str]) -> str:
    out = subprocess.run(  # noqa: S603
        [command, *arguments], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise RuntimeError(f"{command} {' '.join(arguments)}: {out.stderr[-2000:]}")
    return out.stdout.strip()


def timed_import(command: str, csv_path: Path, env: dict[str, str]) -> dict[str, Any]:
    """``commerce-api products import``: wall seconds, peak RSS (the process's maximum resident
    set, from ``wait4``), its last output lines."""
    with tempfile.TemporaryFile() as log:
        started = time.monotonic()
        proc = subprocess.Popen(  # noqa: S603
            [command, "products", "import", str(csv_path)], env=env, stdout=log, stderr=log
        )
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read().decode(errors="replace")
    if proc.returncode:
        raise RuntimeError(f"import failed ({proc.returncode}):\n{output[-2000:]}")
    # Progress on a terminal is not visible here (output goes to a file): its summary lines are.
    summary = [line for line in re.split(r"[\r\n]+", output) if line.strip()][-3:]
    return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024, "summary": summary}


def worker_rss_mb(pid: int) -> float:
    """The RSS of granian's worker (the largest of the server's children; the server itself
    if it has none)."""
    sizes = []
    for each in with_children(pid)[1:] or [pid]:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{each}/status").read_text()
            match = re.search(r"VmRSS:\s+(\d+) kB", status)
            sizes.append(int(match.group(1)) / 1024 if match else 0.0)
    return max(sizes, default=0.0)


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def probes(products: int) -> dict[str, str]:
    """The pages that are slow while a catalogue is not in memory: deepest, a category's
    deepest, sorted at half the catalogue."""
    per_category = products // len(CATEGORIES)
    return {
        "deepest": f"/v1/products?limit={PAGE}&offset={max(products - PAGE, 0)}",
        "category deepest": (
            f"/v1/products?category={CATEGORIES[0]}&limit={PAGE}"
            f"&offset={max(per_category - PAGE, 0)}"
        ),
        "sort=price middle": f"/v1/products?sort=price&limit={PAGE}&offset={products // 2}",
    }


def wait_for_start(
    base: str, auth: dict[str, str], started: float, products: int
) -> dict[str, Any]:
    """Seconds from ``started`` (the spawn) to the first 200 of the first page, and to the
    first pass over :func:`probes` in which each answered in < 50 ms."""
    figures: dict[str, Any] = {}
    deadline = started + START_DEADLINE_S
    with httpx.Client(base_url=base, headers=auth, timeout=60) as client:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"/v1/products?limit={PAGE}").status_code == 200:
                    figures["first_200_s"] = time.monotonic() - started
                    break
            time.sleep(0.02)
        while time.monotonic() < deadline:
            slowest = 0.0
            for path in probes(products).values():
                began = time.perf_counter()
                try:
                    ok = client.get(path).status_code == 200
                except httpx.HTTPError:  # a timeout (60 s): not fast yet
                    ok = False
                elapsed = (time.perf_counter() - began) * 1000
                slowest = max(slowest, elapsed if ok else float("inf"))
            if slowest < FAST_MS:
                figures["every_page_fast_s"] = time.monotonic() - started
                break
            time.sleep(0.05)
    return figures


def wait_for_search(base: str, auth: dict[str, str], started: float) -> float | None:
    """Seconds from ``started`` (the spawn) to the first search for "usb" (5 % of the
    catalogue) answered in < 50 ms three times in a row, or None within
    ``SEARCH_DEADLINE_S``. A rare word will not do: the database's full-text index finds it
    in milliseconds too; a common one it cannot."""
    deadline = started + SEARCH_DEADLINE_S
    fast = 0
    with httpx.Client(base_url=base, headers=auth, timeout=60) as client:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                client.get(f"/v1/products?q=usb&limit={PAGE}")
            fast = fast + 1 if (time.perf_counter() - began) * 1000 < FAST_MS else 0
            if fast == 3:
                return time.monotonic() - started
            time.sleep(0.1)
    return None


def mix_script(path: Path, pages: list[str], ids: list[str]) -> str:
    """A wrk script whose requests are, in equal shares, each of ``pages`` and a product by id
    (one of ``ids``, drawn at random)."""
    listed = ", ".join(json.dumps(p) for p in pages)
    products = ", ".join(json.dumps(f"/v1/products/{i}") for i in ids)
    path.write_text(
        f"pages = {{{listed}}}\nproducts = {{{products}}}\n"
        "init = function(args)\n"
        "  math.randomseed(os.time() + math.floor(os.clock() * 1000000))\n"
        "end\n"
        "request = function()\n"
        "  local k = math.random(#pages + 1)\n"
        "  if k > #pages then return wrk.format(nil, products[math.random(#products)]) end\n"
        "  return wrk.format(nil, pages[k])\n"
        "end\n"
    )
    return str(path)


def wrk_figures(run: Run) -> dict[str, Any]:
    return {
        "requests_per_second": run.requests_per_second,
        "p50_ms": run.p50_ms,
        "p99_ms": run.p99_ms,
        "max_ms": run.max_ms,
        "requests": run.requests,
        "non_2xx": run.non_2xx,
        "socket_errors": run.socket_errors,
    }


@dataclass
class Edit:
    product_id: str
    page: str
    price: float
    sent: float = 0.0
    answered: float = 0.0
    status: int = 0
    visible_ms: float | None = None
    # A refused PATCH's answer (its start), or the client's error.
    detail: str = ""


async def edit_and_watch(
    base: str,
    read: dict[str, str],
    admin: dict[str, str],
    targets: list[tuple[str, str, float]],
    seconds: float,
    bump: int,
) -> list[Edit]:
    """``EDITS_PER_SECOND`` price PATCHes a second for ``seconds``, each of a product from
    ``targets`` (id, its list page, its price), raised by ``bump`` cents and 2 more each time
    round the targets (phases with an odd and an even ``bump`` never set the same price);
    after each answer, its list page polled every 25 ms (at most 8 polls in flight in all)
    until the new price is on it, or ``VISIBLE_DEADLINE_S`` passed."""
    edits: list[Edit] = []
    in_flight = asyncio.Semaphore(8)
    watchers: list[asyncio.Task[None]] = []
    limits = httpx.Limits(max_connections=32)
    async with httpx.AsyncClient(base_url=base, timeout=WRK_TIMEOUT_S, limits=limits) as client:

        async def watch(edit: Edit) -> None:
            while time.monotonic() - edit.answered < VISIBLE_DEADLINE_S:
                async with in_flight:
                    with contextlib.suppress(httpx.HTTPError):
                        # A refused poll (a baseline's 503) is not the page yet: poll again.
                        page = (await client.get(edit.page, headers=read)).json().get("data", [])
                        seen = next((p for p in page if p["id"] == edit.product_id), None)
                        if seen is not None and float(seen["price"]) == edit.price:
                            edit.visible_ms = (time.monotonic() - edit.answered) * 1000
                            return
                await asyncio.sleep(0.025)

        async def patch(edit: Edit) -> None:
            edit.sent = time.monotonic()
            try:
                response = await client.patch(
                    f"/v1/products/{edit.product_id}", json={"price": edit.price}, headers=admin
                )
                edit.status = response.status_code
                if not 200 <= edit.status < 300:
                    edit.detail = response.text[:200]
            except httpx.HTTPError as exc:
                edit.status, edit.detail = 0, repr(exc)[:200]
            edit.answered = time.monotonic()
            if 200 <= edit.status < 300:
                watchers.append(asyncio.create_task(watch(edit)))

        patches = []
        started = time.monotonic()
        count = int(seconds * EDITS_PER_SECOND)
        for index in range(count):
            product_id, page, old = targets[index % len(targets)]
            price = round(old + 0.01 * (bump + 2 * (index // len(targets))), 2)
            edit = Edit(product_id, page, price)
            edits.append(edit)
            patches.append(asyncio.create_task(patch(edit)))
            await asyncio.sleep(
                max(0.0, started + (index + 1) / EDITS_PER_SECOND - time.monotonic())
            )
        await asyncio.gather(*patches)
        await asyncio.gather(*watchers)
    return edits


def edit_figures(edits: list[Edit]) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for edit in edits:
        statuses[str(edit.status)] = statuses.get(str(edit.status), 0) + 1
    latencies = [(e.answered - e.sent) * 1000 for e in edits]
    visible = [e.visible_ms for e in edits if e.visible_ms is not None]
    since_sent = [
        e.visible_ms + (e.answered - e.sent) * 1000 for e in edits if e.visible_ms is not None
    ]
    accepted = [e for e in edits if 200 <= e.status < 300]
    return {
        "patches": len(edits),
        "patch_statuses": statuses,
        "patch_p99_ms": percentile(latencies, 0.99),
        "patch_max_ms": max(latencies, default=float("nan")),
        "visible_p99_ms": percentile(visible, 0.99),
        "visible_max_ms": max(visible, default=float("nan")),
        "visible_median_ms": statistics.median(visible) if visible else float("nan"),
        "visible_since_sent_max_ms": max(since_sent, default=float("nan")),
        "not_visible": len(accepted) - len(visible),
        "patch_refusals": sorted({e.detail for e in edits if e.detail})[:3],
    }


def probe_loop(base: str, seconds: float, stop: threading.Event | None = None) -> list[float]:
    """``GET /healthz`` every 5 ms for ``seconds`` (or until ``stop``): each latency, ms."""
    latencies: list[float] = []
    with httpx.Client(base_url=base, timeout=WRK_TIMEOUT_S) as client:
        client.get("/healthz")
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (stop is not None and stop.is_set()):
            began = time.perf_counter()
            client.get("/healthz")
            latencies.append((time.perf_counter() - began) * 1000)
            time.sleep(0.005)
    return latencies


def list_targets(
    base: str, read: dict[str, str], products: int, count: int
) -> tuple[list[tuple[str, str, float]], list[str]]:
    """``count`` products at random positions: (id, the list page holding it in the default
    order, its price); and the ids of every product on those pages."""
    rng = random.Random(7)
    targets: list[tuple[str, str, float]] = []
    ids: list[str] = []
    with httpx.Client(base_url=base, headers=read, timeout=120) as client:
        for position in sorted(rng.sample(range(products), min(count, products))):
            page = f"/v1/products?limit={PAGE}&offset={position // PAGE * PAGE}"
            data = client.get(page).raise_for_status().json()["data"]
            item = data[position % PAGE] if position % PAGE < len(data) else data[-1]
            targets.append((item["id"], page, float(item["price"])))
            ids += [p["id"] for p in data]
    return targets, ids


def measure_side(
    side: Side, command: str, csv_path: Path, database_url: str, args: argparse.Namespace
) -> None:
    figures = side.figures
    env = cli_env(database_url, side.backend)
    cli(command, "migrate", env=env)
    print(f"   {side.label}: import", flush=True)
    figures["import"] = timed_import(command, csv_path, env)
    account = cli(command, "accounts", "create", "Benchmark", "--tier", "production", env=env)
    read = {
        "Authorization": "Bearer " + cli(command, "keys", "create", "--account", account, env=env)
    }
    admin = {"Authorization": "Bearer " + cli(command, "keys", "create", "--admin", env=env)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = pinned(0, [command, "serve", "--port", str(port), "--no-dispatcher"])
    products = side.products
    print(f"   {side.label}: serve", flush=True)
    with tempfile.TemporaryFile() as log:
        started = time.monotonic()
        with contextmanager(run_process)(serve, env, port, log) as pid:
            figures["start"] = wait_for_start(base, read, started, products)
            targets, ids = list_targets(base, read, products, EDITS_PER_SECOND * args.duration)
            middle = products // 2
            pages = [
                f"/v1/products?limit={PAGE}",
                *probes(products).values(),
                f"/v1/products?sort=-price&limit={PAGE}&offset={middle}",
                f"/v1/products?sort=name&limit={PAGE}&offset={middle}",
            ]
            script = mix_script(args.work / "mix.lua", pages, ids[:: max(1, len(ids) // 50)])
            url = base + "/"

            def load(seconds: int) -> Run:
                return wrk(url, read, seconds, CONNECTIONS, script, timeout=WRK_TIMEOUT_S)

            # Warmed up: the catalogue's search built too (its build, a child of the pinned
            # worker, shares the worker's CPU until then).
            figures["start"]["search_fast_s"] = wait_for_search(base, read, started)
            load(2)  # warm-up
            print(f"   {side.label}: mix", flush=True)
            figures["mix"] = wrk_figures(load(args.duration))
            print(f"   {side.label}: search", flush=True)
            for name, query in (
                ("q=usb", "q=usb"),
                ("q=usb&sort=price", "q=usb&sort=price"),
                (f"q={RARE}", f"q={RARE}"),
            ):
                run = wrk(
                    f"{base}/v1/products?{query}&limit={PAGE}",
                    read,
                    args.duration,
                    CONNECTIONS,
                    timeout=WRK_TIMEOUT_S,
                )
                figures[name] = wrk_figures(run)
            figures["worker_rss_mb"] = worker_rss_mb(pid)
            print(f"   {side.label}: mix while editing", flush=True)
            with contextlib.suppress(Exception):
                figures["total_matches"] = {
                    word: httpx.get(
                        f"{base}/v1/products?q={word}&limit=1", headers=read, timeout=120
                    ).json()["pagination"]["total"]
                    for word in ("usb", RARE)
                }
            loaded: dict[str, Run] = {}
            thread = threading.Thread(target=lambda: loaded.update(run=load(args.duration)))
            thread.start()
            edits = asyncio.run(edit_and_watch(base, read, admin, targets, args.duration, 1))
            thread.join()
            figures["mix_editing"] = wrk_figures(loaded["run"])
            figures["edits"] = edit_figures(edits)
            figures["worker_rss_mb_after_edits"] = worker_rss_mb(pid)
            print(f"   {side.label}: event loop probe", flush=True)
            wait_for_start(base, read, time.monotonic(), products)  # catalogue settled
            quiet = probe_loop(base, 2)
            stop = threading.Event()
            probing: dict[str, list[float]] = {}
            prober = threading.Thread(
                target=lambda: probing.update(run=probe_loop(base, args.duration + 30, stop))
            )
            prober.start()
            probe_edits = asyncio.run(edit_and_watch(base, read, admin, targets, args.duration, 2))
            stop.set()
            prober.join()
            busy = probing["run"]
            floor = statistics.median(quiet)
            figures["loop"] = {
                **figures.get("loop", {}),
                "probes": len(busy),
                "quiet_median_ms": floor,
                "quiet_max_ms": max(quiet),
                "editing_max_ms": max(busy, default=float("nan")),
                "editing_p99_ms": percentile(busy, 0.99),
                "over_20ms": sum(1 for b in busy if b - floor > 20),
                "patch_statuses": edit_figures(probe_edits)["patch_statuses"],
            }
    print(f"   {side.label}: serve in asyncio debug mode, slow callbacks", flush=True)
    figures["loop"] = {
        **figures.get("loop", {}),
        # The same port, free again.
        **slow_callbacks(serve, env, port, base, read, admin, targets, args, products),
    }


def slow_callbacks(
    serve: list[str],
    env: dict[str, str],
    port: int,
    base: str,
    read: dict[str, str],
    admin: dict[str, str],
    targets: list[tuple[str, str, float]],
    args: argparse.Namespace,
    products: int,
) -> dict[str, Any]:
    """``serve`` again with its worker's loop in asyncio's debug mode (:data:`SITECUSTOMIZE`),
    once the catalogue is in memory: the slow-callback warnings its log gets while 10 price
    PATCHes a second go through (on an otherwise idle server)."""
    site = args.work / "debug-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    debug_env = {**env, "PYTHONPATH": str(site)}
    log_path = args.work / "debug-serve.log"
    with log_path.open("wb") as log, contextmanager(run_process)(serve, debug_env, port, log):
        wait_for_start(base, read, time.monotonic(), products)
        mark = os.fstat(log.fileno()).st_size  # the log from here on: the edits'
        edits = asyncio.run(edit_and_watch(base, read, admin, targets, args.duration, 3))
        time.sleep(1)
        until = os.fstat(log.fileno()).st_size
    whole = log_path.read_bytes()
    if DEBUG_MARK.encode() not in whole:  # a server that no longer calls set_event_loop
        return {"slow_callbacks": None, "slow_callbacks_note": "debug mode could not be set"}
    text = whole[mark:until].decode(errors="replace")
    held = [(float(seconds) * 1000, what) for what, seconds in _SLOW.findall(text)]
    held.sort(reverse=True)
    return {
        "debug_patches": len(edits),
        "debug_patch_statuses": edit_figures(edits)["patch_statuses"],
        "slow_callbacks": len(held),
        "slow_callback_max_ms": held[0][0] if held else 0.0,
        "slow_callback_worst": [f"{ms:.0f} ms: {what[:300]}" for ms, what in held[:5]],
    }


# (figure, how to read it from a side's figures, unit, target, higher is better)
ROWS: list[tuple[str, str, str, str, bool]] = [
    ("import time", "import.seconds", "s", "≤ 30 s", False),
    ("import peak RSS", "import.peak_rss_mb", "MB", "≤ 300 MB", False),
    ("serve: first 200", "start.first_200_s", "s", "≤ 2 s", False),
    ("serve: every page < 50 ms", "start.every_page_fast_s", "s", "≤ 10 s", False),
    ("serve: q=usb < 50 ms", "start.search_fast_s", "s", "", False),
    ("RSS of the worker after warm-up", "worker_rss_mb", "MB", "≤ 300 MB", False),
    ("mix, 16 connections: req/s", "mix.requests_per_second", "", "", True),
    ("mix: p99", "mix.p99_ms", "ms", "≤ 10 ms", False),
    ("mix: slowest response", "mix.max_ms", "ms", "", False),
    ("q=usb: req/s", "q=usb.requests_per_second", "", "", True),
    ("q=usb: p99", "q=usb.p99_ms", "ms", "≤ 50 ms", False),
    ("q=usb&sort=price: p99", "q=usb&sort=price.p99_ms", "ms", "≤ 50 ms", False),
    (f"q={RARE} (rare): p99", f"q={RARE}.p99_ms", "ms", "≤ 5 ms", False),
    ("mix while 10 PATCH/s: req/s", "mix_editing.requests_per_second", "", "", True),
    ("mix while editing / quiet mix", "editing_ratio", "x", "≥ 0.8", True),
    ("mix while editing: p99", "mix_editing.p99_ms", "ms", "≤ 20 ms", False),
    ("mix while editing: slowest response", "mix_editing.max_ms", "ms", "", False),
    ("mix while editing: errors (non-2xx + socket)", "editing_errors", "", "0", False),
    ("PATCHes sent", "edits.patches", "", "", True),
    ("PATCH statuses", "edits.patch_statuses", "", "all 2xx", False),
    ("PATCH p99", "edits.patch_p99_ms", "ms", "≤ 100 ms", False),
    ("edit visible in its list page: p99", "edits.visible_p99_ms", "ms", "< 1000 ms", False),
    ("edit visible in its list page: max", "edits.visible_max_ms", "ms", "< 1000 ms", False),
    (
        "edit visible, counted from the PATCH sent: max",
        "edits.visible_since_sent_max_ms",
        "ms",
        "",
        False,
    ),
    ("edits never visible (30 s)", "edits.not_visible", "", "0", False),
    ("loop probe while editing: max", "loop.editing_max_ms", "ms", "≤ 20 ms", False),
    ("loop probes > 20 ms over quiet median", "loop.over_20ms", "", "0", False),
    (
        "asyncio slow callbacks > 20 ms while editing (debug serve)",
        "loop.slow_callbacks",
        "",
        "0",
        False,
    ),
    ("asyncio slowest callback while editing", "loop.slow_callback_max_ms", "ms", "≤ 20 ms", False),
]


def value(figures: dict[str, Any], dotted: str) -> Any:
    if dotted == "editing_ratio":
        quiet, busy = (
            value(figures, "mix.requests_per_second"),
            value(figures, "mix_editing.requests_per_second"),
        )
        return busy / quiet if isinstance(quiet, float) and isinstance(busy, float) else None
    if dotted == "editing_errors":
        run = figures.get("mix_editing")
        return None if run is None else run["non_2xx"] + run["socket_errors"]
    node: Any = figures
    for key in dotted.split(".", 1):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def shown(measured: Any, unit: str) -> str:
    if measured is None:
        return "—"
    if isinstance(measured, dict):
        return ", ".join(f"{k}: {v}" for k, v in sorted(measured.items()))
    if isinstance(measured, int):
        return f"{measured:,}"
    if measured != measured:  # NaN
        return "—"
    if unit == "x":
        return f"{measured:.2f}x"
    digits = 2 if unit == "s" or measured < 10 else 0
    return f"{measured:,.{digits}f}" + (f" {unit}" if unit else "")


def ratio(ours: Any, before: Any, higher_is_better: bool) -> str:
    if not isinstance(ours, float | int) or not isinstance(before, float | int):
        return ""
    if ours != ours or before != before or not ours or not before:
        return ""
    better = ours / before if higher_is_better else before / ours
    return f"{better:.2f}x"


def report(sides: list[Side], args: argparse.Namespace, counts: dict[str, int]) -> str:
    lines = [
        "# make bench-catalogue",
        "",
        f"{platform.python_implementation()} {platform.python_version()}; {os.cpu_count()} CPUs; "
        f"serve: one worker pinned to CPU 0, rate limiter off, --no-dispatcher; wrk -t1 "
        f"-c{CONNECTIONS} --timeout {WRK_TIMEOUT_S}s pinned to CPU 1, {args.duration} s a run; "
        f"ours at {args.commit or '?'}"
        + (f", before: {args.baseline} at {args.baseline_commit or '?'}" if args.baseline else ""),
        f"Catalogue: {args.products:,} products; 'usb' in {counts.get('usb', 0):,}, "
        f"'{RARE}' in {counts.get(RARE, 0)}.",
    ]
    for backend in dict.fromkeys(s.backend for s in sides):
        ours = next((s for s in sides if s.backend == backend and s.label == "ours"), None)
        before = next((s for s in sides if s.backend == backend and s.label == "before"), None)
        lines += [
            "",
            f"## {backend}, {args.products:,} products",
            "",
            "| figure | ours | before | x before | target |",
            "|---|---|---|---|---|",
        ]
        for name, dotted, unit, target, higher in ROWS:
            mine = value(ours.figures, dotted) if ours else None
            theirs = value(before.figures, dotted) if before else None
            lines.append(
                f"| {name} | {shown(mine, unit)} | {shown(theirs, unit)} | "
                f"{ratio(mine, theirs, higher)} | {target} |"
            )
    lines += [
        "",
        "x before: how many times better ours is (its req/s over the baseline's; the "
        "baseline's time, memory or latency over ours). A visibility delay runs from the "
        "PATCH's answer to the first poll (every 25 ms) of the product's list page (default "
        "order) that shows the new price; the visibility rows count the PATCHes answered 2xx only. "
        "Loop probe: `GET /healthz` every 5 ms on an "
        "otherwise idle server while 10 price PATCHes a second go through; its latency over "
        "the quiet probe's median is time the event loop was not free (held by a callback, or "
        "waiting for the GIL another thread of the worker held). Slow callbacks: `serve` "
        "started again with its worker's loop (granian's uvloop) in asyncio's debug mode and "
        "a slow-callback threshold of 20 ms (a sitecustomize on PYTHONPATH: the default is "
        "100 ms and the app has no setting), the warnings it logged while 10 price PATCHes a "
        "second went through on an otherwise idle server; a callback only, not GIL waits.",
    ]
    return "\n".join(lines) + "\n"


def write(sides: list[Side], args: argparse.Namespace, counts: dict[str, int]) -> str:
    text = report(sides, args, counts)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.output}.md").write_text(text)
    payload = {
        "interpreter": sys.version,
        "args": {k: str(v) for k, v in vars(args).items()},
        "catalogue": counts,
        "sides": [vars(s) for s in sides],
    }
    (RESULTS / f"{args.output}.json").write_text(json.dumps(payload, indent=2, default=str))
    return text


@contextmanager
def workdir() -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="commerce-bench-catalogue-"))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--products", type=int, default=1_000_000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--baseline", metavar="DIR", help="another checkout with its .venv")
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--output", default="catalogue", help="bench/results/<output>.{md,json}")
    args = parser.parse_args()
    # The commits measured, taken at the start (a commit made while it runs is not measured).
    args.commit = baseline_commit(str(Path(__file__).resolve().parent.parent))
    args.baseline_commit = baseline_commit(args.baseline) if args.baseline else ""
    if shutil.which("wrk") is None:
        sys.exit("make bench-catalogue needs wrk: `sudo apt-get install wrk` (Debian/Ubuntu).")
    commands = [("ours", str(BIN / "commerce-api"))]
    if args.baseline:
        args.baseline = str(Path(args.baseline).resolve())
        before = Path(args.baseline) / ".venv" / "bin" / "commerce-api"
        if not os.access(before, os.X_OK):
            sys.exit(f"--baseline: no {before} (`make -C {args.baseline} install` makes it).")
        commands.append(("before", str(before)))
    backends = args.backends.split(",")
    if "postgresql" in backends and not postgres_and_redis_available():
        print("PostgreSQL or Redis unreachable: measuring SQLite only.")
        backends = [b for b in backends if b != "postgresql"]
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the driver (and the imports) beside wrk, not the server
    sides: list[Side] = []
    with workdir() as work:
        args.work = work
        csv_path = work / "catalogue.csv"
        print(f"== generating {args.products:,} products", flush=True)
        counts = generate_csv(csv_path, args.products)
        for backend in backends:
            for label, command in commands:
                print(f"== {backend}, {label}", flush=True)
                side = Side(label, backend, args.products)
                sides.append(side)
                try:
                    with bench_database(backend, work / f"{label}.db") as database_url:
                        measure_side(side, command, csv_path, database_url, args)
                finally:
                    write(sides, args, counts)
    print(write(sides, args, counts))


if __name__ == "__main__":
    main()
