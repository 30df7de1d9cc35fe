"""`candle_py.nn.utils.rnn`: variable-length batches for the recurrent layers, as
PyTorch's `torch.nn.utils.rnn` (`PackedSequence`, `pack_padded_sequence`,
`pad_packed_sequence`, `pad_sequence`, `pack_sequence`, `unpad_sequence`,
`unpack_sequence`, `invert_permutation`).

A `PackedSequence` holds the steps of a batch sorted by decreasing length, time-major:
`data` has the `batch_sizes[0]` first steps of every sequence, then the second steps of
those at least 2 long, and so on. Packing and unpacking are one `index_select` each
(differentiable), through an index built once from the lengths. `RNN`/`LSTM`/`GRU` take
a `PackedSequence` and run each stretch of time in which the set of live sequences is
fixed as one core scan (one call per distinct length), so a finished sequence's state
stops at its last step and its outputs are never computed past it.
"""

from __future__ import annotations

from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ... import _core
from ..._core import ShapeError, Tensor

__all__ = [
    "PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence",
    "unpad_sequence", "unpack_sequence", "invert_permutation",
]  # fmt: skip


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor]
    unsorted_indices: Optional[Tensor]


class PackedSequence(_PackedFields):
    """A batch of sequences of different lengths, packed (see the module docstring).

    `batch_sizes` (int64, CPU) counts the sequences alive at each step; `sorted_indices`
    maps the packed order to the original batch order (None when the batch was given
    sorted) and `unsorted_indices` is its inverse."""

    __slots__ = ()

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Optional[Tensor] = None,
        sorted_indices: Optional[Tensor] = None,
        unsorted_indices: Optional[Tensor] = None,
    ) -> "PackedSequence":
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required (build one with pack_padded_sequence or pack_sequence)")
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        """`data.to(...)`; the indices follow a device change, `batch_sizes` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        idx = [None if i is None else i.to(dev) for i in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, idx[0], idx[1])

    def cpu(self) -> "PackedSequence":
        """On the CPU."""
        return self.to("cpu")

    def cuda(self, device: Any = None) -> "PackedSequence":
        """On a CUDA device."""
        return self.to(device if device is not None else "cuda")

    def _cast(self, dtype: Any) -> "PackedSequence":
        return self.to(dtype=dtype)

    def double(self) -> "PackedSequence":
        """`data` as float64."""
        return self._cast(_core.float64)

    def float(self) -> "PackedSequence":
        """`data` as float32."""
        return self._cast(_core.float32)

    def half(self) -> "PackedSequence":
        """`data` as float16."""
        return self._cast(_core.float16)

    def long(self) -> "PackedSequence":
        """`data` as int64."""
        return self._cast(_core.int64)

    def int(self) -> "PackedSequence":
        """`data` as int32."""
        return self._cast(_core.int32)

    def short(self) -> "PackedSequence":
        """`data` as int16."""
        return self._cast(_core.int16)

    def byte(self) -> "PackedSequence":
        """`data` as uint8."""
        return self._cast(_core.uint8)

    @property
    def is_cuda(self) -> bool:
        """Whether `data` is on a CUDA device."""
        return bool(self.data.is_cuda)

    def is_pinned(self) -> bool:
        """Always False (candle_py pins no memory)."""
        return False


def invert_permutation(permutation: Optional[Tensor]) -> Optional[Tensor]:
    """The inverse of a permutation of `0..n` (None stays None)."""
    if permutation is None:
        return None
    out = _core.empty_like(permutation)
    out[permutation] = _core.arange(permutation.numel(), device=permutation.device)
    return out


def _lengths_list(lengths: Union[Tensor, Sequence[int]], batch: int) -> List[int]:
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1 or lengths.is_floating_point():
            raise ValueError(f"pack_padded_sequence: lengths must be a 1-D integer tensor, got {lengths.dtype} {list(lengths.shape)}")
        out = [int(v) for v in lengths.tolist()]
    else:
        out = [int(v) for v in lengths]
    if len(out) != batch:
        raise ValueError(f"pack_padded_sequence: expected {batch} lengths (the batch size), got {len(out)}")
    return out


def _packed_rows(sorted_lengths: Sequence[int], batch: int) -> np.ndarray:
    """Row `t * batch + b` of a (T, batch) grid for every packed element, in packed order."""
    steps = sorted_lengths[0]
    alive = np.arange(steps)[:, None] < np.asarray(sorted_lengths)[None, :]
    return np.flatnonzero(alive.reshape(-1))


def _batch_sizes(sorted_lengths: Sequence[int]) -> List[int]:
    ls = np.asarray(sorted_lengths)
    return [int((ls > t).sum()) for t in range(int(ls[0]))]


def pack_padded_sequence(
    input: Tensor, lengths: Union[Tensor, List[int]], batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch (T, B, *) ((B, T, *) with `batch_first`) of sequences of
    `lengths`; with `enforce_sorted=False` the batch is sorted by length first (and
    `unsorted_indices` restores its order)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim < 2:
        raise ShapeError(f"pack_padded_sequence: input must have at least 2 dims (time and batch), got {list(input.shape)}")
    x = input.transpose(0, 1) if batch_first else input
    steps, batch = int(x.shape[0]), int(x.shape[1])
    ls = _lengths_list(lengths, batch)
    if any(v <= 0 for v in ls):
        raise ValueError(
            "pack_padded_sequence: Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    sorted_indices: Optional[Tensor] = None
    if enforce_sorted:
        if any(a < b for a, b in zip(ls, ls[1:])):
            raise ValueError(
                "pack_padded_sequence: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
                "if you do not need ONNX exportability."
            )
    else:
        order = sorted(range(batch), key=lambda i: -ls[i])  # stable: equal lengths keep their order
        sorted_indices = _core.tensor(order, dtype=_core.int64, device=x.device)
        x = x.index_select(1, sorted_indices)
        ls = [ls[i] for i in order]
    if ls[0] > steps:
        raise ValueError(f"pack_padded_sequence: a length ({ls[0]}) exceeds the padded sequence length {steps}")
    rows = _core.tensor(_packed_rows(ls, batch).tolist(), dtype=_core.int64, device=x.device)
    data = x[: ls[0]].reshape(ls[0] * batch, *x.shape[2:]).index_select(0, rows)
    return PackedSequence(data, _core.tensor(_batch_sizes(ls), dtype=_core.int64), sorted_indices, None)


def _sorted_lengths(batch_sizes: Tensor) -> List[int]:
    """The sequence lengths (in packed order) of `batch_sizes`."""
    bs = np.asarray(batch_sizes.tolist(), dtype=np.int64)
    batch = int(bs[0]) if bs.size else 0
    return [int((bs > b).sum()) for b in range(batch)]


def _unpack(data: Tensor, sorted_lengths: Sequence[int], steps: int, padding_value: float) -> Tensor:
    """Packed `data` laid out as a padded (steps, batch, *) tensor, in packed order."""
    batch = len(sorted_lengths)
    rows = _packed_rows(sorted_lengths, batch)
    # every grid cell reads a packed row, padding cells the extra row holding padding_value
    src = np.full(steps * batch, rows.size, dtype=np.int64)
    src[rows] = np.arange(rows.size)
    pad = _core.full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    ext = _core.cat([data, pad], 0)
    idx = _core.tensor(src.tolist(), dtype=_core.int64, device=data.device)
    return ext.index_select(0, idx).reshape(steps, batch, *data.shape[1:])


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: Optional[int] = None
) -> Tuple[Tensor, Tensor]:
    """Unpack to a padded batch (T, B, *) ((B, T, *) with `batch_first`) in the original
    batch order, and the lengths (int64); `total_length` pads T further."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence(): argument 'sequence' must be PackedSequence, not {type(sequence).__name__}")
    ls = _sorted_lengths(sequence.batch_sizes)
    steps = ls[0] if ls else 0
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                f"Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {steps}"
            )
        steps = int(total_length)
    out = _unpack(sequence.data, ls, steps, padding_value)
    lengths = _core.tensor(ls, dtype=_core.int64)
    if sequence.unsorted_indices is not None:
        out = out.index_select(1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return (out.transpose(0, 1) if batch_first else out), lengths


def pad_sequence(
    sequences: Union[Tensor, List[Tensor]], batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Stack sequences of shapes (L_i, *) into (T, B, *) ((B, T, *) with `batch_first`),
    padded with `padding_value` on `padding_side` ("right" or "left") to the longest."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: Expected padding_side to be one of left or right, but got {padding_side}.")
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise ValueError("pad_sequence: received an empty list of sequences")
    for s in seqs:
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected a list of Tensors, found {type(s).__name__}")
        if s.ndim == 0 or tuple(s.shape[1:]) != tuple(seqs[0].shape[1:]):
            raise ShapeError(f"pad_sequence: sequences must share their trailing dims, got {list(seqs[0].shape)} and {list(s.shape)}")
    steps = max(int(s.shape[0]) for s in seqs)
    parts = []
    for s in seqs:
        n = steps - int(s.shape[0])
        if n == 0:
            parts.append(s)
            continue
        pad = _core.full((n, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
        parts.append(_core.cat([s, pad] if padding_side == "right" else [pad, s], 0))
    return _core.stack(parts, 0 if batch_first else 1)


def pack_sequence(sequences: List[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (L_i, *); sorted by decreasing length unless
    `enforce_sorted=False`."""
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths: Union[Tensor, List[int]], batch_first: bool = False) -> List[Tensor]:
    """The sequences of a padded batch, each cut to its length."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    ls = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [x[i, : int(n)] for i, n in enumerate(ls)]


def unpack_sequence(packed_sequences: PackedSequence) -> List[Tensor]:
    """The sequences of a packed batch, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def _runs(sorted_lengths: Sequence[int]) -> Iterable[Tuple[int, int, int]]:
    """`(start, stop, alive)` for each stretch of time in which the same `alive` first
    sequences (of a batch sorted by decreasing length) are running, earliest first."""
    start = 0
    for stop in sorted(set(sorted_lengths)):
        alive = sum(1 for v in sorted_lengths if v > start)
        yield start, stop, alive
        start = stop
