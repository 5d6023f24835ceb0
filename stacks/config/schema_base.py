"""The base of every stack config model: camelCase keys in YAML, snake_case in Python,
unknown keys refused, frozen, no NaN or infinity."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Schema(BaseModel):
    # NaN and infinity pass every bound check (NaN > 0 is False both ways): refuse them outright.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              frozen=True, allow_inf_nan=False)
