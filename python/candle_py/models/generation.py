"""Sampling and streamed generation for causal language models (`models.llama`).

The logits processors follow transformers' order and definitions: repetition
penalty (CTRL's: a seen token's positive logit divided by the penalty, a negative
one multiplied), then temperature, top-k, top-p (nucleus). Each is a few tensor ops
on the (vocab,) logits; draws come from a `cp.Generator`, so a seed reproduces a run.

`generate(model, prompt_ids, ...)` runs the prompt once through a `KVCache`
(prefill), then one token per step (decode), yielding each new id as it comes; its
`TokenStream` keeps the first position's logits and the prefill / decode timings.
"""

from __future__ import annotations

import math
import time
from typing import Any, Iterable, List, Optional, Sequence

from .. import _core
from .._core import Generator, Tensor
from ..autograd import no_grad
from ..nn import functional as F

__all__ = ["apply_repetition_penalty", "apply_temperature", "top_k_filter", "top_p_filter", "Sampler", "TokenStream", "generate"]

_NEG_INF = float("-inf")


def _check_logits(op: str, logits: Any) -> Tensor:
    if not isinstance(logits, Tensor) or logits.ndim != 1 or not logits.dtype.is_floating_point:
        raise ValueError(f"{op}: expected 1-d float logits, got {logits!r:.60}")
    return logits


def apply_repetition_penalty(logits: Tensor, previous: Iterable[int], penalty: float) -> Tensor:
    """Logits with each token of `previous` made less likely (penalty > 1): a positive
    logit divided by `penalty`, a negative one multiplied (CTRL, as transformers)."""
    op = "apply_repetition_penalty"
    _check_logits(op, logits)
    if not (isinstance(penalty, (int, float)) and penalty > 0 and math.isfinite(penalty)):
        raise ValueError(f"{op}: penalty must be a positive number, got {penalty!r}")
    if penalty == 1.0:
        return logits
    seen = sorted(set(int(i) for i in previous))
    if not seen:
        return logits
    if seen[0] < 0 or seen[-1] >= logits.shape[0]:
        raise ValueError(f"{op}: token id {seen[0] if seen[0] < 0 else seen[-1]} is outside the {logits.shape[0]} logits")
    idx = _core.tensor(seen)
    got = logits[idx]
    out = logits.clone()
    out[idx] = _core.where(got > 0, got / penalty, got * penalty)
    return out


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """`logits / temperature` (temperature > 0)."""
    _check_logits("apply_temperature", logits)
    if not (isinstance(temperature, (int, float)) and temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"apply_temperature: temperature must be positive, got {temperature!r}")
    return logits if temperature == 1.0 else logits / temperature


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Logits outside the `k` largest set to -inf (ties with the k-th kept, as transformers)."""
    _check_logits("top_k_filter", logits)
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f"top_k_filter: k must be a positive int, got {k!r}")
    if k >= logits.shape[0]:
        return logits
    kth = logits.topk(k)[0][k - 1]
    return logits.masked_fill(logits < kth, _NEG_INF)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Logits outside the nucleus set to -inf: the most likely tokens whose probabilities,
    taken in decreasing order, first reach a total of `p` (0 < p <= 1); the most likely
    token always stays."""
    _check_logits("top_p_filter", logits)
    if not (isinstance(p, (int, float)) and 0 < p <= 1):
        raise ValueError(f"top_p_filter: p must be in (0, 1], got {p!r}")
    if p == 1:
        return logits
    ordered, order = logits.sort(descending=True)
    probs = F.softmax(ordered, dim=0)
    # Mass strictly before each token: a token stays while that is below p.
    before = probs.cumsum(0) - probs
    drop = order[before >= p]
    out = logits.clone()
    out[drop] = _NEG_INF
    return out


class Sampler:
    """Picks the next token from (vocab,) logits.

    `greedy=True` (or `temperature=0`) takes the argmax. Otherwise: repetition
    penalty, temperature, top-k, top-p, then a draw from the softmax with
    `generator` (or a fresh one seeded with `seed`; or the default generator).
    `repetition_penalty` applies in greedy mode too. Bad values raise ValueError."""

    def __init__(
        self,
        greedy: bool = False,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        repetition_penalty: float = 1.0,
        seed: Optional[int] = None,
        generator: Optional[Generator] = None,
    ) -> None:
        if not isinstance(temperature, (int, float)) or not temperature >= 0 or not math.isfinite(temperature):
            raise ValueError(f"Sampler: temperature must be >= 0, got {temperature!r}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
            raise ValueError(f"Sampler: top_k must be a non-negative int (0: off), got {top_k!r}")
        if top_p is not None and not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise ValueError(f"Sampler: top_p must be in (0, 1], got {top_p!r}")
        if not (isinstance(repetition_penalty, (int, float)) and repetition_penalty > 0 and math.isfinite(repetition_penalty)):
            raise ValueError(f"Sampler: repetition_penalty must be positive, got {repetition_penalty!r}")
        if seed is not None and generator is not None:
            raise ValueError("Sampler: give seed or generator, not both")
        self.greedy = bool(greedy) or temperature == 0
        self.temperature, self.top_k, self.top_p = float(temperature), top_k or None, top_p
        self.repetition_penalty = float(repetition_penalty)
        if seed is not None:
            generator = Generator()
            generator.manual_seed(int(seed))
        self.generator = generator

    def process(self, logits: Tensor, previous: Sequence[int] = ()) -> Tensor:
        """The logits after the penalty, temperature, top-k and top-p (-inf where filtered)."""
        logits = apply_repetition_penalty(logits, previous, self.repetition_penalty)
        if self.greedy:
            return logits
        logits = apply_temperature(logits, self.temperature)
        if self.top_k is not None:
            logits = top_k_filter(logits, self.top_k)
        if self.top_p is not None:
            logits = top_p_filter(logits, self.top_p)
        return logits

    def __call__(self, logits: Tensor, previous: Sequence[int] = ()) -> int:
        """The next token id for the (vocab,) `logits`, after the tokens `previous`."""
        logits = self.process(_check_logits("Sampler", logits).float(), previous)
        if self.greedy:
            return int(logits.argmax().item())
        probs = F.softmax(logits, dim=0)
        return int(_core.multinomial(probs, 1, generator=self.generator).item())


class TokenStream:
    """The ids `generate` produces, one per `next()`. After the first one,
    `first_logits` holds the (vocab,) float32 logits it was drawn from;
    `prefill_seconds`, `decode_seconds` and `decode_steps` time the two phases."""

    def __init__(self, model: Any, prompt_ids: Sequence[int], max_new_tokens: int, sampler: Sampler, stop_ids: Iterable[int]) -> None:
        self.model, self.sampler = model, sampler
        self.prompt_ids = [int(i) for i in prompt_ids]
        self.generated: List[int] = []
        self.max_new_tokens, self.stop_ids = max_new_tokens, frozenset(stop_ids)
        self.first_logits: Optional[Tensor] = None
        self.prefill_seconds = self.decode_seconds = 0.0
        self.decode_steps = 0
        self.cache = model.new_cache()
        self._done = max_new_tokens == 0
        self._next_input: Optional[Tensor] = None

    def __iter__(self) -> "TokenStream":
        return self

    def __next__(self) -> int:
        if self._done:
            raise StopIteration
        t0 = time.perf_counter()
        with no_grad():
            if self._next_input is None:
                logits = self.model(_core.tensor([self.prompt_ids]), self.cache, last_only=True)[0, -1]
                self.first_logits = logits
            else:
                logits = self.model(self._next_input, self.cache)[0, -1]
            tok = self.sampler(logits, self.prompt_ids + self.generated)
        dt = time.perf_counter() - t0
        if self._next_input is None:
            self.prefill_seconds = dt
        else:
            self.decode_seconds += dt
            self.decode_steps += 1
        self.generated.append(tok)
        self._next_input = _core.tensor([[tok]])
        if tok in self.stop_ids or len(self.generated) >= self.max_new_tokens:
            self._done = True
        return tok

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prompt tokens per second of the prefill (0 before it ran)."""
        return len(self.prompt_ids) / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """New tokens per second of the decode steps (each after the first; 0 before any)."""
        return self.decode_steps / self.decode_seconds if self.decode_seconds else 0.0


def generate(
    model: Any,
    prompt_ids: Sequence[int],
    max_new_tokens: int = 64,
    sampler: Optional[Sampler] = None,
    stop_ids: Iterable[int] = (),
    ignore_eos: bool = False,
) -> TokenStream:
    """New token ids after `prompt_ids`, as an iterator (`TokenStream`) yielding each as it
    is produced: the prompt runs once through a key/value cache, then one token per step.
    Stops after `max_new_tokens`, or after a token of `stop_ids` (yielded) unless
    `ignore_eos`. `sampler` defaults to greedy."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    if len(prompt_ids) == 0:
        raise ValueError("generate: the prompt has no tokens")
    vocab = model.config.vocab_size
    bad = [i for i in prompt_ids if not 0 <= int(i) < vocab]
    if bad:
        raise ValueError(f"generate: prompt token id {bad[0]} is outside the vocabulary of {vocab}")
    return TokenStream(model, prompt_ids, max_new_tokens, sampler or Sampler(greedy=True), () if ignore_eos else stop_ids)
