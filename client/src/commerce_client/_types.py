"""Small shared types."""

from __future__ import annotations

from typing import Final, Literal, final

__all__ = ["NOT_GIVEN", "Environment", "NotGiven"]

Environment = Literal["production", "sandbox"]


@final
class NotGiven:
    """The default of update parameters: "leave this field as it is". Distinct from None,
    which some fields accept as a value (``description=None`` clears a description)."""

    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN: Final = NotGiven()
