"""Problems with a stack, and validator errors that point at the offending field.

`Problem` names a config field (as the user writes it in the stack file) and the fix;
`StackError` carries every problem of one stack.

A pydantic model validator that raises ValueError is reported at the model's own location
(`dynamo-bench:cluster.nodeGroups[0]`). Raising `field_error(...)` instead reports it at the
named field (`dynamo-bench:cluster.nodeGroups[0].capacityReservationId`): pydantic appends the
inner location to the outer one, so `stacks check` names exactly what to change.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import InitErrorDetails


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        fix = f" -> fix: {self.fix}" if self.fix else ""
        return f"{self.field}: {self.message}{fix}"


class StackError(Exception):
    """A stack that must not be built or run; carries every problem found."""

    def __init__(self, stack: str, problems: list[Problem]):
        self.stack = stack
        self.problems = problems
        listing = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"stack '{stack}' has {len(problems)} problem(s):\n{listing}")


def field_error(*loc: str | int, message: str) -> ValidationError:
    """An error at `loc` (camelCase names, as written in the stack file) below the model."""
    detail = InitErrorDetails(type="value_error", loc=loc, input=None,
                              ctx={"error": ValueError(message)})
    return ValidationError.from_exception_data("stack", [detail])


def relocated(exc: ValidationError, *prefix: str | int) -> ValidationError:
    """`exc` with every error's location moved under `prefix` (e.g. a nested override block)."""
    details = []
    for err in exc.errors():
        detail = InitErrorDetails(type=err["type"], loc=(*prefix, *err["loc"]),
                                  input=err["input"])
        if "ctx" in err:
            detail["ctx"] = err["ctx"]
        details.append(detail)
    return ValidationError.from_exception_data("stack", details)
