"""Linear regression with the Keras-like front end, after the "Keras-like deep
learning crate in Rust powered by Candle" proposal: learn y = 3*x1 + x2 - 2.

Run: python examples/keras_regression.py [--epochs N]
"""

from __future__ import annotations

import argparse

import numpy as np

import candle_py as cp
from candle_py import keras, nn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()

    cp.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 2)).astype(np.float32)
    y = 3 * x[:, 0] + x[:, 1] - 2  # the generating model: w = (3, 1), b = -2

    model = keras.Sequential([nn.Linear(2, 1)], input_shape=(2,))
    model.compile("sgd", "mse", metrics=["mae"])
    model.summary()
    history = model.fit(x, y, batch_size=16, epochs=args.epochs, validation_split=0.1, verbose=2)

    # The sample points of the proposal, and the model's predictions for them.
    sample_xs = np.array([[2, 1], [7, 4], [-4, 12], [5, 8]], dtype=np.float32)
    print("predictions for", sample_xs.tolist(), "->", np.round(model.predict(sample_xs)[:, 0], 3).tolist())
    print("expected:", (3 * sample_xs[:, 0] + sample_xs[:, 1] - 2).tolist())

    w = model.layers[0].weight.detach().numpy()[0]
    b = float(model.layers[0].bias.detach().numpy()[0])
    print(f"final loss: {history.history['loss'][-1]:.6f}")
    print(f"learned weights: {w[0]:.4f} {w[1]:.4f}")
    print(f"learned bias: {b:.4f}")


if __name__ == "__main__":
    main()
