"""Shared by the hostile-file tests (safetensors, GGUF): a corpus directory made by a
generator in tools/, with a manifest of the files to reject (and the message each
must raise) and the valid edge cases to accept."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent


def load_manifest(corpus: Path) -> Tuple[Dict[str, str], List[str]]:
    """(reject: name -> expected message, accept: names) of a corpus."""
    manifest: Dict[str, Any] = json.loads((corpus / "manifest.json").read_text())
    return manifest["reject"], manifest["accept"]


def assert_corpus_matches_generator(corpus: Path, generator: str, suffix: str, min_cases: int = 40) -> None:
    """Every file of the corpus is byte for byte what tools/<generator>.py makes now."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        gen = importlib.import_module(generator)
    finally:
        sys.path.pop(0)
    reject, accept = load_manifest(corpus)
    cases, valid = gen.cases(), gen.valid()
    assert sorted(cases) == sorted(reject) and sorted(valid) == sorted(accept)
    for name, (data, expect) in cases.items():
        assert (corpus / f"{name}{suffix}").read_bytes() == data, f"{name}: rerun tools/{generator}.py"
        assert reject[name] == expect
    for name, data in valid.items():
        assert (corpus / f"{name}{suffix}").read_bytes() == data
    assert len(reject) >= min_cases
