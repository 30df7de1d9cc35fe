"""Generators, seeding and the random samplers: PyTorch's deterministic behaviour
(degenerate draws, shapes, dtypes, errors: tests/fixtures/random, made by
tools/make_fixtures_random.py), and the statistics of the draws."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict

import numpy as np
import pytest

import candle_py as cp
from random_fixtures import cases, check, namespace

NS = namespace()


@pytest.mark.parametrize("case", cases("T"), ids=lambda c: c["expr"][:70])
def test_matches_torch(case: Dict[str, Any]) -> None:
    check(case, NS)


def test_fixture_covers_errors_and_values() -> None:
    cs = cases("T")
    assert sum("error" in c for c in cs) >= 40 and sum("ok" in c for c in cs) >= 40


# -- generators -----------------------------------------------------------------------------------
def test_manual_seed_returns_default_generator_and_replays() -> None:
    g = cp.manual_seed(11)
    assert g is cp.default_generator and isinstance(g, cp.Generator)
    assert cp.initial_seed() == 11 and cp.random.initial_seed() == 11
    a = cp.rand(5)
    cp.manual_seed(11)
    assert cp.rand(5).tolist() == a.tolist()
    cp.manual_seed(12)
    assert cp.rand(5).tolist() != a.tolist()


def test_generator_objects_are_independent_of_the_default() -> None:
    g1, g2 = cp.Generator().manual_seed(3), cp.Generator().manual_seed(3)
    a = cp.randn(6, generator=g1)
    cp.manual_seed(0)
    cp.rand(100)  # advancing the default generator does not move g2
    assert cp.randn(6, generator=g2).tolist() == a.tolist()
    cp.manual_seed(0)
    x = cp.rand(4)
    cp.manual_seed(0)
    _ = cp.rand(4, generator=g1)  # drawing from another generator leaves the default one
    assert cp.rand(4).tolist() == x.tolist()


def test_generator_state_roundtrip() -> None:
    g = cp.Generator().manual_seed(42)
    cp.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype == cp.uint8 and state.ndim == 1
    a = [cp.randn(4, generator=g).tolist(), cp.randint(0, 100, (5,), generator=g).tolist(), cp.randperm(7, generator=g).tolist()]
    assert g.set_state(state) is g
    b = [cp.randn(4, generator=g).tolist(), cp.randint(0, 100, (5,), generator=g).tolist(), cp.randperm(7, generator=g).tolist()]
    assert a == b and g.initial_seed() == 42
    # the global state functions act on the default generator
    cp.manual_seed(1)
    s = cp.get_rng_state()
    x = cp.rand(3).tolist()
    cp.set_rng_state(s)
    assert cp.rand(3).tolist() == x
    # a state of another generator moves this one to the same point
    h = cp.Generator().manual_seed(99)
    h.set_state(state)
    assert cp.randn(4, generator=h).tolist() == a[0]


def test_seed_is_fresh_and_recorded() -> None:
    g = cp.Generator()
    assert g.initial_seed() == 67280421310721  # PyTorch's default seed for a new Generator
    s1, s2 = g.seed(), g.seed()
    assert s1 != s2 and g.initial_seed() == s2 and 0 <= s2 < 2**64
    s = cp.seed()
    assert cp.initial_seed() == s
    assert str(g.device) == "cpu" and "Generator" in repr(g)


def test_fork_rng_restores_the_default_state() -> None:
    cp.manual_seed(5)
    with cp.random.fork_rng():
        cp.rand(10)
    after = cp.rand(3).tolist()
    cp.manual_seed(5)
    assert cp.rand(3).tolist() == after
    cp.manual_seed(5)
    with cp.random.fork_rng(enabled=False):
        cp.rand(10)
    assert cp.rand(3).tolist() != after


def test_cuda_seeding_is_harmless_without_cuda() -> None:
    if cp.cuda.is_available():
        pytest.skip("CUDA build: cuda.manual_seed seeds the shared generator")
    cp.manual_seed(8)
    x = cp.rand(3).tolist()
    cp.manual_seed(8)
    cp.cuda.manual_seed(1)
    cp.cuda.manual_seed_all(2)
    cp.cuda.seed()
    cp.cuda.seed_all()
    assert cp.rand(3).tolist() == x


def test_generator_argument_type_is_checked() -> None:
    with pytest.raises(TypeError):
        cp.rand(2, generator=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # torch.manual_seed calls int(seed) first
        cp.manual_seed("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cp.Generator().manual_seed(1.5)  # type: ignore[arg-type]


# Every sampler that takes `generator=` replays under one seed.
SAMPLERS: Dict[str, Callable[[cp.Generator], cp.Tensor]] = {
    "rand": lambda g: cp.rand(8, generator=g),
    "randn": lambda g: cp.randn(8, generator=g, dtype=cp.float64),
    "randint": lambda g: cp.randint(-5, 5, (8,), generator=g),
    "randperm": lambda g: cp.randperm(8, generator=g),
    "randint_like": lambda g: cp.randint_like(cp.zeros(8), -9, 9, generator=g),
    "rand_like": lambda g: cp.rand_like(cp.zeros(8), generator=g),
    "randn_like": lambda g: cp.randn_like(cp.zeros(8), generator=g),
    "normal": lambda g: cp.normal(cp.zeros(8), 2.0, generator=g),
    "normal_numbers": lambda g: cp.normal(1.0, 2.0, (8,), generator=g),
    "bernoulli": lambda g: cp.bernoulli(cp.full((8,), 0.5), generator=g),
    "multinomial": lambda g: cp.multinomial(cp.ones(8), 8, generator=g),
    "poisson": lambda g: cp.poisson(cp.full((8,), 3.0), generator=g),
    "uniform_": lambda g: cp.zeros(8).uniform_(-1, 1, generator=g),
    "normal_": lambda g: cp.zeros(8).normal_(generator=g),
    "random_": lambda g: cp.zeros(8).random_(generator=g),
    "bernoulli_": lambda g: cp.zeros(8).bernoulli_(0.5, generator=g),
    "exponential_": lambda g: cp.zeros(8).exponential_(generator=g),
    "geometric_": lambda g: cp.zeros(8).geometric_(0.3, generator=g),
    "cauchy_": lambda g: cp.zeros(8).cauchy_(generator=g),
    "log_normal_": lambda g: cp.zeros(8).log_normal_(generator=g),
    "init.kaiming_uniform_": lambda g: cp.nn.init.kaiming_uniform_(cp.zeros(4, 2), generator=g),
    "init.xavier_normal_": lambda g: cp.nn.init.xavier_normal_(cp.zeros(4, 2), generator=g),
    "init.trunc_normal_": lambda g: cp.nn.init.trunc_normal_(cp.zeros(8), generator=g),
    "init.normal_": lambda g: cp.nn.init.normal_(cp.zeros(8), generator=g),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_generator_argument_is_honoured(name: str) -> None:
    draw = SAMPLERS[name]
    a = draw(cp.Generator().manual_seed(123)).tolist()
    cp.manual_seed(0)
    b = draw(cp.Generator().manual_seed(123)).tolist()
    c = draw(cp.Generator().manual_seed(124)).tolist()
    assert a == b and a != c


# -- statistics -----------------------------------------------------------------------------------
N = 200_000


def _np(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.tolist(), dtype=np.float64)


def _close(x: float, want: float, sd: float, n: int = N) -> None:
    """Within 6 standard errors of the mean: a false failure is ~1e-9 likely."""
    assert abs(x - want) < 6 * sd / math.sqrt(n) + 1e-12, (x, want)


def test_uniform_and_normal_moments() -> None:
    g = cp.Generator().manual_seed(1)
    u = _np(cp.zeros(N).uniform_(-2.0, 3.0, generator=g))
    assert u.min() >= -2.0 and u.max() < 3.0
    _close(u.mean(), 0.5, 5 / math.sqrt(12))
    z = _np(cp.zeros(N, dtype=cp.float64).normal_(1.0, 2.0, generator=g))
    _close(z.mean(), 1.0, 2.0)
    assert abs(z.std() - 2.0) < 0.02
    n = _np(cp.normal(cp.full((N,), -3.0), cp.full((N,), 0.5), generator=g))
    _close(n.mean(), -3.0, 0.5)
    assert abs(n.std() - 0.5) < 0.005


def test_exponential_geometric_cauchy_lognormal() -> None:
    g = cp.Generator().manual_seed(2)
    e = _np(cp.zeros(N, dtype=cp.float64).exponential_(4.0, generator=g))
    assert e.min() >= 0
    _close(e.mean(), 0.25, 0.25)
    geo = _np(cp.zeros(N).geometric_(0.2, generator=g))
    assert geo.min() >= 1 and np.all(geo == np.round(geo))
    _close(geo.mean(), 5.0, math.sqrt(0.8) / 0.2)
    assert abs(np.mean(geo == 1) - 0.2) < 0.005
    c = _np(cp.zeros(N).cauchy_(3.0, 2.0, generator=g))
    assert abs(np.median(c) - 3.0) < 0.05 and abs(np.mean(np.abs(c - 3.0) < 2.0) - 0.5) < 0.005
    ln = _np(cp.zeros(N, dtype=cp.float64).log_normal_(0.5, 0.25, generator=g))
    assert ln.min() > 0
    _close(np.log(ln).mean(), 0.5, 0.25)


def test_bernoulli_and_poisson_rates() -> None:
    g = cp.Generator().manual_seed(3)
    p = cp.tensor([0.1, 0.5, 0.9]).expand(N // 3, 3).contiguous()
    b = np.asarray(cp.bernoulli(p, generator=g).tolist())
    assert set(np.unique(b)) <= {0.0, 1.0}
    for j, want in enumerate([0.1, 0.5, 0.9]):
        _close(b[:, j].mean(), want, math.sqrt(want * (1 - want)), N // 3)
    ints = cp.zeros(N, dtype=cp.int64).bernoulli_(0.3, generator=g)
    assert ints.dtype == cp.int64
    _close(_np(ints).mean(), 0.3, math.sqrt(0.21))
    pr = _np(cp.poisson(cp.full((N,), 4.0), generator=g))
    assert np.all(pr == np.round(pr)) and pr.min() >= 0
    _close(pr.mean(), 4.0, 2.0)
    _close(pr.var(), 4.0, 6.0)


def test_multinomial_frequencies() -> None:
    g = cp.Generator().manual_seed(4)
    w = [1.0, 0.0, 3.0, 4.0]
    draws = np.asarray(cp.multinomial(cp.tensor(w), N, True, generator=g).tolist())
    assert draws.dtype == np.int64 and not np.any(draws == 1)
    for k, wk in enumerate(w):
        p = wk / 8
        _close(np.mean(draws == k), p, math.sqrt(p * (1 - p)))
    # without replacement: each row is a permutation of distinct categories, and the
    # first pick follows the weights
    rows = cp.tensor(w).expand(20_000, 4).contiguous()
    out = np.asarray(cp.multinomial(rows, 3, generator=g).tolist())
    assert out.shape == (20_000, 3) and all(len(set(r)) == 3 for r in out[:200])
    assert not np.any(out == 1)
    _close(np.mean(out[:, 0] == 3), 0.5, 0.5, 20_000)


def test_random_ranges_per_dtype() -> None:
    g = cp.Generator().manual_seed(5)
    f = _np(cp.zeros(N).random_(generator=g))
    assert f.min() >= 0 and f.max() <= 2**24 and f.max() > 2**23 and np.all(f == np.round(f))
    b = cp.zeros(1000, dtype=cp.bool).random_(generator=g)
    assert 300 < sum(b.tolist()) < 700
    u8 = np.asarray(cp.zeros(N, dtype=cp.uint8).random_(generator=g).tolist())
    assert u8.min() == 0 and u8.max() == 255
    i64 = np.asarray(cp.zeros(1000, dtype=cp.int64).random_(generator=g).tolist())
    assert i64.min() >= 0 and i64.max() > 2**60
    r = np.asarray(cp.zeros(N, dtype=cp.int32).random_(-3, 4, generator=g).tolist())
    assert set(np.unique(r)) == set(range(-3, 4))
    t = np.asarray(cp.zeros(N, dtype=cp.int64).random_(5, generator=g).tolist())
    assert set(np.unique(t)) == set(range(5))
    k = np.asarray(cp.zeros(1000, dtype=cp.int64).random_(to=3, generator=g).tolist())
    assert set(np.unique(k)) == {0, 1, 2}
    ri = np.asarray(cp.randint(-2, 2, (N,), generator=g).tolist())
    assert set(np.unique(ri)) == {-2, -1, 0, 1}


def test_bernoulli_tensor_p_broadcasts() -> None:
    g = cp.Generator().manual_seed(6)
    x = cp.zeros(1000, 2).bernoulli_(cp.tensor([0.0, 1.0]), generator=g)
    assert x[:, 0].sum().item() == 0 and x[:, 1].sum().item() == 1000


def test_normal_gives_zero_gradients_as_torch() -> None:
    mean = cp.zeros(3, requires_grad=True)
    std = cp.ones(3, requires_grad=True)
    out = cp.normal(mean, std)
    assert out.requires_grad
    out.sum().backward()
    assert mean.grad is not None and std.grad is not None
    assert mean.grad.tolist() == [0.0] * 3 and std.grad.tolist() == [0.0] * 3
    m2 = cp.zeros(2, 1, requires_grad=True)
    cp.normal(m2, cp.ones(3)).sum().backward()
    assert m2.grad is not None and m2.grad.tolist() == [[0.0], [0.0]]


def test_in_place_samplers_keep_identity_and_version() -> None:
    x = cp.zeros(4)
    for fill in (
        lambda: x.random_(3),
        lambda: x.bernoulli_(),
        lambda: x.exponential_(),
        lambda: x.geometric_(0.5),
        lambda: x.cauchy_(),
        lambda: x.log_normal_(),
        lambda: x.uniform_(),
        lambda: x.normal_(),
    ):
        assert fill() is x
    leaf = cp.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf.exponential_()


def test_empty_and_zero_d() -> None:
    assert cp.multinomial(cp.ones(0, 3), 2, True).shape == (0, 2)
    assert cp.zeros(0).exponential_().shape == (0,)
    assert cp.bernoulli(cp.tensor(0.0)).item() == 0.0
    assert cp.zeros(()).random_(3, 4).item() == 3.0
    assert cp.poisson(cp.zeros(2, 0)).shape == (2, 0)
    assert cp.normal(0.0, 1.0, (0, 3)).shape == (0, 3)
