"""Make the PyTorch reference fixtures for randomness and `torch.utils.data`.

Needs torch; tests/test_random.py and tests/test_data.py never import it. Random
values cannot match PyTorch's, so the fixtures hold what PyTorch makes
deterministic: sampler and batch orders, collated structures, shapes and dtypes,
degenerate draws (probabilities 0 and 1), and the exception type and message of
every refused argument. Each case is a Python expression over `T` (torch, or
candle_py in the tests), `D` (`T.utils.data`), `np`, and the helpers of `PRELUDE`;
tests/fixtures/random/cases.safetensors stores them in its metadata:
  {"cases": JSON list of {"expr", "ok": normalized value} or {"expr", "error": [type, message], "check_msg": bool}}
(`check_msg`: the message, up to its first 40 characters, must appear in ours).

Run from the repository root:  python tools/make_fixtures_random.py
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import torch
import torch.utils.data.distributed  # noqa: F401 - D.distributed in the cases
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "random")

# Helpers both libraries' runs define before evaluating the cases.
PRELUDE = """
import collections
P = collections.namedtuple("P", "x y")

class It(D.IterableDataset):
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        return iter(range(self.n))
    def __len__(self):
        return self.n
"""


def norm(v: Any) -> Any:
    """A JSON form of a result that keeps what the tests compare: tensor values and
    dtypes, list vs tuple vs namedtuple vs dict."""
    if hasattr(v, "tolist") and hasattr(v, "dtype") and not isinstance(v, np.ndarray):
        return {"tensor": v.tolist(), "dtype": str(v.dtype).split(".")[-1]}
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return {"namedtuple": type(v).__name__, "fields": [norm(x) for x in v]}
    if isinstance(v, tuple) and type(v).__name__ == "Size":
        return {"size": list(v)}
    if isinstance(v, (list, tuple)):
        return {type(v).__name__: [norm(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": {k: norm(x) for k, x in v.items()}}
    if type(v).__name__ == "dtype":
        return {"dtype": str(v).split(".")[-1]}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    raise TypeError(f"cannot normalize {type(v)}")


# Values: orders, batches, collated structures, degenerate draws.
VALUES = [
    # samplers
    "list(D.SequentialSampler(range(7)))",
    "list(D.BatchSampler(D.SequentialSampler(range(10)), 3, False))",
    "list(D.BatchSampler(D.SequentialSampler(range(10)), 3, True))",
    "list(D.BatchSampler(range(10), 5, True))",
    "list(D.BatchSampler(range(3), 11, False))",
    "list(D.BatchSampler(range(3), 11, True))",
    "len(D.BatchSampler(range(10), 3, False))",
    "len(D.BatchSampler(range(10), 3, True))",
    "list(D.WeightedRandomSampler([0, 0, 1.0], 3))",
    "sorted(D.WeightedRandomSampler([0, 1.0, 1.0, 0], 2, replacement=False))",
    "len(D.WeightedRandomSampler([1.0, 2.0], 5))",
    "sorted(D.SubsetRandomSampler([5, 1, 9]))",
    "sorted(D.RandomSampler(range(5)))",
    "len(list(D.RandomSampler(range(5), num_samples=12)))",
    "sorted(list(D.RandomSampler(range(3), num_samples=7))[:6])",
    "len(D.RandomSampler(range(5), replacement=True, num_samples=3))",
    "D.RandomSampler(range(4)).num_samples",
    # datasets
    "D.ConcatDataset([range(3), range(10, 14)])[4]",
    "D.ConcatDataset([range(3), range(10, 14)])[-1]",
    "D.ConcatDataset([range(3), range(10, 14)])[-7]",
    "D.ConcatDataset([range(3), range(0), range(10, 14)])[3]",
    "D.ConcatDataset([range(3), range(10, 14)]).cumulative_sizes",
    "len(D.ConcatDataset([range(3), range(10, 14)]))",
    "len(D.TensorDataset(T.zeros(4, 2)) + D.TensorDataset(T.ones(3, 2)))",
    "D.StackDataset(range(3), range(5, 8))[1]",
    "D.StackDataset(a=range(3), b=range(5, 8))[2]",
    "len(D.StackDataset(a=range(3), b=range(5, 8)))",
    "list(D.ChainDataset([It(2), It(3)]))",
    "len(D.ChainDataset([It(2), It(3)]))",
    "list(It(2) + It(3))",
    "D.Subset(range(10, 20), [3, 1])[1]",
    "D.Subset(D.TensorDataset(T.arange(10, 20)), [3, 1, 0])[[0, 2]]",
    "[len(s) for s in D.random_split(range(10), [0.5, 0.3, 0.2])]",
    "[len(s) for s in D.random_split(range(7), [0.33, 0.33, 0.34])]",
    "[len(s) for s in D.random_split(range(10), [7, 3])]",
    "sorted(sum((list(s) for s in D.random_split(range(6), [2, 4], generator=T.Generator().manual_seed(3))), []))",
    # distributed sampler without shuffling (the order PyTorch fixes)
    *[
        f"list(D.distributed.DistributedSampler(range({n}), num_replicas={r}, rank={k}, shuffle=False, drop_last={d}))"
        for n in (10, 11, 2)
        for r in (3, 4)
        for k in range(r)
        for d in (False, True)
    ],
    "len(D.distributed.DistributedSampler(range(11), num_replicas=4, rank=0, drop_last=True))",
    "len(D.distributed.DistributedSampler(range(11), num_replicas=4, rank=0))",
    # collation
    "D.default_collate([(1, 2.0), (3, 4.0)])",
    "D.default_collate([[1, 2.0], [3, 4.0]])",
    "D.default_collate([{'a': 1, 'b': [1.5, 2]}, {'a': 2, 'b': [3.5, 4]}])",
    "D.default_collate([T.tensor([1, 2]), T.tensor([3, 4])])",
    "D.default_collate([T.tensor(1.5), T.tensor(2.5)])",
    "D.default_collate([np.array([1.0, 2.0]), np.array([3.0, 4.0])])",
    "D.default_collate([np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)])",
    "D.default_collate([np.float32(1), np.float32(2)])",
    "D.default_collate([np.int64(1), np.int64(2)])",
    "D.default_collate([True, False])",
    "D.default_collate(['a', 'b'])",
    "D.default_collate([P(1, 2.0), P(3, 4.0)])",
    "D.default_collate([(np.array([1.0]), 'x'), (np.array([2.0]), 'y')])",
    "D.default_convert((np.array([1, 2]), 3))",
    "D.default_convert({'a': np.float64(1.5), 'b': 'x'})",
    "D.default_convert(P(np.array([1.0]), 2))",
    "D.dataloader.default_collate([1, 2])",
    # loading
    "list(D.DataLoader(range(7), batch_size=3))",
    "list(D.DataLoader(range(7), batch_size=3, drop_last=True))",
    "list(D.DataLoader(range(4), batch_size=None))",
    "len(D.DataLoader(range(7), batch_size=3))",
    "len(D.DataLoader(range(7), batch_size=3, drop_last=True))",
    "len(D.DataLoader(range(7), batch_size=None))",
    "list(D.DataLoader(range(10), batch_sampler=[[3, 1], [0]]))",
    "list(D.DataLoader(range(10), sampler=[4, 2, 2], batch_size=2))",
    "list(D.DataLoader(range(10), sampler=D.SubsetRandomSampler([4]), batch_size=2))",
    "list(D.DataLoader(It(7), batch_size=3))",
    "list(D.DataLoader(It(7), batch_size=3, drop_last=True))",
    "list(D.DataLoader(It(3), batch_size=None))",
    "len(D.DataLoader(It(7), batch_size=3))",
    "len(D.DataLoader(It(7), batch_size=3, drop_last=True))",
    "list(D.DataLoader(D.TensorDataset(T.arange(5), T.arange(5) * 2.0), batch_size=2))",
    "list(D.DataLoader([{'x': 1, 'y': (1.0, 'a')}, {'x': 2, 'y': (2.0, 'b')}], batch_size=2))",
    "list(D.DataLoader(range(5), batch_size=2, collate_fn=lambda b: sum(b)))",
    # degenerate draws and shapes/dtypes of the samplers
    "T.multinomial(T.tensor([0.0, 0, 5]), 3, True)",
    "sorted(T.multinomial(T.tensor([0.0, 2, 5, 0]), 2).tolist())",
    "T.multinomial(T.tensor([[0.0, 1], [1, 0]]), 1)",
    "T.multinomial(T.tensor([[0.0, 1], [1, 0]]), 3, replacement=True)",
    "T.multinomial(T.tensor([1.0, 0, 0]), 2).tolist()[0]",
    "T.multinomial(T.ones(0, 3), 1)",
    "T.multinomial(T.tensor([1.0, 2], dtype=T.float64), 1).dtype",
    "T.tensor([0.0, 3.0]).multinomial(4, True)",
    "T.bernoulli(T.tensor([0.0, 1, 1, 0]))",
    "T.bernoulli(T.tensor([0.0, 1], dtype=T.float64))",
    "T.bernoulli(T.zeros(3), 1.0)",
    "T.tensor([1.0, 0.0]).bernoulli()",
    "T.zeros(3, dtype=T.int64).bernoulli_(1.0)",
    "T.zeros(2, dtype=T.float64).bernoulli_(T.tensor([1.0, 0.0]))",
    "T.zeros(2, 2).bernoulli_(T.tensor([1.0, 0.0]))",
    "T.zeros(3, dtype=T.bool).bernoulli_(1.0)",
    "T.poisson(T.tensor([0.0, 0]))",
    "T.poisson(T.zeros(2, dtype=T.float64)).dtype",
    "T.zeros(3).random_(4, 5)",
    "T.zeros(3, dtype=T.int32).random_(7, 8)",
    "T.zeros(3, dtype=T.bool).random_(1, 2)",
    "T.zeros(3).random_(1)",
    "T.zeros(2, dtype=T.uint8).random_(255, 256)",
    "T.zeros(3).geometric_(1 - 1e-12).dtype",
    "T.zeros(3).exponential_().dtype",
    "T.zeros(3, dtype=T.float64).exponential_(2.0).dtype",
    "T.zeros(2).uniform_(3.0, 3.0)",
    "T.zeros(2).normal_(1.5, 0.0)",
    "T.normal(T.tensor([1.0, 2]), 0.0)",
    "T.normal(2.0, T.zeros(3))",
    "T.normal(1.0, 0.0, (2,))",
    "T.normal(T.zeros(3, 1), T.zeros(2)).shape",
    "T.normal(T.zeros(2, dtype=T.float64), T.zeros(2)).dtype",
    "T.normal(0.0, 1.0, (2, 3), dtype=T.float64).dtype",
    "T.normal(T.zeros(2, requires_grad=True), 1.0).requires_grad",
    "T.rand(2, 3, generator=T.Generator()).shape",
    "T.randn(4, generator=T.Generator(), dtype=T.float64).dtype",
    "T.rand_like(T.zeros(2), generator=T.Generator()).shape",
    "T.randn_like(T.zeros(2, dtype=T.float64), generator=T.Generator()).dtype",
    "sorted(T.randperm(6, generator=T.Generator().manual_seed(2)).tolist())",
    "T.randint(3, 4, (3,), generator=T.Generator())",
    "T.randint_like(T.zeros(3), 4, 5)",
    "T.randint_like(T.zeros(2, dtype=T.int32), 1)",
    "T.randint_like(T.zeros(2), 1, dtype=T.int64)",
    "T.randint_like(T.zeros(2, 2), 7, generator=T.Generator()).shape",
    "T.Generator().initial_seed()",
    "T.manual_seed(-1).initial_seed()",
    "T.manual_seed(-(2**63)).initial_seed()",
    "T.manual_seed(2**64 - 1).initial_seed()",
    "T.manual_seed(7.9).initial_seed()",
    "T.Generator().manual_seed(5).initial_seed()",
    "str(T.Generator().device)",
    "T.manual_seed(3) is T.default_generator",
    "T.get_rng_state().dtype",
    "T.cuda.manual_seed(0)",
    "T.cuda.manual_seed_all(0)",
    "T.cuda.seed_all()",
    "T.random.manual_seed(4).initial_seed()",
]

# Errors: (expression, whether the message must match, not only the type).
ERRORS = [
    ("T.multinomial(T.tensor([1.0, 0, 0]), 4)", True),
    ("T.multinomial(T.tensor([1.0, -1, 0]), 1)", True),
    ("T.multinomial(T.tensor([1.0, float('nan'), 0]), 1)", True),
    ("T.multinomial(T.tensor([1.0, float('inf'), 0]), 1)", True),
    ("T.multinomial(T.tensor([0.0, 0, 0]), 1)", True),
    ("T.multinomial(T.tensor([0.0, 0, 0]), 1, True)", True),
    ("T.multinomial(T.tensor([[1.0, 1], [0, 0]]), 1, True)", True),
    ("T.multinomial(T.tensor([1, 2]), 1)", True),
    ("T.multinomial(T.tensor([1.0, 2]), 0)", True),
    ("T.multinomial(T.tensor([1.0, 2]), -1)", True),
    ("T.multinomial(T.tensor(1.0), 1)", True),
    ("T.multinomial(T.ones(2, 2, 2), 1)", True),
    ("T.multinomial(T.ones(2, 0), 1)", True),
    ("T.bernoulli(T.tensor([1.5]))", True),
    ("T.bernoulli(T.tensor([-0.5]))", True),
    ("T.bernoulli(T.tensor([float('nan')]))", True),
    ("T.bernoulli(T.tensor([0.5]), 1.5)", True),
    ("T.bernoulli(T.tensor([1, 0]))", False),
    ("T.zeros(3).bernoulli_(1.5)", True),
    ("T.zeros(3).bernoulli_(-0.1)", True),
    ("T.zeros(3).bernoulli_(T.tensor([0.2, 2.0, 0.1]))", True),
    ("T.zeros(3).exponential_(-1)", True),
    ("T.zeros(3).exponential_(0)", True),
    ("T.zeros(3, dtype=T.int64).exponential_()", False),
    ("T.zeros(3).geometric_(0)", True),
    ("T.zeros(3).geometric_(1.5)", True),
    ("T.zeros(3).geometric_(1)", True),
    ("T.zeros(3).cauchy_(0, -1)", True),
    ("T.zeros(3).log_normal_(0, -1)", True),
    ("T.zeros(3).log_normal_(0, 0)", True),
    ("T.zeros(3).random_(5, 5)", True),
    ("T.zeros(3).random_(5, 3)", True),
    ("T.zeros(3).random_(-3)", True),
    ("T.zeros(3).random_(0)", True),
    ("T.zeros(3, dtype=T.uint8).random_(300)", False),
    ("T.zeros(3, dtype=T.uint8).random_(-1, 3)", False),
    ("T.zeros(3).normal_(0, -1)", True),
    ("T.zeros(3).uniform_(1, 0)", True),
    ("T.zeros(3, dtype=T.int64).uniform_()", False),
    ("T.zeros(3, dtype=T.int64).normal_()", False),
    ("T.normal(T.zeros(3), T.tensor([1, -1.0, 1]))", True),
    ("T.normal(0.0, -1.0, (3,))", True),
    ("T.normal(T.zeros(3), -1.0)", True),
    ("T.normal(-1.0, T.tensor([-1.0]))", True),
    ("T.normal(T.zeros(3, dtype=T.int64), 1.0)", False),
    ("T.poisson(T.tensor([-1.0]))", True),
    ("T.poisson(T.tensor([float('nan')]))", True),
    ("T.poisson(T.tensor([1, 2]))", False),
    ("T.randint_like(T.zeros(2), 3, 3)", False),
    ("T.manual_seed(2**64)", True),
    ("T.manual_seed(-(2**63) - 1)", True),
    ("T.Generator().manual_seed(2**64)", True),
    ("T.set_rng_state(T.zeros(3, dtype=T.uint8))", False),
    ("T.set_rng_state(T.zeros(5056))", False),
    ("T.Generator().set_state(T.zeros(3, dtype=T.uint8))", False),
    ("D.RandomSampler(range(3), replacement=1)", True),
    ("D.RandomSampler(range(3), num_samples=0)", True),
    ("D.RandomSampler(range(3), num_samples=-1)", True),
    ("D.RandomSampler([])", True),
    ("D.WeightedRandomSampler([1, 2], 0)", True),
    ("D.WeightedRandomSampler([1, 2], 2, replacement=1)", True),
    ("D.WeightedRandomSampler([[1, 2]], 2)", True),
    ("list(D.WeightedRandomSampler([1.0, 1], 3, replacement=False))", True),
    ("list(D.WeightedRandomSampler([-1.0, 1], 1))", True),
    ("list(D.WeightedRandomSampler([0.0, 0.0], 1))", True),
    ("D.BatchSampler(range(3), 0, False)", True),
    ("D.BatchSampler(range(3), True, False)", True),
    ("D.BatchSampler(range(3), 2, 1)", True),
    ("D.DataLoader(range(3), sampler=[0], shuffle=True)", True),
    ("D.DataLoader(range(3), batch_sampler=[[0]], batch_size=2)", True),
    ("D.DataLoader(range(3), batch_sampler=[[0]], shuffle=True)", True),
    ("D.DataLoader(range(3), batch_sampler=[[0]], sampler=[0])", True),
    ("D.DataLoader(range(3), batch_sampler=[[0]], drop_last=True)", True),
    ("D.DataLoader(range(3), batch_size=None, drop_last=True)", True),
    ("D.DataLoader(range(3), batch_size=0)", True),
    ("D.DataLoader(range(3), num_workers=-1)", True),
    ("D.DataLoader(range(3), timeout=-1)", True),
    ("D.DataLoader(range(3), prefetch_factor=2)", True),
    ("D.DataLoader(range(3), persistent_workers=True)", True),
    ("D.DataLoader(It(3), shuffle=True)", True),
    ("D.DataLoader(It(3), sampler=[0])", True),
    ("D.DataLoader(It(3), batch_sampler=[[0]])", True),
    ("D.distributed.DistributedSampler(range(3), num_replicas=2, rank=2)", True),
    ("D.distributed.DistributedSampler(range(3), num_replicas=2, rank=-1)", True),
    ("D.ConcatDataset([])", True),
    ("D.ConcatDataset([It(2)])", True),
    ("D.ConcatDataset([range(3)])[-4]", True),
    ("D.ConcatDataset([range(3)])[3]", False),
    ("list(D.ChainDataset([range(3)]))", True),
    ("len(D.ChainDataset([range(3)]))", True),
    ("D.StackDataset(range(2), a=range(2))", True),
    ("D.StackDataset(range(2), range(3))", True),
    ("D.random_split(range(10), [4, 4])", True),
    ("D.random_split(range(10), [1.5, -0.5])", True),
    ("D.default_collate([object()])", True),
    ("D.default_collate([[1, 2], [3]])", True),
    ("D.default_collate([np.array(['a'])])", False),
]


def run(expr: str, ns: dict) -> Any:
    return eval(expr, ns)  # noqa: S307 - the fixture's own expressions


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    ns: dict = {"T": torch, "D": torch.utils.data, "np": np}
    exec(PRELUDE, ns)  # noqa: S102
    torch.manual_seed(0)
    cases: list[dict] = []
    for expr in VALUES:
        cases.append({"expr": expr, "ok": norm(run(expr, ns))})
    for expr, check_msg in ERRORS:
        try:
            run(expr, ns)
        except Exception as e:  # noqa: BLE001 - recording whatever torch raises
            msg = str(e).splitlines()[0] if str(e) else ""
            cases.append({"expr": expr, "error": [type(e).__name__, msg], "check_msg": check_msg})
        else:
            raise SystemExit(f"torch accepted {expr!r}; expected an error")
    meta = {"cases": json.dumps(cases), "prelude": PRELUDE, "torch": torch.__version__}
    save_file({"marker": torch.zeros(1)}, os.path.join(OUT, "cases.safetensors"), metadata=meta)
    print(f"wrote {len(cases)} cases to {OUT}/cases.safetensors")


if __name__ == "__main__":
    main()
