"""The names shared across the router, defined once: modes, verdicts, states, kinds, and the embed function.

Settings, edge models and internal values all use these, so a new mode or state is added in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

Mode = Literal["fallback", "parallel", "hedged", "consensus"]
MODES: tuple[Mode, ...] = ("fallback", "parallel", "hedged", "consensus")
CapabilityKind = Literal["tool", "prompt", "resource", "flow"]
Verdict = Literal["route", "no_match", "ambiguous"]
DecisionKind = Literal["route", "override", "session", "llm"]
HealthState = Literal["starting", "healthy", "degraded", "down", "ejected"]
Outcome = Literal["success", "error", "timeout", "cancelled", "unavailable"]
IntentSource = Literal["classified", "override", "default"]

# Texts in, one L2-normalised vector per text out (an np.ndarray of shape (n, dim)).
EmbedFn = Callable[[list[str]], Awaitable[Any]]
# Charges a caller for backend calls about to be sent; raises `RateLimited` when its budget is spent.
ChargeFn = Callable[[int], Awaitable[None]]
