"""`candle_py.distributions` against PyTorch's `torch.distributions`: the cases of
tests/distributions_cases.py compared with tests/fixtures/distributions (made by
tools/make_fixtures_distributions.py), then what a fixture cannot show because the
random streams differ: seeded sampling statistics (moments within a few standard
errors, shapes, dtypes, supports) and reparameterized gradients against their analytic
expectations."""

from __future__ import annotations

import pytest

import candle_py as cp
from distributions_cases import CASES
from fixture_cases import check_case, load_fixture

META, ARRAYS = load_fixture("distributions")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def test_registered_as_a_submodule() -> None:
    import candle_py.distributions as D

    assert cp.distributions is D
    assert "distributions" in cp.__all__


# -- sampling statistics (seeded; the random streams are candle_py's own) -------------------

import math  # noqa: E402

import numpy as np  # noqa: E402

D = cp.distributions
N = 40_000


def _np64(t: cp.Tensor) -> np.ndarray:
    return np.asarray(t.detach().double().numpy())


def _check_moments(s: np.ndarray, mean: np.ndarray, var: np.ndarray, kurt: float = 3.0, z: float = 5.0) -> None:
    """Sample mean and variance along axis 0 within `z` standard errors (kurt: the
    distribution's kurtosis E[(x - mu)^4] / var^2, bounding the variance's error)."""
    n = s.shape[0]
    m = s.mean(0)
    v = s.var(0, ddof=1)
    np.testing.assert_array_less(np.abs(m - mean), z * np.sqrt(var / n) + 1e-12)
    np.testing.assert_array_less(np.abs(v - var), z * var * np.sqrt((kurt - 1) / n) + 1e-12)


def _ks(d: object, s: cp.Tensor) -> float:
    """Kolmogorov-Smirnov statistic of scalar samples `s` (sample dim first, one batch
    element) against `d.cdf`, in float64."""
    x = np.sort(_np64(s).reshape(-1))
    f = _np64(d.cdf(cp.tensor(x, dtype=cp.float64)))  # type: ignore[attr-defined]
    n = x.size
    return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))


KS_LIMIT = 1.95 / math.sqrt(N)  # 0.1% level


@pytest.mark.parametrize(
    "make",
    [
        lambda f: D.Normal(cp.tensor(1.5, dtype=f), cp.tensor(2.0, dtype=f)),
        lambda f: D.Exponential(cp.tensor(0.7, dtype=f)),
        lambda f: D.Laplace(cp.tensor(-1.0, dtype=f), cp.tensor(0.5, dtype=f)),
        lambda f: D.Cauchy(cp.tensor(0.3, dtype=f), cp.tensor(2.0, dtype=f)),
        lambda f: D.Uniform(cp.tensor(-2.0, dtype=f), cp.tensor(3.0, dtype=f)),
        lambda f: D.Gumbel(cp.tensor(1.0, dtype=f), cp.tensor(2.0, dtype=f)),
        lambda f: D.HalfNormal(cp.tensor(1.3, dtype=f)),
        lambda f: D.HalfCauchy(cp.tensor(1.3, dtype=f)),
        lambda f: D.LogNormal(cp.tensor(0.2, dtype=f), cp.tensor(0.8, dtype=f)),
        # float32 clamps samples below its `tiny` (as PyTorch): P(x < 1e-38) is 1.3% at 0.05
        lambda f: D.Gamma(cp.tensor(0.05 if f == cp.float64 else 0.2, dtype=f), cp.tensor(1.0, dtype=f)),
        lambda f: D.Gamma(cp.tensor(0.6, dtype=f), cp.tensor(2.0, dtype=f)),
        lambda f: D.Gamma(cp.tensor(1.0, dtype=f), cp.tensor(1.0, dtype=f)),
        lambda f: D.Gamma(cp.tensor(3.5, dtype=f), cp.tensor(0.5, dtype=f)),
        lambda f: D.Gamma(cp.tensor(250.0, dtype=f), cp.tensor(3.0, dtype=f)),
        lambda f: D.Chi2(cp.tensor(3.0, dtype=f)),
        lambda f: D.Pareto(cp.tensor(1.5, dtype=f), cp.tensor(2.5, dtype=f)),
    ],
)
@pytest.mark.parametrize("dtype", [cp.float32, cp.float64])
def test_samples_follow_the_cdf(make, dtype) -> None:  # type: ignore[no-untyped-def]
    cp.manual_seed(1)
    d = make(dtype)
    s = d.sample((N,))
    assert s.shape == (N,) and s.dtype == dtype and not s.requires_grad
    assert bool(d.support.check(s).all())
    assert _ks(d, s) < KS_LIMIT
    if d.has_rsample:
        r = d.rsample((N,))
        assert r.shape == (N,) and r.dtype == dtype
        assert _ks(d, r) < KS_LIMIT


def test_normal_family_moments_over_a_batch() -> None:
    cp.manual_seed(2)
    loc = np.array([[0.0, 1.0, -3.0], [10.0, 0.5, 2.0]])
    scale = np.array([[1.0, 0.1, 2.0], [5.0, 0.5, 1.0]])
    d = D.Normal(cp.tensor(loc, dtype=cp.float32), cp.tensor(scale, dtype=cp.float32))
    s = d.sample((N,))
    assert s.shape == (N, 2, 3) and s.dtype == cp.float32
    _check_moments(_np64(s), loc, scale**2)
    _check_moments(_np64(D.Independent(d, 1).rsample((N,))), loc, scale**2)
    s = D.StudentT(cp.tensor([5.0, 9.0]), cp.tensor([1.0, -1.0]), cp.tensor([2.0, 0.5])).sample((N,))
    df = np.array([5.0, 9.0])
    _check_moments(_np64(s), np.array([1.0, -1.0]), np.array([4.0, 0.25]) * df / (df - 2), kurt=3 + 6 / (df - 4), z=6)


def test_gamma_extreme_concentrations() -> None:
    cp.manual_seed(3)
    s = D.Gamma(cp.tensor([1e-3, 1e5]), cp.tensor([1.0, 1.0])).sample((N,))
    assert bool((s > 0).all()) and bool(s.isfinite().all())
    a = _np64(s)
    np.testing.assert_allclose(a[:, 1].mean(), 1e5, rtol=5 * math.sqrt(1e5) / 1e5 / math.sqrt(N))
    assert abs(a[:, 0].mean() - 1e-3) < 5 * math.sqrt(1e-3 / N) + 1e-4
    assert float(s[:, 0].min()) >= cp.finfo(cp.float32).tiny


def test_beta_and_dirichlet_moments() -> None:
    cp.manual_seed(4)
    a, b = np.array([0.3, 2.0, 8.0]), np.array([0.7, 5.0, 1.5])
    d = D.Beta(cp.tensor(a), cp.tensor(b))
    s = d.sample((N,))
    assert s.shape == (N, 3) and bool(d.support.check(s).all())
    mean = a / (a + b)
    var = a * b / ((a + b) ** 2 * (a + b + 1))
    _check_moments(_np64(s), mean, var, kurt=9.0)
    c = np.array([[1.0, 2.0, 3.0], [0.2, 0.2, 5.0]])
    dd = D.Dirichlet(cp.tensor(c))
    s = dd.sample((N,))
    assert s.shape == (N, 2, 3)
    np.testing.assert_allclose(_np64(s.sum(-1)), 1.0, atol=1e-5)
    c0 = c.sum(-1, keepdims=True)
    _check_moments(_np64(s), c / c0, c * (c0 - c) / (c0**2 * (c0 + 1)), kurt=12.0)


def test_multivariate_normal_sample_covariance() -> None:
    cp.manual_seed(5)
    cov = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    loc = np.array([1.0, -2.0, 0.5])
    for d in (
        D.MultivariateNormal(cp.tensor(loc), covariance_matrix=cp.tensor(cov)),
        D.MultivariateNormal(cp.tensor(loc), precision_matrix=cp.tensor(np.linalg.inv(cov))),
        D.MultivariateNormal(cp.tensor(loc), scale_tril=cp.tensor(np.linalg.cholesky(cov))),
    ):
        s = _np64(d.sample((N,)))
        assert s.shape == (N, 3)
        np.testing.assert_allclose(s.mean(0), loc, atol=5 * math.sqrt(2.0 / N))
        np.testing.assert_allclose(np.cov(s.T), cov, atol=6 * 2.0 * math.sqrt(2.0 / N))
    d = D.MultivariateNormal(cp.zeros(2, 3), covariance_matrix=cp.tensor(cov, dtype=cp.float32))
    assert d.sample((4, 5)).shape == (4, 5, 2, 3)


def test_discrete_samples() -> None:
    cp.manual_seed(6)
    p = np.array([0.0, 0.1, 0.6, 0.3])
    c = D.Categorical(cp.tensor(p))
    s = c.sample((N,))
    assert s.dtype == cp.int64 and s.shape == (N,)
    freq = np.bincount(_np64(s).astype(int), minlength=4) / N
    np.testing.assert_array_less(np.abs(freq - p), 5 * np.sqrt(p * (1 - p) / N) + 1e-12)
    assert freq[0] == 0.0
    oh = D.OneHotCategorical(cp.tensor(p)).sample((N,))
    assert oh.shape == (N, 4) and bool((oh.sum(-1) == 1).all())
    np.testing.assert_array_less(np.abs(_np64(oh).mean(0) - p), 5 * np.sqrt(p * (1 - p) / N) + 1e-12)
    logits = D.Categorical(logits=cp.tensor([[0.0, -math.inf, 1.0]] * 2)).sample((1000,))
    assert bool((logits != 1).all())
    b = D.Bernoulli(cp.tensor([0.0, 1.0, 0.25])).sample((N,))
    bs = _np64(b)
    assert (bs[:, 0] == 0).all() and (bs[:, 1] == 1).all()
    assert abs(bs[:, 2].mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / N)
    po = D.Poisson(cp.tensor([0.0, 0.5, 7.0, 300.0])).sample((N,))
    rate = np.array([0.0, 0.5, 7.0, 300.0])
    _check_moments(_np64(po)[:, 1:], rate[1:], rate[1:], kurt=3 + 1 / 0.5)
    assert (_np64(po)[:, 0] == 0).all()
    g = D.Geometric(cp.tensor([1.0, 0.3, 0.02])).sample((N,))
    gs = _np64(g)
    assert (gs[:, 0] == 0).all() and (gs == np.floor(gs)).all()
    q = np.array([0.3, 0.02])
    _check_moments(gs[:, 1:], (1 - q) / q, (1 - q) / q**2, kurt=9 + q**2 / (1 - q), z=6)


@pytest.mark.parametrize(("n", "p"), [(20, 0.3), (7, 0.9), (100, 0.4), (1000, 0.7), (30, 0.5), (5000, 0.001)])
def test_binomial_pmf_frequencies(n: int, p: float) -> None:
    """Inversion (n * min(p, 1 - p) < 10) and BTRS (otherwise) against exp(log_prob)."""
    cp.manual_seed(7)
    d = D.Binomial(n, cp.tensor([p], dtype=cp.float64))
    s = _np64(d.sample((N,)))[:, 0]
    assert (s == np.floor(s)).all() and s.min() >= 0 and s.max() <= n
    k = np.arange(n + 1, dtype=np.float64)
    pmf = np.exp(_np64(d.log_prob(cp.tensor(k[:, None]))))[:, 0]
    counts = np.bincount(s.astype(int), minlength=n + 1)
    keep = pmf * N >= 5
    exp_counts = pmf[keep] * N
    obs = counts[keep]
    rest_e, rest_o = N - exp_counts.sum(), N - obs.sum()
    chi2 = ((obs - exp_counts) ** 2 / exp_counts).sum() + ((rest_o - rest_e) ** 2 / rest_e if rest_e > 5 else 0.0)
    dof = keep.sum()
    assert chi2 < dof + 6 * math.sqrt(2 * dof), (chi2, dof)


def test_binomial_edges_and_batch() -> None:
    cp.manual_seed(8)
    d = D.Binomial(cp.tensor([[0.0, 5.0, 5.0, 12.0]]), cp.tensor([0.5, 0.0, 1.0, 0.5]))
    s = d.sample((3,))
    assert s.shape == (3, 1, 4) and s.dtype == cp.float32
    a = _np64(s)
    assert (a[..., 0] == 0).all() and (a[..., 1] == 0).all() and (a[..., 2] == 5).all()
    logits = D.Binomial(50, logits=cp.tensor([2.0])).sample((N,))
    p = 1 / (1 + math.exp(-2.0))
    _check_moments(_np64(logits), np.array([50 * p]), np.array([50 * p * (1 - p)]), kurt=4.0)


def test_relaxed_and_straight_through_samples() -> None:
    cp.manual_seed(9)
    rb = D.RelaxedBernoulli(cp.tensor(0.1), probs=cp.tensor([0.2, 0.9]))
    s = rb.sample((N,))
    assert bool(((s > 0) & (s < 1)).all())
    np.testing.assert_allclose(_np64(s > 0.5).mean(0), [0.2, 0.9], atol=0.02)  # low temperature: nearly Bernoulli
    rc = D.RelaxedOneHotCategorical(cp.tensor(0.1), probs=cp.tensor([0.2, 0.3, 0.5]))
    s = rc.rsample((N,))
    np.testing.assert_allclose(_np64(s.sum(-1)), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.bincount(_np64(s.argmax(-1)).astype(int), minlength=3) / N, [0.2, 0.3, 0.5], atol=0.02)
    logits = cp.tensor([0.5, -0.5, 0.0], requires_grad=True)
    st = D.OneHotCategoricalStraightThrough(logits=logits).rsample((5,))
    (st * cp.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and bool(logits.grad.isfinite().all())


# -- reparameterized gradients against the analytic gradients of expectations --------------


def _mc_grad(loss: cp.Tensor, params: list) -> list:
    loss.backward()
    return [_np64(p.grad) for p in params]


def test_rsample_gradients_normal_family() -> None:
    cp.manual_seed(10)
    n = 200_000
    loc = cp.tensor([0.5, -1.0], requires_grad=True)
    scale = cp.tensor([1.5, 0.3], requires_grad=True)
    x = D.Normal(loc, scale).rsample((n,))
    gl, gs = _mc_grad((x**2).mean(0).sum(), [loc, scale])  # E[x^2] = loc^2 + scale^2
    np.testing.assert_allclose(gl, 2 * np.array([0.5, -1.0]), atol=0.03)
    np.testing.assert_allclose(gs, 2 * np.array([1.5, 0.3]), atol=0.05)
    for make, mean_grad in [
        (lambda a, b: D.Laplace(a, b), lambda a, b: (np.ones(2), np.zeros(2))),
        (lambda a, b: D.Uniform(a, a + b), lambda a, b: (np.ones(2), 0.5 * np.ones(2))),
        (lambda a, b: D.LogNormal(a, b), lambda a, b: (np.exp(a + b**2 / 2), b * np.exp(a + b**2 / 2))),
        (lambda a, b: D.Gumbel(a, b), lambda a, b: (np.ones(2), 0.5772156649 * np.ones(2))),
    ]:
        a = cp.tensor([0.2, -0.4], requires_grad=True)
        b = cp.tensor([0.5, 0.8], requires_grad=True)
        x = make(a, b).rsample((n,))
        ga, gb = _mc_grad(x.mean(0).sum(), [a, b])
        ea, eb = mean_grad(np.array([0.2, -0.4]), np.array([0.5, 0.8]))
        np.testing.assert_allclose(ga, ea, atol=0.03)
        np.testing.assert_allclose(gb, eb, atol=0.03)
    rate = cp.tensor([0.5, 2.0], requires_grad=True)
    (g,) = _mc_grad(D.Exponential(rate).rsample((n,)).mean(0).sum(), [rate])
    np.testing.assert_allclose(g, -1 / np.array([0.5, 2.0]) ** 2, rtol=0.03)


def test_rsample_gradients_gamma_family() -> None:
    """The implicit reparameterization gradient: d E[x]/d alpha = 1/rate and
    d E[x^2]/d alpha = (2 alpha + 1)/rate^2 (Gamma); Beta, Dirichlet, Chi2, StudentT through it."""
    cp.manual_seed(11)
    n = 200_000
    alpha_np, rate_np = np.array([0.3, 2.5, 40.0]), np.array([1.0, 2.0, 0.5])
    alpha = cp.tensor(alpha_np, dtype=cp.float64, requires_grad=True)
    rate = cp.tensor(rate_np, dtype=cp.float64, requires_grad=True)
    x = D.Gamma(alpha, rate).rsample((n,))
    ga, gr = _mc_grad(x.mean(0).sum(), [alpha, rate])
    np.testing.assert_allclose(ga, 1 / rate_np, rtol=0.02)
    np.testing.assert_allclose(gr, -alpha_np / rate_np**2, rtol=0.02)
    alpha.grad = None
    x = D.Gamma(alpha, rate).rsample((n,))
    (ga,) = _mc_grad((x**2).mean(0).sum(), [alpha])
    np.testing.assert_allclose(ga, (2 * alpha_np + 1) / rate_np**2, rtol=0.03)
    a = cp.tensor([0.5, 3.0], dtype=cp.float64, requires_grad=True)
    b = cp.tensor([2.0, 1.0], dtype=cp.float64, requires_grad=True)
    ga, gb = _mc_grad(D.Beta(a, b).rsample((n,)).mean(0).sum(), [a, b])  # E = a / (a + b)
    an, bn = np.array([0.5, 3.0]), np.array([2.0, 1.0])
    np.testing.assert_allclose(ga, bn / (an + bn) ** 2, rtol=0.03, atol=2e-3)
    np.testing.assert_allclose(gb, -an / (an + bn) ** 2, rtol=0.03, atol=2e-3)
    c = cp.tensor([1.0, 2.0, 0.5], dtype=cp.float64, requires_grad=True)
    w = cp.tensor([1.0, -2.0, 3.0], dtype=cp.float64)
    (gc,) = _mc_grad((D.Dirichlet(c).rsample((n,)) * w).sum(-1).mean(), [c])
    cn, wn = np.array([1.0, 2.0, 0.5]), np.array([1.0, -2.0, 3.0])
    c0 = cn.sum()
    np.testing.assert_allclose(gc, wn / c0 - (wn * cn).sum() / c0**2, atol=0.01)
    df = cp.tensor([3.0, 7.0], dtype=cp.float64, requires_grad=True)
    (gd,) = _mc_grad(D.Chi2(df).rsample((n,)).mean(0).sum(), [df])
    np.testing.assert_allclose(gd, [1.0, 1.0], rtol=0.02)
    df = cp.tensor([6.0], dtype=cp.float64, requires_grad=True)
    scale = cp.tensor([1.5], dtype=cp.float64, requires_grad=True)
    x = D.StudentT(df, 0.0, scale).rsample((4 * n,))
    gd, gs = _mc_grad((x**2).mean(), [df, scale])  # E[x^2] = scale^2 df / (df - 2)
    np.testing.assert_allclose(gs, 2 * 1.5 * 6 / 4, rtol=0.05)
    np.testing.assert_allclose(gd, -(1.5**2) * 2 / 16, rtol=0.25)


def test_rsample_gradients_multivariate_normal() -> None:
    cp.manual_seed(12)
    n = 100_000
    loc = cp.tensor([1.0, -1.0], requires_grad=True)
    tril = cp.tensor([[1.0, 0.0], [0.5, 2.0]], requires_grad=True)
    x = D.MultivariateNormal(loc, scale_tril=tril).rsample((n,))
    gl, gt = _mc_grad((x**2).sum(-1).mean(), [loc, tril])  # E|x|^2 = |loc|^2 + tr(L L^T)
    np.testing.assert_allclose(gl, [2.0, -2.0], atol=0.05)
    np.testing.assert_allclose(gt, 2 * np.array([[1.0, 0.0], [0.5, 2.0]]), atol=0.06)
    cov = cp.tensor([[2.0, 0.3], [0.3, 1.0]], requires_grad=True)
    x = D.MultivariateNormal(cp.zeros(2), covariance_matrix=cov).rsample((n,))
    (gc,) = _mc_grad((x**2).sum(-1).mean(), [cov])  # E|x|^2 = tr(cov)
    np.testing.assert_allclose(gc, np.eye(2), atol=0.05)


def test_sample_is_detached_and_respects_no_grad() -> None:
    loc = cp.tensor([0.0], requires_grad=True)
    assert not D.Normal(loc, 1.0).sample().requires_grad
    assert D.Normal(loc, 1.0).rsample().requires_grad
    alpha = cp.tensor([2.0], requires_grad=True)
    assert not D.Gamma(alpha, 1.0).sample().requires_grad
    with cp.no_grad():
        assert not D.Gamma(alpha, 1.0).rsample().requires_grad
    assert D.Gamma(alpha, 1.0).rsample().requires_grad
    assert not D.Poisson(cp.tensor([1.0])).has_rsample


def test_gamma_cdf_matches_the_incomplete_gamma_series() -> None:
    """The composed gammainc (series / continued fraction) against math.lgamma-based sums."""
    a = np.array([0.1, 0.5, 1.0, 3.0, 10.0, 100.0, 500.0])
    x = np.array([0.01, 2.0, 1.0, 2.5, 12.0, 90.0, 520.0])
    got = _np64(D.Gamma(cp.tensor(a, dtype=cp.float64), 1.0).cdf(cp.tensor(x, dtype=cp.float64)))
    want = []
    for ai, xi in zip(a, x):
        term = math.exp(ai * math.log(xi) - xi - math.lgamma(ai + 1))
        total, k = 0.0, 0
        while term > 1e-18 * max(total, 1e-300) or k < 5:
            total += term
            k += 1
            term *= xi / (ai + k)
        want.append(total)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert _np64(D.Exponential(cp.tensor(1.0, dtype=cp.float64)).cdf(cp.tensor(1.0, dtype=cp.float64))) == pytest.approx(1 - math.exp(-1))


def test_mixed_validation_messages_name_the_parameter() -> None:
    with pytest.raises(ValueError, match=r"Expected parameter scale .* GreaterThan\(lower_bound=0.0\)"):
        D.Normal(cp.zeros(2), cp.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"to be within the support \(Boolean\(\)\)"):
        D.Bernoulli(cp.tensor([0.5])).log_prob(cp.tensor([0.5]))
    with pytest.raises(RuntimeError, match="not positive-definite"):
        D.MultivariateNormal(cp.zeros(2), covariance_matrix=cp.tensor([[1.0, 2.0], [2.0, 1.0]]), validate_args=False)


# -- a real program: REINFORCE on a bandit, as pytorch/examples writes the update ------------


def test_reinforce_learns_the_best_arm() -> None:
    cp.manual_seed(13)
    nn, F = cp.nn, cp.nn.functional
    policy = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 3))
    optimizer = cp.optim.Adam(policy.parameters(), lr=3e-2)
    mean_reward = np.array([0.1, 1.0, 0.4])
    rng = np.random.default_rng(0)
    state = cp.tensor([[1.0, 0.5]])
    for _ in range(150):
        probs = F.softmax(policy(state), dim=1)
        m = D.Categorical(probs)
        actions = m.sample((16,))  # a batch of 16 pulls
        rewards = cp.tensor(mean_reward[_np64(actions).astype(int)[:, 0]] + rng.normal(0, 0.1, 16), dtype=cp.float32)
        returns = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
        loss = (-m.log_prob(actions)[:, 0] * returns).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    final = F.softmax(policy(state), dim=1)
    assert float(final[0, 1]) > 0.9
