"""What the lists' bulk actions share (orders: fulfil, cancel; products: archive).

A bulk action takes two POSTs, both with the form's CSRF token: the list's form names the
selected ids and the action and is answered by a confirmation page listing them (nothing
changes); that page's form runs the action, each id through the API's service call in a write
transaction of its own, so one refusal does not stop or undo the others, and answers with
what happened to each one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.datastructures import FormData
from starlette.responses import Response

from commerce_api.console.pages.render import render
from commerce_api.core.errors import APIError
from commerce_api.core.pagination import MAX_ID_LENGTH
from commerce_api.storage.db import Database

logger = logging.getLogger("commerce_api.console")

MAX_SELECTED = 100
"""The most ids one bulk action takes (a page shows at most 100 rows)."""

ID_FIELD = "id"


@dataclass(frozen=True, slots=True)
class Selected:
    """A selected id and what the confirmation page says about it now."""

    id: str
    summary: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a bulk action did to one id: done, or refused with the service's reason."""

    id: str
    done: bool
    reason: str = ""
    message: str = ""


def selected_ids(form: FormData) -> list[str]:
    """The form's selected ids, each once, in their order."""
    ids: list[str] = []
    for value in form.getlist(ID_FIELD):
        # Longer than an id is no id (the service refuses it): kept short for the pages.
        text = value.strip()[: MAX_ID_LENGTH + 1] if isinstance(value, str) else ""
        if text and text not in ids:
            ids.append(text)
    return ids


def selection_error(ids: Sequence[str], noun: str, most: int = MAX_SELECTED) -> str | None:
    """Why a selection cannot be acted on (none, or more than ``most``), or None when it can."""
    if not ids:
        return f"Select at least one {noun}: nothing was changed."
    if len(ids) > most:
        return (
            f"Select at most {most} {noun}s at a time ({len(ids)} were selected): "
            "nothing was changed."
        )
    return None


async def run_each(
    db: Database, ids: Sequence[str], change: Callable[[AsyncConnection, str], Awaitable[object]]
) -> list[Outcome]:
    """``change`` for each id in a write transaction of its own; what happened to each."""
    outcomes = []
    for item_id in ids:
        try:
            async with db.write() as conn:
                await change(conn, item_id)
        except APIError as exc:
            outcomes.append(Outcome(item_id, False, exc.reason, exc.message))
        except Exception:  # one failure must not stop the rest; it is logged with its trace
            logger.exception("console bulk action failed for %s", item_id)
            outcomes.append(
                Outcome(item_id, False, "internal_error", "It failed unexpectedly (see the log).")
            )
        else:
            outcomes.append(Outcome(item_id, True))
    return outcomes


@dataclass(frozen=True, slots=True)
class BulkAction:
    """One bulk action of a list, as its pages show it."""

    nav: str  # the list's navigation entry: "orders" or "products"
    noun: str  # "order"
    value: str  # the form's ``action`` value: "fulfil"
    verb: str  # "Fulfil"
    done: str  # "Fulfilled"
    warning: str  # what it does, on the confirmation page
    danger: bool = False


def refused_selection(
    request: Request, action: BulkAction | None, message: str, back_url: str
) -> Response:
    title = f"{action.verb} {action.noun}s" if action else "Bulk action"
    context = {"nav": action.nav if action else "", "title": title, "error": message}
    return render(request, "bulk_refused.html", context | {"back_url": back_url}, 400)


def confirmation(
    request: Request,
    action: BulkAction,
    selected: Sequence[Selected],
    run_url: str,
    back: str,
    back_url: str,
) -> Response:
    context = {
        "nav": action.nav,
        "action": action,
        "selected": selected,
        "run_url": run_url,
        "back": back,
        "back_url": back_url,
    }
    return render(request, "bulk_confirm.html", context)


def results(
    request: Request, action: BulkAction, outcomes: Sequence[Outcome], item_url: str, back_url: str
) -> Response:
    done = sum(outcome.done for outcome in outcomes)
    context = {
        "nav": action.nav,
        "action": action,
        "outcomes": outcomes,
        "done_count": done,
        "refused_count": len(outcomes) - done,
        "item_url": item_url,
        "back_url": back_url,
    }
    return render(request, "bulk_result.html", context)
