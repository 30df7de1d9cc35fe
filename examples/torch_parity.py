"""Load a PyTorch model's weights into the same model written with candle_py
(the workflow of "Rust Candle and PyTorch nn layer conversion").

PyTorch side (already done; see tools/make_fixtures.py):
    save_model(net, "parity_convnet.safetensors")   # from safetensors.torch
Here: build the same architecture with candle_py's layers (same class names,
arguments and state_dict keys), load the file with load_state_dict, run the
same input, and compare with PyTorch's output.

Run: python examples/torch_parity.py
"""

import os

import candle_py as cp
import candle_py.nn as nn

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class ParityNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2),
            nn.GELU(),
            nn.AvgPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 3 * 3, 10))

    def forward(self, x: cp.Tensor) -> cp.Tensor:
        return self.head(self.features(x))


def main() -> None:
    net = ParityNet()
    weights = cp.load_file(os.path.join(DATA, "parity_convnet.safetensors"))
    print(f"loaded {len(weights)} tensors written by PyTorch:", ", ".join(sorted(weights)))
    print(net.load_state_dict(weights))  # strict: every key must match
    net.eval()
    print(net)

    io = cp.load_file(os.path.join(DATA, "parity_io.safetensors"))
    with cp.no_grad():
        ours = net(io["input"])
    expected = io["output"]
    print("\nfirst sample, candle_py vs PyTorch:")
    for i, (a, b) in enumerate(zip(ours[0].tolist(), expected[0].tolist())):
        print(f"  logit {i}: {a:+.6f}  {b:+.6f}")
    err = float((ours - expected).abs().max())
    print(f"\nmax abs error over {ours.numel()} outputs: {err:.2e}")
    assert err < 1e-4, "outputs differ from PyTorch's"


if __name__ == "__main__":
    main()
