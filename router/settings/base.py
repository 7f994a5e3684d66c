"""The one strict base of every settings model: unknown fields are errors, values are frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# Names of backends, keys and policies: shown in answers, metrics and logs, so plain tokens.
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
