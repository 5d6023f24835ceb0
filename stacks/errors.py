"""Validator errors that point at the offending field, not at the model that holds it.

A pydantic model validator that raises ValueError is reported at the model's own location
(`dynamo-bench:cluster.nodeGroups[0]`). Raising `field_error(...)` instead reports it at the
named field (`dynamo-bench:cluster.nodeGroups[0].capacityReservationId`): pydantic appends the
inner location to the outer one, so `stacks check` names exactly what to change.
"""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import InitErrorDetails


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
