"""Cases of `nn.utils.rnn` (packed and padded variable-length batches) and of the
recurrent layers on packed input, written once against the PyTorch API (`lib` is
`torch` or `candle_py`): `tools/make_fixtures_packed.py` runs them on torch into
tests/fixtures/packed/, `tests/test_packed.py` on candle_py and compares."""

from __future__ import annotations

from typing import Any, Dict

from fixture_cases import Cases
from usage_cases import _err, _r

CASES = Cases()
case = CASES.case

LENGTHS = [3, 6, 1, 6, 4]  # unsorted, with a tie and a length-1 sequence


def _U(lib: Any) -> Any:
    return lib.nn.utils.rnn


def _fixed_weights(lib: Any, m: Any) -> None:
    """Deterministic parameters (the libraries' initial draws differ)."""
    with lib.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_((lib.arange(p.numel(), dtype=lib.float32) * 0.37 + i).sin().reshape(p.shape) * 0.5)


@case()
def pack_and_pad(lib: Any) -> Dict[str, Any]:
    U = _U(lib)
    x = _r(lib, 6, 5, 3, grad=True)
    pk = U.pack_padded_sequence(x, LENGTHS, enforce_sorted=False)
    pad, lens = U.pad_packed_sequence(pk, padding_value=-1.0, total_length=8)
    pad_bf, _ = U.pad_packed_sequence(pk, batch_first=True)
    (pad * lib.arange(1.0, 6.0).reshape(1, 5, 1)).sum().backward()
    srt = U.pack_padded_sequence(x.detach()[:, [1, 3, 4, 0, 2]], lib.tensor([6, 6, 4, 3, 1]))
    bf = U.pack_padded_sequence(x.detach().transpose(0, 1), lib.tensor(LENGTHS), batch_first=True, enforce_sorted=False)
    return {
        "data": pk.data,
        "batch_sizes": pk.batch_sizes,
        "sorted": pk.sorted_indices,
        "unsorted": pk.unsorted_indices,
        "pad": pad,
        "lens": lens,
        "pad_bf": pad_bf,
        "gx": x.grad,
        "sorted_data": srt.data,
        "sorted_none": srt.sorted_indices is None and srt.unsorted_indices is None,
        "bf_data": bf.data,
        "unpacked": U.unpack_sequence(pk),
        "unpadded": U.unpad_sequence(pad_bf, lens, batch_first=True),
        "inverse": U.invert_permutation(lib.tensor([2, 0, 3, 1])),
        "err_unsorted": _err(lambda: U.pack_padded_sequence(x, LENGTHS)),
        "err_zero": _err(lambda: U.pack_padded_sequence(x, [3, 0, 1, 6, 4], enforce_sorted=False)),
        "err_total": _err(lambda: U.pad_packed_sequence(pk, total_length=5)),
    }


@case()
def pad_sequence_forms(lib: Any) -> Dict[str, Any]:
    U = _U(lib)
    seqs = [_r(lib, n, 2, seed=f"s{n}", grad=True) for n in (2, 4, 1)]
    right = U.pad_sequence(seqs)
    left = U.pad_sequence(seqs, batch_first=True, padding_value=7.0, padding_side="left")
    (right.sum() + 2 * left.sum()).backward()
    packed = U.pack_sequence([s.detach() for s in seqs], enforce_sorted=False)
    return {
        "right": right,
        "left": left,
        "g": [s.grad for s in seqs],
        "packed": packed.data,
        "packed_sizes": packed.batch_sizes,
        "err_sorted": _err(lambda: U.pack_sequence([s.detach() for s in seqs])),
        "err_side": _err(lambda: U.pad_sequence(seqs, padding_side="middle")),
    }


def _packed_layer(lib: Any, kind: str, bidirectional: bool, layers: int) -> Dict[str, Any]:
    U = _U(lib)
    m = getattr(lib.nn, kind)(3, 4, num_layers=layers, bidirectional=bidirectional)
    _fixed_weights(lib, m)
    x = _r(lib, 6, 5, 3, seed=kind, grad=True)
    dirs = 2 if bidirectional else 1
    h0 = _r(lib, layers * dirs, 5, 4, seed=kind + "h", grad=True)
    hx = (h0, h0 * 0.5) if kind == "LSTM" else h0
    out, state = m(U.pack_padded_sequence(x, LENGTHS, enforce_sorted=False), hx)
    pad, lens = U.pad_packed_sequence(out, batch_first=True)
    hn = state[0] if kind == "LSTM" else state
    loss = (pad * pad).sum() + 3 * hn.sum() + (2 * state[1].sum() if kind == "LSTM" else 0)
    loss.backward()
    res: Dict[str, Any] = {"pad": pad, "lens": lens, "hn": hn, "gx": x.grad, "gh0": h0.grad, "same_sizes": out.batch_sizes}
    if kind == "LSTM":
        res["cn"] = state[1]
    for n, p in m.named_parameters():
        res["g." + n] = p.grad
    return res


@case(tol=1e-4)
def lstm_packed(lib: Any) -> Dict[str, Any]:
    return _packed_layer(lib, "LSTM", True, 2)


@case(tol=1e-4)
def gru_packed(lib: Any) -> Dict[str, Any]:
    return _packed_layer(lib, "GRU", False, 2)


@case(tol=1e-4)
def rnn_packed(lib: Any) -> Dict[str, Any]:
    return _packed_layer(lib, "RNN", True, 1)


@case(tol=1e-4)
def packed_equals_one_by_one(lib: Any) -> Dict[str, Any]:
    """Each sequence run alone gives the packed run's outputs and final state."""
    U = _U(lib)
    m = lib.nn.LSTM(3, 4, batch_first=True)
    _fixed_weights(lib, m)
    seqs = [_r(lib, n, 3, seed=f"q{n}") for n in (5, 2, 4)]
    out, (hn, cn) = m(U.pack_sequence(seqs, enforce_sorted=False))
    alone = [m(s.unsqueeze(0))[1][0][0, 0] for s in seqs]
    return {"hn": hn, "alone": alone, "out": U.pad_packed_sequence(out, batch_first=True)[0]}
