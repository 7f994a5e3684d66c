"""Modes, deadlines, ejection and the performance history (`resilience`)."""

from __future__ import annotations

from pydantic import Field

from router.literals import Mode
from router.settings.base import Strict


class EjectionSettings(Strict):
    """The outlier detector each backend actor runs on its own call outcomes."""

    consecutive_failures: int = Field(default=5, ge=1, description="Failures in a row that eject a backend.")
    failure_rate: float = Field(default=0.5, gt=0, le=1, description=(
        "Failure rate within `window_s` (over at least `min_requests` calls) that ejects a backend."))
    window_s: float = Field(default=30.0, gt=0, description="The window the failure rate is measured over.")
    min_requests: int = Field(default=10, ge=1, description="Calls in the window before the rate counts.")
    base_ejection_s: float = Field(default=5.0, gt=0, description=(
        "First ejection's length; each repeat doubles it. Then one probe call decides."))
    max_ejection_s: float = Field(default=300.0, gt=0, description="The longest an ejection grows to.")


class ResilienceSettings(Strict):
    """Resilience modes, deadlines, the last-resort response cache and the performance history."""

    default_mode: Mode = Field(
        default="fallback", description="The mode of a request that names none.")
    deadline_s: float = Field(default=30.0, gt=0, le=600, description="Whole-request deadline; a caller may lower it.")
    max_attempts: int = Field(default=3, ge=1, le=20, description="Backends tried at most (fallback and hedged).")
    parallel_k: int = Field(default=3, ge=1, le=10, description="Backends called at once in parallel mode.")
    consensus_k: int = Field(default=3, ge=1, le=10, description="Backends asked in consensus mode.")
    consensus_similarity: float = Field(default=0.85, ge=0, le=1, description=(
        "Cosine above which two answers count as agreeing in consensus mode."))
    hedge_min_delay_ms: float = Field(default=20.0, ge=0, description="Shortest wait before hedging.")
    hedge_max_delay_ms: float = Field(default=2000.0, ge=0, description="Longest wait before hedging.")
    hedge_default_delay_ms: float = Field(default=200.0, ge=0, description=(
        "Wait before hedging when no backend has five recorded calls yet. A backend with five waits its own p95 "
        "(for the intent, or over all intents while the intent has fewer; at most three medians); one with "
        "fewer, the longest wait of those that have five."))
    response_cache_ttl_s: float = Field(default=300.0, ge=0, description=(
        "How long an answer stays usable when every candidate backend is unavailable."))
    response_cache_size: int = Field(default=1024, ge=0, description="Answers kept per replica for that case.")
    ejection: EjectionSettings = Field(default=EjectionSettings(), description="The outlier detector.")
    perf_window: int = Field(default=100, ge=10, le=10_000, description=(
        "Outcomes kept per backend and intent by the performance history."))
    perf_snapshot_interval_s: float = Field(default=5.0, gt=0, description=(
        "How often the history is saved to Ray's GCS key-value store (a restart loses at most this)."))
    stats_refresh_s: float = Field(default=1.0, gt=0, description="How often a replica reads the history's snapshot.")


