"""Make the PyTorch reference event files that tests/test_tensorboard.py compares
candle_py's `SummaryWriter` against: runs the call sequence of
tests/tensorboard_cases.py with `torch.utils.tensorboard.SummaryWriter` into
tests/fixtures/tensorboard/ (replacing what is there), and records in errors.json
the type of the exception torch raises for each of its `BAD_CALLS`.

The event files are renamed `events.out.tfevents.torch` (torch names them after
the time, host and process; the test finds them by glob), so a rerun only changes
what torch writes. Needs torch, tensorboard and Pillow.
Run from the repository root:  python tools/make_fixtures_tensorboard.py
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
import tempfile

import torch
from torch.utils.tensorboard import SummaryWriter

TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
sys.path.insert(0, TESTS)

import tensorboard_cases  # noqa: E402

OUT = os.path.join(TESTS, "fixtures", "tensorboard")

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        tensorboard_cases.write_events(torch, SummaryWriter, tmp)
        for path in glob.glob(os.path.join(tmp, "**", "events.out.tfevents.*"), recursive=True):
            os.rename(path, os.path.join(os.path.dirname(path), "events.out.tfevents.torch"))
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(tmp, OUT)
    with tempfile.TemporaryDirectory() as tmp:
        errors = tensorboard_cases.bad_call_errors(torch, SummaryWriter, tmp)
    with open(os.path.join(OUT, "errors.json"), "w") as f:
        json.dump(errors, f, indent=0, sort_keys=True)
        f.write("\n")
    with open(os.path.join(OUT, "VERSIONS"), "w") as f:
        import PIL
        import tensorboard

        f.write(f"torch {torch.__version__}\ntensorboard {tensorboard.__version__}\nPillow {PIL.__version__}\n")
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(OUT, "**", "*"), recursive=True) if os.path.isfile(p))
    print(f"wrote {OUT}: {len(tensorboard_cases.event_files(OUT))} event files, {total} bytes")
