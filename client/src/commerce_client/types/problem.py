"""One problem of a request, as the API lists them in ``error.problems``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Problem"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One problem of a refused request: the parameter at fault, why, and what to do."""

    parameter: str
    """The parameter as the request spells it: ``items[0].quantity``, ``status``,
    ``Authorization``."""
    reason: str
    """Why, one of the API's reasons (``validation_failed``, ``order_limit_exceeded``, …)."""
    message: str
    """What is wrong with it and what to do, in a sentence."""

    @classmethod
    def list_from(cls, value: Any) -> list[Problem]:
        """The well-formed items of an ``error.problems`` value (none from a server that
        predates problems)."""
        if not isinstance(value, list):
            return []
        problems = []
        for item in value:
            if not isinstance(item, dict):
                continue
            parameter, reason, message = (item.get(k) for k in ("parameter", "reason", "message"))
            if isinstance(parameter, str) and isinstance(message, str):
                reason = reason if isinstance(reason, str) else ""
                problems.append(cls(parameter=parameter, reason=reason, message=message))
        return problems
