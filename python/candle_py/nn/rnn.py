"""Recurrent layers: `RNN`, `LSTM`, `GRU` and their cells, with PyTorch's parameter
names (`weight_ih_l{k}[_reverse]`, ...), gate order and initialisation.

Per direction and layer: one matmul projects the input of every step, then one core
call (`_core._rnn_scan`) runs the time loop, forward and backward through time, in
Rust. A cell is the same call over one step."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple, Union

from .. import _autocast, _core
from .._core import ShapeError, Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from .utils import rnn as rnn_utils

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

# A layer's input: a padded batch, or a packed one (output of the same kind).
_Input = Union[Tensor, "rnn_utils.PackedSequence"]


def _scan(
    mode: str, xp: Tensor, h: Tensor, c: Optional[Tensor], w_hh: Tensor, b_hh: Optional[Tensor], reverse: bool = False
) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    """Every step of one direction in one call (`_core._rnn_scan`: a fused kernel
    forward and backward through time); `xp` (steps, batch, gates * hidden) is the
    input projection of all steps. Returns every step's h, the last h and the last c."""
    return _core._rnn_scan(mode, xp, h, c, w_hh, b_hh, reverse)


def _elman_mode(nonlinearity: str) -> str:
    """`_rnn_scan`'s mode of an Elman cell with this nonlinearity."""
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class _RNNBase(Module):
    """Shared parameter layout and the layer loop; the time loop is `_core._rnn_scan`."""

    _gates = 1
    _mode = ""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = self._mode
        for k, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"[{name}] '{k}' must be a positive integer, got {v!r}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"[{name}] dropout must be in [0, 1], got {dropout}")
        if proj_size:
            raise ValueError(f"[{name}] proj_size is not supported by candle_py")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout, self.bidirectional = bias, batch_first, float(dropout), bidirectional
        self.proj_size = 0
        dirs = 2 if bidirectional else 1
        g = self._gates * hidden_size
        dt = dtype or _core.get_default_dtype()
        self._flat_names: List[str] = []
        for layer in range(num_layers):
            for d in range(dirs):
                suffix = f"_l{layer}" + ("_reverse" if d == 1 else "")
                in_size = input_size if layer == 0 else hidden_size * dirs
                params: List[Tuple[str, Tuple[int, ...]]] = [("weight_ih" + suffix, (g, in_size)), ("weight_hh" + suffix, (g, hidden_size))]
                if bias:
                    params += [("bias_ih" + suffix, (g,)), ("bias_hh" + suffix, (g,))]
                for pname, shape in params:
                    setattr(self, pname, Parameter(_core.empty(*shape, dtype=dt, device=device)))
                    self._flat_names.append(pname)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _run_direction(
        self, xs: Tensor, h: Tensor, c: Optional[Tensor], suffix: str, reverse: bool, lengths: Optional[List[int]] = None
    ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        if lengths is not None:
            return self._run_packed(xs, h, c, suffix, reverse, lengths)
        w_ih = getattr(self, "weight_ih" + suffix)
        w_hh = getattr(self, "weight_hh" + suffix)
        b_ih = getattr(self, "bias_ih" + suffix) if self.bias else None
        b_hh = getattr(self, "bias_hh" + suffix) if self.bias else None
        mode = self._scan_mode()
        if b_ih is not None and b_hh is not None and mode != "GRU":
            # The two biases meet in the same sum (GRU's do not: r scales b_hn alone), so
            # they are added once, per step in the gate pass, and the projection is a
            # plain product: a bias under every row of it was an extra pass.
            return _scan(mode, F.linear(xs, w_ih), h, c, w_hh, b_ih + b_hh, reverse)
        return _scan(mode, F.linear(xs, w_ih, b_ih), h, c, w_hh, b_hh, reverse)

    def _run_packed(
        self, xs: Tensor, h: Tensor, c: Optional[Tensor], suffix: str, reverse: bool, lengths: List[int]
    ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        """One direction over a padded batch sorted by decreasing `lengths`: each stretch
        of time with a fixed set of live sequences is one scan of those rows, so a
        sequence's state stops at its last step (and, backwards, starts there)."""
        runs = list(rnn_utils._runs(lengths))
        steps, batch = int(xs.shape[0]), int(xs.shape[1])
        outs: List[Optional[Tensor]] = [None] * len(runs)
        for k in reversed(range(len(runs))) if reverse else range(len(runs)):
            start, stop, alive = runs[k]
            seg_c = None if c is None else c[:alive]
            out, h_a, c_a = self._run_direction(xs[start:stop, :alive], h[:alive], seg_c, suffix, reverse)
            h = h_a if alive == batch else _core.cat([h_a, h[alive:]], 0)
            if c is not None and c_a is not None:
                c = c_a if alive == batch else _core.cat([c_a, c[alive:]], 0)
            if alive < batch:
                out = _core.cat([out, _core.zeros(stop - start, batch - alive, out.shape[2], dtype=out.dtype, device=out.device)], 1)
            outs[k] = out
        parts = [o for o in outs if o is not None]
        if steps > runs[-1][1]:
            parts.append(_core.zeros(steps - runs[-1][1], batch, parts[0].shape[2], dtype=parts[0].dtype, device=parts[0].device))
        return _core.cat(parts, 0), h, c

    def _scan_mode(self) -> str:
        return self._mode

    def forward(self, input: Any, hx: Any = None) -> Tuple[Any, Any]:
        # PyTorch's autocast does not cast the RNN layers; ours are composed from
        # linear, which autocast would cast, so they run with autocast off.
        with _autocast.disabled():
            if isinstance(input, rnn_utils.PackedSequence):
                return self._forward_packed(input, hx)
            if not isinstance(input, Tensor):
                raise TypeError(f"[{self._mode}] forward(): argument 'input' must be Tensor or PackedSequence, not {type(input).__name__}")
            return self._forward(input, hx)

    def _forward_packed(self, packed: "rnn_utils.PackedSequence", hx: Any) -> Tuple[Any, Any]:
        """A `PackedSequence` in, one out (same `batch_sizes` and indices); `hx` and the
        final states are in the batch's original order, as PyTorch's."""
        lengths = rnn_utils._sorted_lengths(packed.batch_sizes)
        padded = rnn_utils._unpack(packed.data, lengths, lengths[0], 0.0)
        if hx is not None and packed.sorted_indices is not None:
            idx = packed.sorted_indices
            hx = tuple(t.index_select(1, idx) for t in hx) if isinstance(hx, (tuple, list)) else hx.index_select(1, idx)
        out, state = self._forward(padded, hx, lengths)
        rows = _core.tensor(rnn_utils._packed_rows(lengths, len(lengths)).tolist(), dtype=_core.int64, device=out.device)
        data = out.reshape(-1, out.shape[2]).index_select(0, rows)
        if packed.unsorted_indices is not None:
            idx = packed.unsorted_indices
            state = tuple(t.index_select(1, idx) for t in state) if isinstance(state, tuple) else state.index_select(1, idx)
        return type(packed)(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices), state

    def _forward(self, input: Tensor, hx: Any, lengths: Optional[List[int]] = None) -> Tuple[Tensor, Any]:
        name = self._mode
        if input.ndim not in (2, 3):
            raise ShapeError(f"[{name}] expected 2-D (L, H_in) or 3-D input, got shape {list(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"[{name}] expected input with last dimension {self.input_size} (input_size), got {list(input.shape)}")
        unbatched = input.ndim == 2
        batch_first = self.batch_first and lengths is None  # packed input is time-major
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if batch_first else input)
        batch = x.shape[1]
        dirs = 2 if self.bidirectional else 1
        h0, c0 = self._initial(hx, batch, dirs, unbatched, x)
        h_n: List[Tensor] = []
        c_n: List[Tensor] = []
        layer_in = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                idx = layer * dirs + d
                suffix = f"_l{layer}" + ("_reverse" if d == 1 else "")
                out, h, c = self._run_direction(layer_in, h0[idx], None if c0 is None else c0[idx], suffix, d == 1, lengths)
                outs.append(out)
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            layer_in = outs[0] if dirs == 1 else _core.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_in = F.dropout(layer_in, self.dropout, True)
        output = layer_in
        hn = _core.stack(h_n, 0)
        cn = _core.stack(c_n, 0) if c_n else None
        if unbatched:
            output, hn = output.squeeze(1), hn.squeeze(1)
            cn = cn.squeeze(1) if cn is not None else None
        elif batch_first:
            output = output.transpose(0, 1)
        return output, ((hn, cn) if cn is not None else hn)

    def _initial(self, hx: Any, batch: int, dirs: int, unbatched: bool, x: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        shape = (self.num_layers * dirs, batch, self.hidden_size)
        zeros = _core.zeros(*shape, dtype=x.dtype, device=x.device)
        if hx is None:
            return zeros, (zeros if self._gates == 4 else None)
        pair = tuple(hx) if isinstance(hx, (tuple, list)) else (hx, None)  # torch indexes hx: a list works too
        h0, c0 = pair
        if unbatched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1) if c0 is not None else None
        if tuple(h0.shape) != shape:
            raise ShapeError(f"[{self._mode}] expected hidden state of shape {list(shape)}, got {list(h0.shape)}")
        return h0, c0

    def flatten_parameters(self) -> None:
        """A no-op, kept for PyTorch code that calls it: in PyTorch it packs the
        weights into one contiguous cuDNN buffer; candle_py has no such layout."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN: `h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)` with `act`
    tanh or relu (`nonlinearity`); layers, bidirectional, batch_first and
    inter-layer dropout as LSTM/GRU."""

    _gates = 1
    _mode = "RNN"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def _scan_mode(self) -> str:
        return _elman_mode(self.nonlinearity)

    def forward(self, input: _Input, hx: Optional[Tensor] = None) -> Tuple[Any, Tensor]:  # type: ignore[override]
        """Run the RNN over `input` (L, N, H_in), (N, L, H_in) with `batch_first`, or
        unbatched (L, H_in); `hx` defaults to zeros. Returns the output and the final hidden state."""
        return super().forward(input, hx)  # type: ignore[return-value]


class LSTM(_RNNBase):
    """Long short-term memory; gates in PyTorch's order (input, forget, cell, output)."""

    _gates = 4
    _mode = "LSTM"

    def forward(self, input: _Input, hx: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Any, Tuple[Tensor, Tensor]]:  # type: ignore[override]
        """Run the LSTM over `input` (L, N, H_in), (N, L, H_in) with `batch_first`, or
        unbatched (L, H_in); `hx = (h0, c0)` defaults to zeros. Returns the output
        (top layer's h at every step) and the final `(h_n, c_n)`."""
        return super().forward(input, hx)  # type: ignore[return-value]


class GRU(_RNNBase):
    """Gated recurrent unit; gates in PyTorch's order (reset, update, new)."""

    _gates = 3
    _mode = "GRU"

    def forward(self, input: _Input, hx: Optional[Tensor] = None) -> Tuple[Any, Tensor]:  # type: ignore[override]
        """Run the GRU over `input` (L, N, H_in), (N, L, H_in) with `batch_first`, or
        unbatched (L, H_in); `hx` defaults to zeros. Returns the output and the final hidden state."""
        return super().forward(input, hx)  # type: ignore[return-value]


class _RNNCellBase(Module):
    """One step of a recurrent layer: parameters `weight_ih`, `weight_hh`, `bias_ih`,
    `bias_hh` (PyTorch's names and U(-1/sqrt(H), 1/sqrt(H)) init)."""

    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        for k, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"[{name}] '{k}' must be a positive integer, got {v!r}")
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        g = self._gates * hidden_size
        dt = dtype or _core.float32
        self.weight_ih = Parameter(_core.empty(g, input_size, dtype=dt, device=device))
        self.weight_hh = Parameter(_core.empty(g, hidden_size, dtype=dt, device=device))
        if bias:
            self.bias_ih: Optional[Parameter] = Parameter(_core.empty(g, dtype=dt, device=device))
            self.bias_hh: Optional[Parameter] = Parameter(_core.empty(g, dtype=dt, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _prepare(self, input: Tensor, hx: Optional[Tensor], what: str = "hx") -> Tuple[Tensor, Tensor, bool]:
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{name}: input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            h = _core.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
        else:
            if hx.ndim != input.ndim:
                raise ValueError(f"{name}: Expected {what} to be {input.ndim}D, got {hx.ndim}D instead")
            h = hx.unsqueeze(0) if unbatched else hx
            if tuple(h.shape) != (x.shape[0], self.hidden_size):
                raise ShapeError(f"{name}: expected {what} of shape {[x.shape[0], self.hidden_size]}, got {list(hx.shape)}")
        return x, h, unbatched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(_RNNCellBase):
    """One Elman RNN step: `h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`, `act` tanh or relu."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device: Any = None, dtype: Any = None
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        """The next hidden state for input (N, H_in) or (H_in,); `hx` defaults to zeros."""
        x, h, unbatched = self._prepare(input, hx)
        xp = F.linear(x, self.weight_ih, self.bias_ih).unsqueeze(0)
        _, out, _ = _scan(_elman_mode(self.nonlinearity), xp, h, None, self.weight_hh, self.bias_hh)
        return out.squeeze(0) if unbatched else out


class LSTMCell(_RNNCellBase):
    """One LSTM step; returns `(h', c')`."""

    _gates = 4

    def forward(self, input: Tensor, hx: Optional[Tuple[Tensor, Tensor]] = None) -> Tuple[Tensor, Tensor]:
        """The next `(h, c)` for input (N, H_in) or (H_in,); `hx = (h, c)` defaults to zeros."""
        h0, c0 = (None, None) if hx is None else hx
        x, h, unbatched = self._prepare(input, h0, "hx[0]")
        _, c, _ = self._prepare(input, c0, "hx[1]")
        _, h, cn = _scan("LSTM", F.linear(x, self.weight_ih, self.bias_ih).unsqueeze(0), h, c, self.weight_hh, self.bias_hh)
        assert cn is not None
        return (h.squeeze(0), cn.squeeze(0)) if unbatched else (h, cn)


class GRUCell(_RNNCellBase):
    """One GRU step; returns `h'`."""

    _gates = 3

    def forward(self, input: Tensor, hx: Optional[Tensor] = None) -> Tensor:
        """The next hidden state for input (N, H_in) or (H_in,); `hx` defaults to zeros."""
        x, h, unbatched = self._prepare(input, hx)
        _, out, _ = _scan("GRU", F.linear(x, self.weight_ih, self.bias_ih).unsqueeze(0), h, None, self.weight_hh, self.bias_hh)
        return out.squeeze(0) if unbatched else out
