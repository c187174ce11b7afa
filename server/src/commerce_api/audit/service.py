"""The audit trail: recording a change (always inside the transaction of the change, so the
two commit or roll back together), and reading and pruning it (``/v1/audit_events``).

An actor is a key (``{"type": "key", "id": "key_…"}``: an admin key, a console session's key,
or a client key placing or canceling its own orders) or the system: ``cli`` (the operator's
command line, which has no key) and ``sweeper`` (pending orders expired by the periodic
sweep). ``changes`` maps each changed field to ``[old, new]`` (``null`` for none); it never
holds a secret or a key's hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from commerce_api.accounts.service import Principal
from commerce_api.audit import repository
from commerce_api.audit.repository import AuditFilter
from commerce_api.core.errors import not_found
from commerce_api.core.ids import looks_like, new_id
from commerce_api.core.pagination import WHOLE_LIST, NewestFirst, newest_first_rows, page
from commerce_api.core.timestamps import format_timestamp, utcnow
from commerce_api.storage.executor import Executor

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

Action = Literal[
    "account.create",
    "key.create",
    "key.revoke",
    "key.sign_in",
    "key.sign_out",
    "product.create",
    "product.update",
    "product.archive",
    "order.create",
    "order.fulfill",
    "order.cancel",
    "endpoint.create",
    "endpoint.update",
    "endpoint.reenable",
    "endpoint.delete",
    "endpoint.rotate_secret",
    "endpoint.recover",
    "endpoint.test",
    "event.redeliver",
]
"""Every action the trail records (docs/design.md, "Audit trail"): ``<target type>.<verb>``.
The one table: the console's Audit filter offers these, and a row of any other is refused."""

ACTIONS: tuple[Action, ...] = get_args(Action)
_KNOWN_ACTIONS = frozenset(ACTIONS)

ActorType = Literal["key", "system"]
Changes = Mapping[str, list[Any]]


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change."""

    type: ActorType
    id: str


CLI = Actor("system", "cli")  # the operator's command line (no key: ``principal=None``)
SWEEPER = Actor("system", "sweeper")  # the periodic expiry of pending orders


def actor_of(principal: Principal | None) -> Actor:
    """The actor of a service call: the caller's key, or the CLI (``None``)."""
    return CLI if principal is None else Actor("key", principal.key_id)


def audit_row(
    actor: Actor,
    action: Action,
    target: tuple[str, str],
    changes: Changes | None = None,
    at: datetime | None = None,
    audit_id: str | None = None,
) -> dict[str, Any]:
    """The ``audit_events`` row of a change (``target``: its type and id), with a new id
    (or ``audit_id``, one of ``new_ids("aud", …)``)."""
    if action not in _KNOWN_ACTIONS:  # a new action goes into ``Action`` first
        raise ValueError(f"unknown audit action {action!r}")
    target_type, target_id = target
    return {
        "id": audit_id or new_id("aud"),
        "created_at": at or utcnow(),
        "actor_type": actor.type,
        "actor_id": actor.id,
        "action": action,
        "target_type": target_type,
        "target_id": target_id,
        "changes": dict(changes or {}),
    }


_PLACED = {"status": [None, "pending"]}


def order_created(principal: Principal, order_id: str, at: datetime) -> dict[str, Any]:
    """The audit row of an order placed by ``principal``'s key (the order desk writes it with
    the batch's orders: ``orders.placement``)."""
    actor = Actor("key", principal.key_id)
    return audit_row(actor, "order.create", ("order", order_id), _PLACED, at)


async def record(
    conn: Executor,
    actor: Actor,
    action: Action,
    target: tuple[str, str],
    changes: Changes | None = None,
) -> None:
    """Record a change in the caller's transaction: it commits, or rolls back, with it."""
    await repository.insert(conn, [audit_row(actor, action, target, changes)])


async def record_many(conn: Executor, rows: list[dict[str, Any]]) -> None:
    """Record many changes (:func:`audit_row` s) in the caller's transaction, in bulk (an
    import's: ``COPY`` on PostgreSQL)."""
    await repository.copy_in(conn, rows)


def created(values: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The changes of something new: each field that has a value, from ``null`` to it."""
    return {field: [None, value] for field, value in values.items() if value is not None}


def changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The fields of ``after`` whose value differs from ``before``'s, as ``[old, new]``."""
    return {
        field: [before.get(field), value]
        for field, value in after.items()
        if before.get(field) != value
    }


def render_audit_event(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "created_at": format_timestamp(row.created_at),
        "actor": {"type": row.actor_type, "id": row.actor_id},
        "action": row.action,
        "target": {"type": row.target_type, "id": row.target_id},
        "changes": row.changes,
    }


async def list_audit_events(
    conn: AsyncConnection,
    *,
    target_id: str | None = None,
    actor_id: str | None = None,
    action: str | None = None,
    limit: int,
    offset: int,
    chosen: NewestFirst = WHOLE_LIST,
    starting_after: str | None = None,
) -> dict[str, Any]:
    """The audit trail (admin keys only: the route checks), newest first; with
    ``starting_after``, the rows after that one, the ``offset`` counted from there."""

    def wanted(window: NewestFirst) -> AuditFilter:
        return AuditFilter(target_id, actor_id, action, window)

    rows, total, offset = await newest_first_rows(
        chosen,
        offset,
        starting_after,
        count=lambda window: repository.count(conn, wanted(window)),
        fetch=lambda window, skip: repository.page(conn, wanted(window), limit, skip),
        load=lambda audit_id: _load(conn, audit_id),
        noun="audit event",
    )
    return page([render_audit_event(row) for row in rows], total, limit, offset)


async def _load(conn: AsyncConnection, audit_id: str) -> Any:
    row = await repository.get(conn, audit_id) if looks_like("aud", audit_id) else None
    if row is None:
        raise not_found(f"No audit event with id `{audit_id}`.", "id")
    return row


TIMELINE_LIMIT = 200


async def history_of(conn: AsyncConnection, target_id: str) -> list[dict[str, Any]]:
    """A target's audit rows, oldest first (its last ``TIMELINE_LIMIT``): an order's page."""
    rows = await repository.of_target(conn, target_id, TIMELINE_LIMIT)
    return [render_audit_event(row) for row in rows]


async def prune_audit_events(conn: AsyncConnection, retention_days: int) -> int:
    """Delete the rows older than ``retention_days`` (``COMMERCE_AUDIT_RETENTION_DAYS``)."""
    return await repository.delete_before(conn, utcnow() - timedelta(days=retention_days))
