"""`nn.utils.rnn` and the recurrent layers on packed input against PyTorch: the cases of
tests/packed_cases.py compared with tests/fixtures/packed (made by
tools/make_fixtures_packed.py), then what the fixture cannot show (bad input)."""

from __future__ import annotations

import pytest

import candle_py as cp
from fixture_cases import check_case, load_fixture
from packed_cases import CASES

META, ARRAYS = load_fixture("packed")


@pytest.mark.parametrize("cid", list(CASES))
def test_case(cid: str) -> None:
    check_case(CASES, cid, META, ARRAYS)


def test_bad_input_names_the_function() -> None:
    U = cp.nn.utils.rnn
    with pytest.raises(ValueError, match="pack_padded_sequence: expected 2 lengths"):
        U.pack_padded_sequence(cp.zeros(3, 2, 1), [3])
    with pytest.raises(ValueError, match="pack_padded_sequence: a length"):
        U.pack_padded_sequence(cp.zeros(3, 2, 1), [4, 1])
    with pytest.raises(TypeError, match="pad_packed_sequence"):
        U.pad_packed_sequence(cp.zeros(3))
    with pytest.raises(TypeError, match="must be Tensor or PackedSequence"):
        cp.nn.LSTM(1, 2)([1.0, 2.0])


def test_packed_sequence_to_and_casts() -> None:
    pk = cp.nn.utils.rnn.pack_sequence([cp.ones(3, 2), cp.ones(1, 2)])
    assert pk.to(cp.float64).data.dtype == cp.float64 and pk.double().data.dtype == cp.float64
    assert pk.cpu() is pk and not pk.is_cuda and pk.batch_sizes.tolist() == [2, 1, 1]
    assert isinstance(pk, tuple) and pk._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")


def test_lstm_takes_hx_as_a_list() -> None:
    # yunjey/pytorch-tutorial's language model passes [h.detach(), c.detach()]; torch indexes hx
    cp.manual_seed(0)
    m = cp.nn.LSTM(3, 4, batch_first=True)
    x, h, c = cp.randn(2, 5, 3), cp.randn(1, 2, 4), cp.randn(1, 2, 4)
    out_t, (hn_t, cn_t) = m(x, (h, c))
    out_l, (hn_l, cn_l) = m(x, [h, c])
    assert out_l.equal(out_t) and hn_l.equal(hn_t) and cn_l.equal(cn_t)
