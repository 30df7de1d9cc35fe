"""The messages of common mistakes read well.

Each case is a mistake users make daily; its message must be at most 3 lines,
carry no Rust backtrace or source path, name the op (or layer), and name the
shapes (or dtypes, keys) that disagree, so the user can fix the call without a
debugger.
"""

from __future__ import annotations

import pytest

import candle_py as cp
import candle_py.nn.functional as F
from candle_py import nn

# name -> (call, exception class, texts the message must contain)
CASES = {
    "matmul shapes": (lambda: cp.ones(2, 3) @ cp.ones(4, 5), ValueError, ["matmul", "[2, 3]", "[4, 5]"]),
    "bmm batch dims": (lambda: cp.bmm(cp.ones(2, 3, 4), cp.ones(3, 4, 5)), ValueError, ["bmm", "[2, 3, 4]", "[3, 4, 5]"]),
    "matmul batch dims": (lambda: cp.matmul(cp.ones(2, 3, 4), cp.ones(3, 4, 5)), ValueError, ["matmul", "[2, 3, 4]", "[3, 4, 5]"]),
    "matmul 0-d": (lambda: cp.matmul(cp.tensor(1.0), cp.ones(3)), ValueError, ["matmul", "[]", "[3]"]),
    "Linear in_features": (lambda: nn.Linear(10, 5)(cp.ones(3, 7)), ValueError, ["Linear", "10", "[3, 7]"]),
    "Sequential layer chain": (
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Linear(6, 2))(cp.ones(2, 4)),
        ValueError,
        ["Linear", "6", "[2, 8]"],
    ),
    "Conv2d channels": (lambda: nn.Conv2d(3, 8, 3)(cp.ones(1, 4, 10, 10)), ValueError, ["Conv2d", "3 channels", "[1, 4, 10, 10]"]),
    "Conv1d channels": (lambda: nn.Conv1d(3, 8, 3)(cp.ones(1, 4, 10)), ValueError, ["Conv1d", "3", "[1, 4, 10]"]),
    "Conv2d rank": (lambda: nn.Conv2d(3, 8, 3)(cp.ones(3, 10)), ValueError, ["Conv2d", "[3, 10]"]),
    "Conv2d kernel too large": (lambda: nn.Conv2d(3, 8, 5)(cp.ones(1, 3, 2, 2)), ValueError, ["Conv2d", "[5, 5]", "[1, 3, 2, 2]"]),
    "MaxPool2d kernel too large": (lambda: nn.MaxPool2d(3)(cp.ones(1, 1, 2, 2)), ValueError, ["MaxPool2d", "[1, 1, 2, 2]"]),
    "Embedding float indices": (lambda: nn.Embedding(10, 4)(cp.tensor([1.0, 2.0])), TypeError, ["embedding", "float32", "[2]"]),
    "Embedding index out of range": (lambda: nn.Embedding(10, 4)(cp.tensor([1, 12])), IndexError, ["embedding", "12", "[10, 4]", "[2]"]),
    "load_state_dict missing key": (
        lambda: nn.Linear(3, 2).load_state_dict({"weight": cp.ones(2, 3)}),
        RuntimeError,
        ["state_dict", "Linear", "Missing", '"bias"'],
    ),
    "load_state_dict unexpected key": (
        lambda: nn.Linear(3, 2).load_state_dict({"weight": cp.ones(2, 3), "bias": cp.ones(2), "foo": cp.ones(1)}),
        RuntimeError,
        ["state_dict", "Unexpected", '"foo"'],
    ),
    "load_state_dict size mismatch": (
        lambda: nn.Linear(3, 2).load_state_dict({"weight": cp.ones(3, 3), "bias": cp.ones(2)}),
        RuntimeError,
        ["state_dict", "weight", "[3, 3]", "[2, 3]"],
    ),
    "broadcast add": (lambda: cp.ones(2, 3) + cp.ones(4), ValueError, ["add", "[2, 3]", "[4]"]),
    "broadcast mul": (lambda: cp.ones(2, 3) * cp.ones(2, 2), ValueError, ["mul", "[2, 3]", "[2, 2]"]),
    "cat": (lambda: cp.cat([cp.ones(2, 3), cp.ones(2, 4)], dim=0), ValueError, ["cat", "[2, 3]", "[2, 4]"]),
    "stack": (lambda: cp.stack([cp.ones(2), cp.ones(3)]), ValueError, ["stack", "[2]", "[3]"]),
    "view": (lambda: cp.ones(2, 3).view(4, 2), ValueError, ["[4, 2]", "6", "[2, 3]"]),
    "expand": (lambda: cp.ones(2, 3).expand(4, 4), ValueError, ["expand", "[4, 4]", "[2, 3]"]),
    "where": (lambda: cp.where(cp.tensor([True, False]), cp.ones(3), cp.ones(2)), ValueError, ["where", "[2]", "[3]"]),
    "cross_entropy target": (lambda: F.cross_entropy(cp.ones(4, 3), cp.tensor([0, 1, 2])), ValueError, ["[4, 3]", "[3]"]),
    "cross_entropy class out of range": (lambda: F.cross_entropy(cp.ones(4, 3), cp.tensor([0, 1, 5, 1])), IndexError, ["5", "3 classes"]),
    "mse_loss shapes": (lambda: F.mse_loss(cp.ones(4, 3), cp.ones(4, 2)), ValueError, ["mse_loss", "[4, 2]", "[4, 3]"]),
    "LayerNorm": (lambda: nn.LayerNorm(8)(cp.ones(2, 5)), ValueError, ["LayerNorm", "8", "[2, 5]"]),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3)(cp.ones(2, 4, 5, 5)), ValueError, ["BatchNorm2d", "3", "[2, 4, 5, 5]"]),
    "LSTM input_size": (lambda: nn.LSTM(10, 5)(cp.ones(3, 2, 7)), ValueError, ["LSTM", "10", "[3, 2, 7]"]),
    "MultiheadAttention embed_dim": (
        lambda: nn.MultiheadAttention(8, 2)(cp.ones(3, 2, 6), cp.ones(3, 2, 6), cp.ones(3, 2, 6)),
        ValueError,
        ["attention", "8", "[3, 2, 6]"],
    ),
    "sdpa head dims": (
        lambda: F.scaled_dot_product_attention(cp.ones(2, 4, 8), cp.ones(2, 5, 7), cp.ones(2, 5, 8)),
        ValueError,
        ["scaled_dot_product_attention", "[2, 4, 8]", "[2, 5, 7]"],
    ),
    "index out of range": (lambda: cp.ones(3, 4)[5], IndexError, ["index", "5", "size 3"]),
    "dim out of range": (lambda: cp.ones(2, 3).sum(dim=4), IndexError, ["sum", "4"]),
    "gather index": (lambda: cp.ones(3, 4).gather(1, cp.tensor([[0, 5]])), IndexError, ["gather", "5", "4"]),
    "setitem shape": (lambda: cp.zeros(3, 4).__setitem__(0, cp.ones(5)), ValueError, ["setitem", "[5]", "[4]"]),
    "backward of non-scalar": (lambda: (cp.ones(3, requires_grad=True) * 2).backward(), RuntimeError, ["backward", "scalar", "[3]"]),
    "one_hot of floats": (lambda: F.one_hot(cp.tensor([1.5])), TypeError, ["one_hot", "float32", "[1]"]),
    "tensor from ragged list": (lambda: cp.tensor([[1, 2], [3]]), ValueError, ["tensor"]),
    "unknown dtype": (lambda: cp.zeros(2, dtype="complex128"), TypeError, ["complex128"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_common_mistake_message(case):
    call, exc, texts = CASES[case]
    with pytest.raises(exc) as ei:
        call()
    msg = str(ei.value)
    lines = msg.strip("\n").splitlines()
    assert 1 <= len(lines) <= 3, f"{case}: {len(lines)} lines:\n{msg}"
    low = msg.lower()
    for marker in ("backtrace", "panicked", ".rs:", "src/", "traceback"):
        assert marker not in low, f"{case}: {marker!r} in {msg!r}"
    for t in texts:
        assert t in msg, f"{case}: {t!r} missing from {msg!r}"


def test_collected_messages_are_printable():
    # The whole collection, as a user would read it (pytest -s shows it).
    out = []
    for case in sorted(CASES):
        call, exc, _ = CASES[case]
        try:
            call()
        except exc as e:
            out.append(f"{case}: {type(e).__name__}: {e}")
    assert len(out) == len(CASES)
    print("\n".join(out))


# Shape mistakes caught in Python raise the same ShapeError (a ValueError) as those
# caught in Rust, and print shapes the same way: `[2, 3]`, never `(2, 3)`.
PYTHON_SHAPE_CASES = {
    "Linear": (lambda: nn.Linear(10, 5)(cp.ones(3, 7)), "[3, 7]"),
    "Conv2d rank": (lambda: nn.Conv2d(3, 8, 3)(cp.ones(3, 10)), "[3, 10]"),
    "MaxPool2d rank": (lambda: nn.MaxPool2d(2)(cp.ones(3)), "[3]"),
    "LayerNorm": (lambda: nn.LayerNorm(8)(cp.ones(2, 5)), "[*, 8], got [2, 5]"),
    "GroupNorm channels": (lambda: nn.GroupNorm(2, 4)(cp.ones(2, 6, 3)), "[2, 6, 3]"),
    "BatchNorm1d training batch of one": (lambda: nn.BatchNorm1d(3)(cp.ones(1, 3)), "[1, 3]"),
    "LSTM rank": (lambda: nn.LSTM(4, 5)(cp.ones(4)), "[4]"),
    "mse_loss": (lambda: F.mse_loss(cp.ones(4, 3), cp.ones(4, 2)), "[4, 2]"),
    "nll_loss": (lambda: F.nll_loss(cp.ones(4, 3), cp.tensor([0, 1, 2])), "[4, 3]"),
    "bilinear": (lambda: F.bilinear(cp.ones(2, 3), cp.ones(2, 4), cp.ones(5, 3, 5)), "[5, 3, 5]"),
    "interpolate rank": (lambda: F.interpolate(cp.ones(2, 3), scale_factor=2.0), "[2, 3]"),
    "adaptive pool rank": (lambda: F.adaptive_avg_pool2d(cp.ones(3), 2), "[3]"),
    "multi_head_attention key_padding_mask": (
        lambda: nn.MultiheadAttention(8, 2)(cp.ones(3, 2, 8), cp.ones(3, 2, 8), cp.ones(3, 2, 8), key_padding_mask=cp.ones(2, 4).bool()),
        "[2, 3], got [2, 4]",
    ),
    "TensorDataset": (lambda: cp.utils.data.TensorDataset(cp.ones(3, 2), cp.ones(4)), "[[3], [4]]"),
}


@pytest.mark.parametrize("case", sorted(PYTHON_SHAPE_CASES))
def test_python_shape_errors_are_shape_errors_with_list_shapes(case):
    call, shown = PYTHON_SHAPE_CASES[case]
    with pytest.raises(cp.ShapeError) as ei:
        call()
    assert shown in str(ei.value), str(ei.value)


@pytest.mark.parametrize(
    "op",
    [
        lambda: cp.ones(2, 2) @ cp.ones(2, 2, dtype=cp.int64),
        lambda: cp.ones(2, 2).mm(cp.ones(2, 2, dtype=cp.float64)),
        lambda: cp.bmm(cp.ones(1, 2, 2), cp.ones(1, 2, 2, dtype=cp.float16)),
        lambda: cp.ones(3).dot(cp.ones(3, dtype=cp.float64)),
    ],
)
def test_products_of_mixed_dtypes_refuse_as_torch(op) -> None:
    """PyTorch does not promote between the operands of matmul/mm/bmm/dot: it raises."""
    msg = r"(matmul|dot): expected both operands to have the same dtype, but got: float32 != (int64|float64|float16)"
    with pytest.raises(cp.DTypeError, match=msg):
        op()


def test_found_by_the_sweeps_of_session_27() -> None:
    # a repeated index in a write keeps the last value (PyTorch's CPU order), once
    x = cp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    y[cp.tensor([0, 0])] = cp.tensor([10.0, 20.0])
    y.sum().backward()
    assert y.tolist() == [20.0, 2.0, 3.0] and x.grad.tolist() == [0.0, 1.0, 1.0]
    # `-` with a bool tensor on either side raises, as in PyTorch
    for f in (lambda: 5 - cp.tensor([True]), lambda: cp.tensor([True]) - 1.5, lambda: cp.tensor([1]) - cp.tensor([True])):
        with pytest.raises(TypeError, match="Subtraction.*bool"):
            f()
    # sizes that cannot be allocated raise instead of aborting the process
    with pytest.raises(RuntimeError, match="allocate"):
        cp.nn.functional.adaptive_avg_pool1d(cp.ones(1, 1, 4), 2**40)
    with pytest.raises(RuntimeError, match="allocate"):
        cp.nn.functional.conv1d(cp.ones(1, 1, 4), cp.ones(1, 1, 2), padding=2**40)
