"""`F.pad`'s reflect / replicate / circular modes and `F.interpolate`'s nearest, linear
and cubic modes on the one-pass kernel (`layers::resample`): what the torch fixtures of
`usage_cases` (`interpolate[kernels]`, `pad[kernels]`) do not show — gradients of
gradients, grad_fn names, half types, layouts, and the inputs left to the index_select
path (integer tensors)."""

from __future__ import annotations

import numpy as np
import pytest

import candle_py as cp

F = cp.nn.functional


def _x(*shape: int, dtype: cp.dtype = cp.float32) -> cp.Tensor:
    return cp.tensor(np.random.default_rng(sum(shape)).standard_normal(shape), dtype=dtype)


@pytest.mark.parametrize(
    "f",
    [
        lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"),
        lambda t: F.interpolate(t, size=(5, 3), mode="bicubic", align_corners=True),
        lambda t: F.interpolate(t, size=(7, 2)),
        lambda t: F.pad(t, (2, 1, 0, 3), mode="reflect"),
        lambda t: F.pad(t, (3, 3, 1, 1), mode="circular"),
    ],
)
def test_second_order_gradients(f) -> None:
    # Each resampling is linear (y = L x): the gradient of |L x|^2 is 2 L^T L x, and the
    # gradient of its sum is 2 L^T L 1, computed here from the first-order ops.
    x = _x(1, 2, 4, 5, dtype=cp.float64).requires_grad_(True)
    (g,) = cp.autograd.grad(f(x).pow(2).sum(), x, create_graph=True)
    g.sum().backward()
    ones = cp.ones(1, 2, 4, 5, dtype=cp.float64, requires_grad=True)
    y = f(ones)
    (lt,) = cp.autograd.grad(y, ones, grad_outputs=y.detach())
    np.testing.assert_allclose(x.grad.numpy(), 2 * lt.numpy(), rtol=1e-12, atol=1e-12)
    # And the first-order gradient itself: 2 L^T L x.
    z = x.detach().requires_grad_(True)
    yz = f(z)
    (ltl,) = cp.autograd.grad(yz, z, grad_outputs=yz.detach())
    np.testing.assert_allclose(g.detach().numpy(), 2 * ltl.numpy(), rtol=1e-12, atol=1e-12)


def test_grad_fn_names_are_pytorchs() -> None:
    x = _x(1, 2, 4, 5).requires_grad_(True)
    assert F.pad(x, (1, 1, 1, 1), mode="reflect").grad_fn.name() == "ReflectionPad2DBackward0"
    assert F.pad(x[0], (1, 1), mode="replicate").grad_fn.name() == "ReplicationPad1DBackward0"
    assert F.interpolate(x, scale_factor=2, mode="bilinear").grad_fn.name() == "UpsampleBilinear2DBackward0"
    assert F.interpolate(x, scale_factor=2).grad_fn.name() == "UpsampleNearest2DBackward0"
    assert F.interpolate(x[0], size=9, mode="linear").grad_fn.name() == "UpsampleLinear1DBackward0"


def test_half_types_are_computed_in_float32() -> None:
    x = _x(1, 3, 6, 5)
    for dt in (cp.float16, cp.bfloat16):
        h = x.to(dt)
        y = F.interpolate(h, scale_factor=1.5, mode="bilinear")
        assert y.dtype == dt
        want = F.interpolate(h.float(), scale_factor=1.5, mode="bilinear").to(dt)
        assert cp.equal(y, want)
        p = F.pad(h, (2, 2, 1, 1), mode="reflect")
        assert p.dtype == dt and cp.equal(p.float(), F.pad(h.float(), (2, 2, 1, 1), mode="reflect"))


def test_layouts_batches_and_integer_inputs() -> None:
    x = _x(2, 5, 6, 3)
    v = x.permute(0, 3, 1, 2)  # a strided view
    assert cp.equal(F.interpolate(v, size=(9, 4), mode="bilinear"), F.interpolate(v.contiguous(), size=(9, 4), mode="bilinear"))
    assert F.interpolate(cp.zeros(0, 3, 4, 4), scale_factor=2).shape == (0, 3, 8, 8)
    assert F.pad(cp.zeros(0, 3, 4), (2, 1), mode="reflect").shape == (0, 3, 7)
    # Integer tensors take the index_select path, with the same values.
    i = cp.tensor([[[1, 2, 3]]])
    assert F.pad(i, (2, 1), mode="reflect").tolist() == [[[3, 2, 1, 2, 3, 2]]]
    assert F.pad(i, (1, 2), mode="circular").tolist() == [[[3, 1, 2, 3, 1, 2]]]
    assert F.interpolate(i, size=6).tolist() == [[[1, 1, 2, 2, 3, 3]]]


def test_pytorchs_limits_on_the_paddings() -> None:
    x = _x(2, 3, 4, 5)
    with pytest.raises(NotImplementedError, match="padding size 2 is not supported for 4D"):
        F.pad(x, (1, 1), mode="reflect")
    with pytest.raises(ValueError, match="reflect padding"):
        F.pad(x, (5, 0, 0, 0), mode="reflect")
    with pytest.raises(ValueError, match="circular padding"):
        F.pad(x, (0, 0, 5, 0), mode="circular")
    assert F.pad(x, (0, 0, 4, 4), mode="circular").shape == (2, 3, 12, 5)
