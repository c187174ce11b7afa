"""The audit trail as the API shows it: ``/v1/audit_events``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from commerce_api.core.timestamps import TimestampText
from commerce_api.http.schemas import Pagination, ResponseModel


class AuditActor(ResponseModel):
    type: Literal["key", "system"] = Field(
        description="`key`: an API key (an admin key, a console session's key, or a client key "
        "for its own orders); `system`: the service itself (`cli`, `sweeper`)."
    )
    id: str = Field(description="The key's id (`key_…`), or `cli` or `sweeper`.")


class AuditTarget(ResponseModel):
    type: str = Field(
        description="`product`, `order`, `key`, `endpoint` (a webhook endpoint) or `event`."
    )
    id: str


class AuditEvent(ResponseModel):
    id: str
    created_at: TimestampText
    actor: AuditActor
    action: str = Field(description="What was done, such as `product.update` or `order.fulfill`.")
    target: AuditTarget
    changes: dict[str, list[Any]] = Field(
        description="Each changed field's `[old, new]` value (`null` where there was none); "
        "never a secret."
    )


class AuditEventList(ResponseModel):
    data: list[AuditEvent]
    pagination: Pagination
