"""Train a small classifier end to end, following "Neural Networks with Candle"
(Appendix A of Raschka's *Build a Large Language Model (From Scratch)*), in
PyTorch style with candle_py: Dataset, DataLoader, a Module, SGD, cross-entropy,
predictions, accuracy, and saving / reloading the weights as safetensors.

Run: python examples/train_toy.py [--out model.safetensors]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Tuple

import candle_py as cp
import candle_py.nn as nn
import candle_py.nn.functional as F
from candle_py.utils.data import DataLoader, Dataset


class ToyDataset(Dataset[Tuple[cp.Tensor, cp.Tensor]]):
    def __init__(self, X: cp.Tensor, y: cp.Tensor) -> None:
        self.features, self.labels = X, y

    def __getitem__(self, index: int) -> Tuple[cp.Tensor, cp.Tensor]:
        return self.features[index], self.labels[index]

    def __len__(self) -> int:
        return self.labels.shape[0]


class NeuralNetwork(nn.Module):
    def __init__(self, num_inputs: int, num_outputs: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(num_inputs, 30),
            nn.ReLU(),  # 1st hidden layer
            nn.Linear(30, 20),
            nn.ReLU(),  # 2nd hidden layer
            nn.Linear(20, num_outputs),  # output layer
        )

    def forward(self, x: cp.Tensor) -> cp.Tensor:
        return self.layers(x)  # logits


def compute_accuracy(model: nn.Module, dataloader: DataLoader) -> float:
    model.eval()
    correct, total = 0, 0
    for features, labels in dataloader:
        with cp.no_grad():
            logits = model(features)
        predictions = logits.argmax(dim=1)
        correct += int((predictions == labels).sum().item())
        total += labels.shape[0]
    return correct / total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None, help="where to save the weights (default: a temporary directory)")
    args = ap.parse_args()

    X_train = cp.tensor([[-1.2, 3.1], [-0.9, 2.9], [-0.5, 2.6], [2.3, -1.1], [2.7, -1.5]])
    y_train = cp.tensor([0, 0, 0, 1, 1])
    X_test = cp.tensor([[-0.8, 2.8], [2.6, -1.6]])
    y_test = cp.tensor([0, 1])

    train_ds, test_ds = ToyDataset(X_train, y_train), ToyDataset(X_test, y_test)
    print("len(train_ds):", len(train_ds))

    cp.manual_seed(123)
    train_loader = DataLoader(train_ds, batch_size=2, shuffle=True, drop_last=True)
    test_loader = DataLoader(test_ds, batch_size=2, shuffle=False)
    for idx, (x, y) in enumerate(train_loader):
        print(f"Batch {idx + 1}:", x, y)

    cp.manual_seed(123)
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    print(model)
    num_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print("Total number of trainable model parameters:", num_params)
    optimizer = cp.optim.SGD(model.parameters(), lr=0.5)

    num_epochs = 3
    for epoch in range(num_epochs):
        model.train()
        for batch_idx, (features, labels) in enumerate(train_loader):
            logits = model(features)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(
                f"Epoch: {epoch + 1:03d}/{num_epochs:03d} | Batch {batch_idx + 1:03d}/{len(train_loader):03d}"
                f" | Train Loss: {loss.item():.2f}"
            )

    model.eval()
    with cp.no_grad():
        outputs = model(X_train)
    print("logits:\n", outputs, sep="")
    probas = F.softmax(outputs, dim=1)
    print("probabilities:\n", probas, sep="")
    predictions = probas.argmax(dim=1)
    print("predictions:", predictions.tolist())
    print("predictions from logits:", outputs.argmax(dim=1).tolist())
    print("correct:", int((predictions == y_train).sum().item()), "of", len(y_train))

    train_acc = compute_accuracy(model, DataLoader(train_ds, batch_size=2))
    test_acc = compute_accuracy(model, test_loader)
    print(f"train accuracy: {train_acc * 100:.1f}%")
    print(f"test accuracy: {test_acc * 100:.1f}%")

    tmp = None
    path = args.out
    if path is None:
        tmp = tempfile.TemporaryDirectory()
        path = os.path.join(tmp.name, "model.safetensors")
    cp.save_file(model.state_dict(), path)
    print("saved to", path)

    model_loaded = NeuralNetwork(2, 2)
    model_loaded.load_state_dict(cp.load_file(path))
    loaded_acc = compute_accuracy(model_loaded, test_loader)
    print(f"reloaded model test accuracy: {loaded_acc * 100:.1f}%")
    same = all(bool((a == b).all().item()) for a, b in zip(model.state_dict().values(), model_loaded.state_dict().values()))
    print("reloaded weights identical:", same)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
