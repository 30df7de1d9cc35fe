"""`candle_py.utils.data`: PyTorch's orders, batches, collation and argument
errors (tests/fixtures/random, made by tools/make_fixtures_random.py), and the
behaviour of the random samplers (laziness, seeding, coverage)."""

from __future__ import annotations

import itertools
import time
from typing import Any, Dict, Iterator, List

import pytest

import candle_py as cp
from candle_py.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)
from random_fixtures import cases, check, namespace

NS = namespace()


@pytest.mark.parametrize("case", cases("D"), ids=lambda c: c["expr"][:70])
def test_matches_torch(case: Dict[str, Any]) -> None:
    check(case, NS)


def test_module_paths() -> None:
    from candle_py.utils.data.dataloader import DataLoader as DL
    from candle_py.utils.data.dataloader import default_collate
    from candle_py.utils.data.dataset import ConcatDataset, Subset
    from candle_py.utils.data.distributed import DistributedSampler as DS
    from candle_py.utils.data.sampler import BatchSampler as BS

    assert DL is DataLoader and DS is DistributedSampler and BS is BatchSampler
    assert default_collate is cp.utils.data.default_collate
    assert issubclass(ConcatDataset, Dataset) and issubclass(Subset, Dataset)
    assert issubclass(RandomSampler, Sampler) and issubclass(IterableDataset, Dataset)


def test_huge_random_sampler_is_lazy() -> None:
    ds = TensorDataset(cp.arange(50))
    sampler = RandomSampler(ds, replacement=True, num_samples=int(1e10))  # minGPT's trainer
    assert len(sampler) == int(1e10)
    loader = DataLoader(ds, sampler=sampler, batch_size=8)
    assert len(loader) == int(1e10) // 8
    start = time.perf_counter()
    it = iter(loader)
    batches = [next(it) for _ in range(3)]
    assert time.perf_counter() - start < 2.0
    assert all(b[0].shape == (8,) and 0 <= min(b[0].tolist()) and max(b[0].tolist()) < 50 for b in batches)
    without = RandomSampler(range(10), num_samples=10**12)
    assert len(list(itertools.islice(iter(without), 25))) == 25


def test_random_sampler_seeding_and_coverage() -> None:
    def order(seed: int) -> List[int]:
        return list(RandomSampler(range(30), generator=cp.Generator().manual_seed(seed)))

    assert order(1) == order(1) and order(1) != order(2) and sorted(order(1)) == list(range(30))
    # without generator= each pass draws a fresh order from the default generator
    cp.manual_seed(3)
    s = RandomSampler(range(30))
    a, b = list(s), list(s)
    cp.manual_seed(3)
    assert a != b and list(s) == a
    # more samples than items: whole permutations, then a partial one
    many = list(RandomSampler(range(4), num_samples=10, generator=cp.Generator().manual_seed(0)))
    assert sorted(many[:4]) == sorted(many[4:8]) == [0, 1, 2, 3] and len(set(many[8:])) == 2
    rep = list(RandomSampler(range(3), replacement=True, num_samples=3000, generator=cp.Generator().manual_seed(0)))
    assert len(rep) == 3000 and set(rep) == {0, 1, 2} and all(800 < rep.count(k) < 1200 for k in range(3))


def test_subset_and_weighted_samplers() -> None:
    sub = list(SubsetRandomSampler([10, 20, 30, 40], generator=cp.Generator().manual_seed(0)))
    assert sorted(sub) == [10, 20, 30, 40]
    w = list(WeightedRandomSampler([1.0, 0.0, 3.0], 4000, generator=cp.Generator().manual_seed(0)))
    assert 1 not in w and 800 < w.count(0) < 1200
    nr = list(WeightedRandomSampler(cp.tensor([1.0, 5.0, 0.5]), 3, replacement=False))
    assert sorted(nr) == [0, 1, 2]
    a = list(WeightedRandomSampler([1.0, 2.0, 3.0], 20, generator=cp.Generator().manual_seed(9)))
    b = list(WeightedRandomSampler([1.0, 2.0, 3.0], 20, generator=cp.Generator().manual_seed(9)))
    assert a == b


def test_dataloader_generator_and_shuffle() -> None:
    ds = TensorDataset(cp.arange(40))

    def epoch(seed: int) -> List[int]:
        dl = DataLoader(ds, batch_size=7, shuffle=True, generator=cp.Generator().manual_seed(seed))
        return [i for (b,) in dl for i in b.tolist()]

    assert epoch(4) == epoch(4) and epoch(4) != epoch(5) and sorted(epoch(4)) == list(range(40))
    dl = DataLoader(ds, batch_size=7, shuffle=True, generator=cp.Generator().manual_seed(4))
    first, second = [b[0].tolist() for b in dl], [b[0].tolist() for b in dl]
    assert first != second  # the loader's generator advances between epochs
    assert isinstance(dl.sampler, RandomSampler) and isinstance(dl.batch_sampler, BatchSampler)
    assert dl.generator is not None


def test_random_split_generator() -> None:
    def split(seed: int) -> List[List[int]]:
        parts = random_split(TensorDataset(cp.arange(20)), [0.5, 0.25, 0.25], generator=cp.Generator().manual_seed(seed))
        return [[int(p[i][0].item()) for i in range(len(p))] for p in parts]

    a = split(1)
    assert a == split(1) and a != split(2)
    assert sorted(sum(a, [])) == list(range(20)) and [len(p) for p in a] == [10, 5, 5]


def test_distributed_sampler_shuffle_partitions() -> None:
    n, r = 23, 4
    parts: List[List[int]] = [list(DistributedSampler(range(n), num_replicas=r, rank=k, seed=7)) for k in range(r)]
    assert all(len(p) == 6 for p in parts)
    flat = sum(parts, [])
    assert set(flat) == set(range(n)) and len(flat) == 24  # one index repeated as padding
    again: List[List[int]] = [list(DistributedSampler(range(n), num_replicas=r, rank=k, seed=7)) for k in range(r)]
    assert again == parts
    s: DistributedSampler[int] = DistributedSampler(range(n), num_replicas=r, rank=0, seed=7)
    s.set_epoch(1)
    assert list(s) != parts[0] and s.epoch == 1
    dropped: List[List[int]] = [list(DistributedSampler(range(n), num_replicas=r, rank=k, drop_last=True)) for k in range(r)]
    assert all(len(p) == 5 for p in dropped) and len(set(sum(dropped, []))) == 20
    with pytest.raises(RuntimeError, match="distributed"):
        DistributedSampler(range(n))
    with pytest.raises(RuntimeError, match="distributed"):
        DistributedSampler(range(n), num_replicas=2)


class _Stream(IterableDataset[Dict[str, Any]]):
    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for i in range(5):
            yield {"x": cp.full((2,), float(i)), "i": i}


def test_iterable_dataset_batches() -> None:
    batches = list(DataLoader(_Stream(), batch_size=2))
    assert [b["i"].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    assert batches[0]["x"].shape == (2, 2)
    assert [b["i"].tolist() for b in DataLoader(_Stream(), batch_size=2, drop_last=True)] == [[0, 1], [2, 3]]
    with pytest.raises(TypeError):
        len(DataLoader(_Stream(), batch_size=2))  # no __len__, as in PyTorch


def test_tensor_dataset_fast_path_matches_collate() -> None:
    ds = TensorDataset(cp.arange(6).reshape(3, 2).float(), cp.tensor([1, 0, 1]))
    fast = next(iter(DataLoader(ds, batch_size=3)))
    slow = next(iter(DataLoader(ds, batch_size=3, collate_fn=cp.utils.data.default_collate)))
    assert isinstance(fast, list) and isinstance(slow, list)
    assert [t.tolist() for t in fast] == [t.tolist() for t in slow]
