"""Unit tests run in one process with no Ray: starting a cluster here is a bug in the test."""

from __future__ import annotations

import pytest
import ray


def _refuse_ray(*args: object, **kwargs: object) -> None:
    raise RuntimeError("unit tests must not start Ray")


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray, "init", _refuse_ray)
