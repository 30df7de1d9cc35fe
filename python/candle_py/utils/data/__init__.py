"""`candle_py.utils.data`: PyTorch's datasets, samplers, `DataLoader`,
`default_collate` and `random_split` (modules `dataset`, `sampler`, `dataloader`,
`distributed`, as in `torch.utils.data`).

Random orders draw from `generator=` when given, else from the default generator
(`candle_py.manual_seed` seeds it), so a seeded run sees the same batches every time.
"""

from __future__ import annotations

from ._workers import WorkerInfo, get_worker_info
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
    "random_split", "DataLoader", "default_collate", "default_convert", "Sampler", "SequentialSampler",
    "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler",
    "get_worker_info", "WorkerInfo",
]  # fmt: skip
