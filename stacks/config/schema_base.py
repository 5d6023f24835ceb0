"""The base of every stack config model: camelCase keys in YAML, snake_case in Python,
unknown keys refused, frozen, no NaN or infinity.

Strict scalars at the edge (issue 30). YAML reads `true` as a boolean, `1` as an integer and
`'1'` as a string, and pydantic's default (lax) mode converts between them: `replicas: true`
became 1 replica, `kvEvents: 1` a switch turned on, `setupHours: false` 0 hours and
`enabled: '0'` a workload switched off, each accepted without a word. So every model field
takes pydantic's strict scalars: a count is a `StrictInt` (no boolean, no decimal, no quoted
number), a switch a `StrictBool` (true or false, nothing else) and every other number (a
duration, a share, money) a `StrictFloat`, which takes an int or a float but never a boolean or
a string (pydantic's strict float accepts ints: `setupHours: 1` stays valid). Enums and
literals stay lax: their values are strings in the file and are matched exactly anyway.
`ConfigDict(strict=True)` would also refuse an enum's own string value given from Python, so
the strictness is per field; tests/test_strict_types.py walks every model and refuses a plain
int, float or bool field.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Schema(BaseModel):
    # NaN and infinity pass every bound check (NaN > 0 is False both ways): refuse them outright.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True, allow_inf_nan=False)
