"""The audit trail: who changed what (``client.audit_events``, admin keys only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Self

from commerce_client import _parse

__all__ = ["AuditActor", "AuditEvent", "AuditTarget"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditActor:
    type: Literal["key", "system"]
    """``key`` (an API key or a console session's key) or ``system``."""
    id: str
    """The key's id (``key_…``), or ``cli`` or ``sweeper`` for the system."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditTarget:
    type: str
    """``product``, ``order``, ``key``, ``endpoint`` or ``event``."""
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvent:
    """One change: who (``actor``), what (``action``, such as ``order.fulfill``), to what
    (``target``), and each changed field's ``[old, new]`` value (``changes``)."""

    id: str
    created_at: datetime
    actor: AuditActor
    action: str
    target: AuditTarget
    changes: dict[str, list[Any]]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return cls(
            id=data["id"],
            created_at=_parse.timestamp(data["created_at"]),
            actor=AuditActor(type=data["actor"]["type"], id=data["actor"]["id"]),
            action=data["action"],
            target=AuditTarget(type=data["target"]["type"], id=data["target"]["id"]),
            changes={field: list(values) for field, values in (data.get("changes") or {}).items()},
        )
