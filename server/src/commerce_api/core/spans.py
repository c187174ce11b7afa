"""The spans themselves, with OpenTelemetry's API (imported only once tracing is on: see
``core.tracing``, which is what the rest of the code calls)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

T = TypeVar("T")

TRACER_NAME = "commerce_api"
TRACEPARENT = "traceparent"
_TRACE_HEADERS = {b"traceparent": "traceparent", b"tracestate": "tracestate"}
_PROPAGATOR = TraceContextTextMapPropagator()
# Set while a transaction's span is open: a transaction opened inside it (``write_batch``
# calls ``write`` on PostgreSQL) is the same transaction, not a second span.
_IN_TRANSACTION: ContextVar[bool] = ContextVar("commerce_api_in_transaction", default=False)


@dataclass(slots=True)
class RequestSpan:
    span: Span
    token: Token[Context]  # the context attached for the request (detached at its end)


@dataclass(slots=True)
class DeliveryAttempt:
    """A delivery attempt's span and the ``traceparent`` its POST carries."""

    span: Span
    traceparent: str | None

    def finish(self, status_code: int | None, error: str | None) -> None:
        if status_code is not None:
            self.span.set_attribute("http.response.status_code", status_code)
        if error is not None:
            self.span.set_status(Status(StatusCode.ERROR, error))


def traceparent_of(context: Context | None = None) -> str | None:
    """The W3C ``traceparent`` of the span current in ``context`` (None: no valid span)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context)
    return carrier.get(TRACEPARENT)


def context_of(traceparent: str | None) -> Context:
    """The context a ``traceparent`` names (an empty one, a new trace, if none or invalid)."""
    if not traceparent:
        return Context()
    return _PROPAGATOR.extract({TRACEPARENT: traceparent}, Context())


class Spans:
    def __init__(self, tracer_provider: TracerProvider) -> None:
        self.tracer = tracer_provider.get_tracer(TRACER_NAME)

    def start_request(self, scope: Any) -> RequestSpan:
        """A SERVER span, the child of the request's ``traceparent`` (if any, and valid),
        current in the request's context until :meth:`end_request`."""
        carrier = {
            _TRACE_HEADERS[name]: value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _TRACE_HEADERS
        }
        parent = _PROPAGATOR.extract(carrier, Context()) if carrier else Context()
        method = scope["method"]
        span = self.tracer.start_span(
            method,
            parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope["path"]},
        )
        return RequestSpan(span, otel_context.attach(trace.set_span_in_context(span)))

    @staticmethod
    def end_request(request: RequestSpan, failure: BaseException | None) -> None:
        otel_context.detach(request.token)
        if failure is not None:
            request.span.record_exception(failure)
            request.span.set_status(Status(StatusCode.ERROR, type(failure).__name__))
        request.span.end()

    @staticmethod
    def finish_request(
        method: str, route: str, status: int, account_id: str | None, request_id: str
    ) -> None:
        span = trace.get_current_span()
        span.update_name(f"{method} {route}")
        span.set_attribute("http.route", route)
        span.set_attribute("http.response.status_code", status)
        span.set_attribute("commerce.request_id", request_id)
        if account_id is not None:
            span.set_attribute("commerce.account_id", account_id)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))

    @staticmethod
    def current_traceparent() -> str | None:
        return traceparent_of()

    @asynccontextmanager
    async def transaction(
        self,
        opened: AbstractAsyncContextManager[T],
        system: str,
        traceparents: Sequence[str | None] | None,
    ) -> AsyncIterator[T]:
        """``opened`` in a CLIENT span ``transaction``: the child of the current span, or of
        the first of ``traceparents`` (a batch's requests) with a link to each other one. No
        span outside any trace, nor inside another transaction's span."""
        links: list[Link] = []
        attributes: dict[str, Any] = {"db.system.name": system}
        if traceparents is None:
            parent = otel_context.get_current()
            traced = trace.get_current_span(parent).get_span_context().is_valid
        else:
            given = [tp for tp in traceparents if tp]
            parent = context_of(given[0] if given else None)
            links = [
                Link(trace.get_current_span(context_of(tp)).get_span_context()) for tp in given[1:]
            ]
            attributes["commerce.batch.size"] = len(traceparents)
            traced = bool(given)
        if not traced or _IN_TRANSACTION.get():
            async with opened as conn:
                yield conn
            return
        with self.tracer.start_as_current_span(
            "transaction", parent, kind=SpanKind.CLIENT, attributes=attributes, links=links
        ):
            inside = _IN_TRANSACTION.set(True)
            try:
                async with opened as conn:
                    yield conn
            finally:
                _IN_TRANSACTION.reset(inside)

    @contextmanager
    def delivery_attempt(
        self, traceparent: str | None, attributes: dict[str, Any]
    ) -> Iterator[DeliveryAttempt]:
        """A CLIENT span ``webhook delivery``, the child of ``traceparent`` (its event's)."""
        with self.tracer.start_as_current_span(
            "webhook delivery", context_of(traceparent), kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield DeliveryAttempt(span, traceparent_of())
