"""Tensors and autograd with candle_py, following "Neural Networks with Candle"
(a port of Appendix A of Raschka's *Build a Large Language Model (From Scratch)*).

Run: python examples/quickstart.py
"""

import candle_py as cp
import candle_py.nn.functional as F

# --- Creating tensors -------------------------------------------------------
tensor0d = cp.tensor(1)  # a scalar
tensor1d = cp.tensor([1, 2, 3])  # a vector
tensor2d = cp.tensor([[1, 2], [3, 4]])  # a matrix
tensor3d = cp.tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]])  # a 3-D tensor
print("0-d:", tensor0d)
print("1-d:", tensor1d)
print("2-d:", tensor2d)
print("3-d:", tensor3d)

# --- Data types ---------------------------------------------------------------
print("\nintegers give", tensor1d.dtype)  # candle_py.int64, as in PyTorch
floatvec = cp.tensor([1.0, 2.0, 3.0])
print("floats give", floatvec.dtype)  # candle_py.float32 (PyTorch's default)
print("as float32:", tensor1d.to(cp.float32).dtype)
print("as float64:", floatvec.to(cp.float64).dtype)

# --- Common operations ----------------------------------------------------------
tensor2d = cp.tensor([[1, 2, 3], [4, 5, 6]])
print("\n", tensor2d, sep="")
print("shape:", tensor2d.shape)
print("reshape(3, 2):\n", tensor2d.reshape(3, 2), sep="")
print("view(3, 2):\n", tensor2d.view(3, 2), sep="")
print("t():\n", tensor2d.t(), sep="")
print("matmul(t()):\n", tensor2d.matmul(tensor2d.t()), sep="")
print("@ operator:\n", tensor2d @ tensor2d.t(), sep="")

# --- A computation graph: logistic regression -----------------------------------
y = cp.tensor([1.0])  # true label
x1 = cp.tensor([1.1])  # input feature
w1 = cp.tensor([2.2], requires_grad=True)  # weight parameter
b = cp.tensor([0.0], requires_grad=True)  # bias unit

z = x1 * w1 + b  # net input
a = cp.sigmoid(z)  # activation and output
print("\nz =", z)
print("a =", a)

loss = F.binary_cross_entropy_with_logits(z, y)
print("loss =", loss)

# --- Autograd -------------------------------------------------------------------
# retain_graph=True keeps the graph for the backward() below (as in PyTorch).
grad_L_w1, grad_L_b = cp.autograd.grad(loss, [w1, b], retain_graph=True)
print("\ngrad_L_w1 via autograd.grad:", grad_L_w1)
print("grad_L_b via autograd.grad:", grad_L_b)

loss.backward()
print("w1.grad after backward():", w1.grad)  # tensor([-0.0898])
print("b.grad after backward():", b.grad)  # tensor([-0.0817])
