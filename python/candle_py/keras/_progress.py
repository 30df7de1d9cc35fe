"""Keras-style progress bar.

`4/4 ━━━━━━━━━━━━━━━━━━━━ 0s 3ms/step - loss: 0.1234 - accuracy: 0.9000`

On a terminal or in a Jupyter notebook the line is redrawn in place (`\\r`) as
batches finish; when output is not interactive (piped, CI logs, captured) only the
finished line is written, once, so a log holds one line per epoch.
"""

from __future__ import annotations

import sys
import time
from typing import Dict, Optional, TextIO

__all__ = ["Progbar", "is_interactive", "format_logs"]


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    try:
        ip = shell.get_ipython()  # type: ignore[attr-defined]
    except Exception:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def is_interactive(stream: Optional[TextIO] = None) -> bool:
    """True on a terminal or in a Jupyter notebook (where `\\r` redraws a line)."""
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return _in_notebook()


def _bar_chars(stream: TextIO) -> tuple[str, str]:
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        "━".encode(enc)
        return "━", "━"
    except (UnicodeEncodeError, LookupError):
        return "=", "."


def format_time(seconds: float) -> str:
    """Seconds as Keras prints an epoch's duration: `42s`, `3:07` or `1:02:03`."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}:{int(seconds % 60):02d}"
    if seconds >= 60:
        return f"{int(seconds // 60)}:{int(seconds % 60):02d}"
    return f"{int(seconds)}s"


def format_per_step(seconds: float) -> str:
    """Seconds per step as Keras prints them: `2s/step`, `35ms/step` or `120us/step`."""
    if seconds >= 1:
        return f"{seconds:.0f}s/step"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms/step"
    return f"{seconds * 1e6:.0f}us/step"


def format_logs(logs: Dict[str, float]) -> str:
    """Numeric logs as ` - name: value` segments (4 decimals, scientific below 1e-3); non-numbers are skipped."""
    parts = []
    for k, v in logs.items():
        try:
            fv = float(v)
        except (TypeError, ValueError):
            continue
        parts.append(f"{k}: {fv:.4f}" if abs(fv) >= 1e-3 or fv == 0 else f"{k}: {fv:.4e}")
    return "".join(" - " + p for p in parts)


class Progbar:
    """One epoch's bar. `verbose`: 0 silent, 1 bar (redrawn when interactive, one
    finished line otherwise), 2 one line at the end without the bar. `prefix` is put
    in front of the finished line when output is not interactive (`Epoch 1/3 - `)."""

    width = 20

    def __init__(
        self, target: Optional[int], verbose: int = 1, stream: Optional[TextIO] = None, prefix: str = "", interval: float = 0.05
    ) -> None:
        self.target, self.verbose, self.prefix, self.interval = target, verbose, prefix, interval
        self.stream = stream if stream is not None else sys.stdout
        self.interactive = verbose == 1 and is_interactive(self.stream)
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._last_len = 0
        self.seen = 0
        self.finished = False
        if self.verbose and self.interactive and prefix:
            self.stream.write(prefix.rstrip(" -") + "\n")
            self.stream.flush()

    def _bar(self, current: int) -> str:
        full, empty = _bar_chars(self.stream)
        if self.target:
            filled = int(self.width * min(current, self.target) / self.target)
            return full * filled + (empty * (self.width - filled) if full != empty else " " * (self.width - filled))
        return ""

    def _line(self, current: int, logs: Dict[str, float], final: bool, bar: bool = True) -> str:
        elapsed = time.perf_counter() - self.start
        per_step = elapsed / max(current, 1)
        total = f"{current:>{len(str(self.target))}}/{self.target}" if self.target else f"{current}"
        if final:
            timing = f"{format_time(elapsed)} {format_per_step(per_step)}"
        else:
            eta = per_step * ((self.target or current) - current)
            timing = f"{format_time(eta)} {format_per_step(per_step)}"
        if bar and self.target:
            return f"{total} {self._bar(current)} {timing}{format_logs(logs)}"
        return f"{total} - {timing}{format_logs(logs)}"

    def update(self, current: int, logs: Optional[Dict[str, float]] = None, finalize: bool = False) -> None:
        """Report `current` finished steps and the running `logs`."""
        self.seen = current
        if not self.verbose or self.finished:
            return
        logs = logs or {}
        if finalize:
            self.finished = True
            if self.interactive:
                line = self._line(current, logs, True)
                self.stream.write("\r" + line + " " * max(0, self._last_len - len(line)) + "\n")
            else:
                line = self._line(current, logs, True, bar=self.verbose == 1)
                self.stream.write(self.prefix + line + "\n")
            self.stream.flush()
            return
        if not self.interactive:
            return
        now = time.perf_counter()
        if now - self._last_draw < self.interval:
            return
        self._last_draw = now
        line = self._line(current, logs, False)
        self.stream.write("\r" + line + " " * max(0, self._last_len - len(line)))
        self._last_len = len(line)
        self.stream.flush()
