"""The ops of "PyTorch-equivalent operations for Rust Candle", each a one-liner
in candle_py: scaled_dot_product_attention, linspace, weight-normed conv1d,
Snake1d, prod and slice_assign.

Run: python examples/extra_ops.py
"""

import math

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F

cp.manual_seed(0)

# --- scaled_dot_product_attention ---------------------------------------------------
print("== scaled_dot_product_attention (causal) ==")
q, k, v = cp.randn(1, 2, 4, 8), cp.randn(1, 2, 4, 8), cp.randn(1, 2, 4, 8)
out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
# The same thing written out: softmax(QK^T / sqrt(d) + causal mask) V.
scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)
mask = cp.ones(4, 4, dtype=cp.bool).tril()
naive = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
print("output shape:", out.shape, "| max diff vs the written-out formula:", f"{float((out - naive).abs().max()):.1e}")
print("first query of head 0 attends only to itself:", cp.allclose(out[0, 0, 0], v[0, 0, 0], atol=1e-6))

# --- linspace -------------------------------------------------------------------------
print("\n== linspace ==")
print("linspace(0, 1, 5):", cp.linspace(0, 1, 5))
print("steps=1:", cp.linspace(3, 7, 1), "| steps=0:", cp.linspace(3, 7, 0))

# --- weight-normed conv1d ---------------------------------------------------------------
print("\n== weight_norm(Conv1d) ==")
conv = nn.utils.weight_norm(nn.Conv1d(4, 6, kernel_size=3))
print("state keys (torch.nn.utils.weight_norm layout):", list(conv.state_dict()))
x = cp.randn(1, 4, 10)
y = conv(x)
# The same weights loaded into the newer parametrizations layout, and as a plain weight.
param = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 6, kernel_size=3))
param.load_state_dict(conv.state_dict())
print("parametrizations layout keys:", list(param.state_dict()))
plain_weight = conv.weight.detach()
plain = nn.utils.weight_norm(nn.Conv1d(4, 6, kernel_size=3))
plain.load_state_dict({"weight": plain_weight, "bias": conv.bias.detach()})
print("same output from all three layouts:", cp.allclose(param(x), y, atol=1e-6), cp.allclose(plain(x), y, atol=1e-6))
g_norm = conv.weight_v.detach().norm(2.0, (1, 2), keepdim=True)
print("w == g * v / ||v||:", cp.allclose(conv.weight, conv.weight_g * conv.weight_v / g_norm, atol=1e-6))

# --- Snake1d ------------------------------------------------------------------------------
print("\n== Snake1d on a sine wave ==")
snake = nn.Snake1d(1)
with cp.no_grad():
    snake.alpha.fill_(2.0)
t = cp.linspace(0, 2 * math.pi, 9).reshape(1, 1, 9)
wave = t.sin()
print("x       :", [f"{v:+.3f}" for v in wave.flatten().tolist()])
print("snake(x):", [f"{v:+.3f}" for v in snake(wave).flatten().tolist()])

# --- prod ---------------------------------------------------------------------------------
print("\n== prod ==")
print("prod([1, 2, 3, 4]) =", cp.prod(cp.tensor([1, 2, 3, 4])).item())
m = cp.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
p = m.prod(1)
p.sum().backward()
print("row products:", p.tolist(), "| gradient (product of the others):", m.grad.tolist())

# --- slice_assign -------------------------------------------------------------------------
print("\n== slice_assign ==")
x = cp.arange(0, 4 * 5).reshape(4, 5)
y = cp.arange(0, 2 * 3).reshape(3, 2)
z = x.slice_assign([slice(1, 4), slice(3, 5)], y)  # a new tensor; x unchanged
print("x.slice_assign([1:4, 3:5], y):")
print(z)
x[1:4, 3:5] = y  # PyTorch's in-place form writes only that region
print("x[1:4, 3:5] = y gives the same table:", cp.equal(x, z))
