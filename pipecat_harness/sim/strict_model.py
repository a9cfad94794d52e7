"""The base of every mapping in a scenario file: unknown keys are errors, values are immutable."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel"]


class StrictModel(BaseModel):
    """A frozen pydantic model that rejects unknown keys, so a typo names its field instead of being ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)
