"""Shared test settings: the device comes from CANDLE_PY_DEVICE (default cpu)."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

DEVICE = os.environ.get("CANDLE_PY_DEVICE", "cpu")

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def device() -> str:
    return DEVICE
