"""Traces, as the code that makes spans sees them: :data:`ENABLED`, and what to call when it is.

Tracing is off unless the operator's ``OTEL_*`` variables turn it on
(``observability.traces``, at start-up). Off, every place that would make a span checks
:data:`ENABLED`, a module-level boolean, and does nothing else: no span, no context, no call
into OpenTelemetry, and none of its SDK imported (FastAPI imports its API when it is installed,
with FastAPI's own tracing turned off: ``app.factory``). On, the functions below hand the work
to ``core.spans``, which holds the tracer.

What is traced (docs/deployment.md, "Traces"):

- every HTTP request (a SERVER span, the child of an incoming W3C ``traceparent``), named and
  labelled once answered: its route template, method, status, account and request id;
- every write transaction begun inside a traced request or delivery (``Database.write``), and
  every group-commit batch (``storage.group_commit``): one transaction serves many requests,
  so its span is the child of the first request's span and *links* to the others' — each
  request's trace shows the transaction (as a child or a link), and the transaction names
  every request it served. Transactions outside any trace (the dispatcher's claims, the
  housekeeping jobs) make no span: an idle service exports nothing;
- every webhook delivery attempt (a CLIENT span), the child of the context its event was
  recorded in (``events.traceparent``, written in the order's own transaction), whose POST
  carries a ``traceparent`` header naming the attempt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:
    from commerce_api.core.spans import DeliveryAttempt, RequestSpan, Spans

# Whether spans are made. Set by ``enable`` (``observability.traces``) before the app serves
# and never per request: the hot path reads it and, off, nothing else.
ENABLED = False
_spans: Spans | None = None

P = ParamSpec("P")
T = TypeVar("T")
Owner = TypeVar("Owner")


def enable(tracer_provider: Any) -> None:
    """Make spans with ``tracer_provider``'s tracer (an OpenTelemetry ``TracerProvider``)."""
    global ENABLED, _spans
    from commerce_api.core.spans import Spans

    _spans = Spans(tracer_provider)
    ENABLED = True


def disable() -> None:
    global ENABLED, _spans
    ENABLED = False
    _spans = None


def _active() -> Spans:
    assert _spans is not None, "tracing is off: check tracing.ENABLED first"
    return _spans


def start_request(scope: Any) -> RequestSpan:
    """The span of an HTTP request (its ASGI ``scope``), current until :func:`end_request`."""
    return _active().start_request(scope)


def end_request(span: RequestSpan, failure: BaseException | None = None) -> None:
    _active().end_request(span, failure)


def finish_request(
    method: str, route: str, status: int, account_id: str | None, request_id: str
) -> None:
    """Name and label the current request's span with what answered it."""
    _active().finish_request(method, route, status, account_id, request_id)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span (None outside any trace): what a change
    records with its events, so that their deliveries join the trace."""
    return _active().current_traceparent()


def transaction(
    opened: AbstractAsyncContextManager[T],
    system: str,
    traceparents: Sequence[str | None] | None = None,
) -> AbstractAsyncContextManager[T]:
    """``opened`` (a transaction) in a span: the child of the current span, or with
    ``traceparents`` (a batch's requests) the child of the first and linked to the rest."""
    return _active().transaction(opened, system, traceparents)


def traced_transaction(
    method: Callable[Concatenate[Owner, P], AbstractAsyncContextManager[T]],
) -> Callable[Concatenate[Owner, P], AbstractAsyncContextManager[T]]:
    """Decorate a method that opens a transaction (``Database.write``) with its span when
    tracing is on; off, the method itself is called (and this one boolean read)."""

    @functools.wraps(method)
    def traced(
        owner: Owner, /, *args: P.args, **kwargs: P.kwargs
    ) -> AbstractAsyncContextManager[T]:
        opened = method(owner, *args, **kwargs)
        if not ENABLED:
            return opened
        return _active().transaction(opened, str(getattr(owner, "backend", "")), None)

    return traced


@contextmanager
def delivery_attempt(
    traceparent: str | None, attributes: dict[str, Any]
) -> Iterator[DeliveryAttempt]:
    """The span of one webhook delivery attempt, the child of ``traceparent`` (its event's)."""
    with _active().delivery_attempt(traceparent, attributes) as attempt:
        yield attempt
