"""Shared test settings.

The device comes from CANDLE_PY_DEVICE (default cpu): `CANDLE_PY_DEVICE=cuda pytest`
makes it the default device at session start (`cp.set_default_device`), so every
creation function without `device=` puts its tensor there, as
`torch.set_default_device` does, and the same tests run on the GPU.

Tests marked `gpu` need a CUDA device and are skipped without one; tests marked
`cpu_only` check CPU-specific behaviour (zero-copy NumPy views, ...) and are
skipped when another device is the default.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import candle_py as cp

DEVICE = os.environ.get("CANDLE_PY_DEVICE", "cpu")

# "ci" (the default) draws the same examples every run (a seed per test), so a red run
# reproduces and an unrelated change cannot turn CI red by drawing a new case.
# "explore" draws fresh random examples, more of them: run it to look for new defects
# (HYPOTHESIS_PROFILE=explore pytest), and pin what it finds as explicit tests.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cpu_only: CPU-specific behaviour (skipped when CANDLE_PY_DEVICE is not cpu)")
    if DEVICE != "cpu":
        # Fails here, before any test, if the build or the machine lacks the device.
        cp.set_default_device(DEVICE)


def pytest_report_header(config: pytest.Config) -> str:
    return f"candle_py default device: {cp.get_default_device()} (CANDLE_PY_DEVICE={DEVICE})"


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    has_cuda = cp.cuda.is_available()
    no_gpu = pytest.mark.skip(reason="needs a CUDA device and a build with the `cuda` feature")
    not_cpu = pytest.mark.skip(reason=f"CPU-specific test; the default device is {DEVICE}")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(no_gpu)
        if "cpu_only" in item.keywords and DEVICE != "cpu":
            item.add_marker(not_cpu)


@pytest.fixture
def device() -> str:
    return DEVICE
