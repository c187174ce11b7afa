"""Webhook endpoint and event schemas."""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
)

from commerce_api.core.timestamps import Timestamp, TimestampText
from commerce_api.http.schemas import (
    Pagination,
    RequestModel,
    ResponseModel,
    SingleLine,
    drop_null_from_schema,
)

EventType = Literal["order.created", "order.fulfilled", "order.canceled"]
EVENT_TYPES: tuple[str, ...] = ("order.created", "order.fulfilled", "order.canceled")

# An absolute http(s) URL without credentials or fragment; url_policy.py applies the rest.
URL_PATTERN = (
    r"^https?://[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*"
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?"
    r"(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?$"
)
_URL = re.compile(URL_PATTERN)
# Also accepted, though JSON Schema's pattern above leaves it out (a faithful IPv6 pattern is
# unreadable): a bracketed IPv6 literal host, which url_policy then judges like any address.
_IPV6_URL = re.compile(
    URL_PATTERN.replace("[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*", r"\[[0-9A-Fa-f:.]+\]", 1)
)


def _url_format(value: str) -> str:
    if _IPV6_URL.match(value):
        try:
            urlsplit(value).port  # noqa: B018 - raises for a malformed IPv6 literal
        except ValueError:
            raise ValueError("has a malformed IPv6 address") from None
        return value
    if not _URL.match(value):
        raise ValueError(
            "must be an absolute http(s) URL such as https://example.com/webhooks, without "
            "credentials or a #fragment"
        )
    return value


ReceiverURL = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2048),
    AfterValidator(_url_format),
    WithJsonSchema({"type": "string", "maxLength": 2048, "pattern": URL_PATTERN}),
    Field(
        description="Where to POST events. In production: https, public addresses only. "
        "A bracketed IPv6 literal host (https://[2001:db8::1]/) is accepted too."
    ),
]
EventTypes = Annotated[
    list[EventType],
    Field(max_length=len(EVENT_TYPES), description="Event types to send; empty means all."),
]
Description = Annotated[str, StringConstraints(max_length=500), SingleLine]


class WebhookEndpointCreate(RequestModel):
    url: ReceiverURL
    events: EventTypes = Field(default_factory=list)
    description: Description | None = None


class WebhookEndpointUpdate(RequestModel):
    """Fields to change; omitted fields keep their value. `enabled: true` re-enables an
    endpoint that was disabled: its deliveries that were still pending resume."""

    model_config = ConfigDict(
        json_schema_extra=lambda schema: drop_null_from_schema(
            schema, keep=frozenset({"description"})
        )
    )

    url: ReceiverURL | None = None
    events: EventTypes | None = None
    description: Description | None = Field(default=None, description="null clears it.")
    enabled: bool | None = None

    @field_validator("url", "events", "enabled", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("must not be null; omit the field to keep its value")
        return value


class DeliveryHeaders(BaseModel):
    """The Standard Webhooks headers of every delivery (``signing.py``); any Standard Webhooks
    library verifies them with the endpoint's secret."""

    webhook_id: str = Field(
        description="The event's id (`evt_…`), the same on every attempt: dedupe on it."
    )
    webhook_timestamp: int = Field(description="When this attempt was sent: Unix time in seconds.")
    webhook_signature: str = Field(
        description="`v1,<base64 HMAC-SHA256 of {webhook-id}.{webhook-timestamp}.{body}>` with "
        "the endpoint's secret; during a secret rotation, one such value per secret, separated "
        "by spaces."
    )


class WebhookEndpoint(ResponseModel):
    id: str
    url: str
    events: list[str] = Field(description="Event types sent; empty means all.")
    description: str | None
    enabled: bool
    disabled_reason: str | None = Field(
        description="Why the service disabled it: the receiver answered 410 Gone, or every attempt "
        "has failed for `COMMERCE_WEBHOOK_DISABLE_AFTER_SECONDS` (3 days) since the time it names."
    )
    created_at: TimestampText
    updated_at: TimestampText


class WebhookEndpointWithSecret(WebhookEndpoint):
    secret: str = Field(
        description="The signing secret (`whsec_…`). Shown only by create and rotate_secret."
    )


class WebhookEndpointList(ResponseModel):
    data: list[WebhookEndpoint]
    pagination: Pagination


class WebhookEndpointRecover(RequestModel):
    since: Annotated[
        Timestamp,
        Field(
            strict=False,
            description="Recover the deliveries of events created at or after this time "
            "(RFC 3339, with its zone), such as the start of your receiver's outage.",
        ),
    ]


class WebhookEndpointRecovered(ResponseModel):
    recovered: int = Field(
        description="How many deliveries were queued again: each is due now, with a fresh "
        "retry schedule and the same `webhook-id`."
    )
