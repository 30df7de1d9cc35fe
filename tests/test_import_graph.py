"""The package's modules import each other one way: no cycle, at import time or
in a deferred (function-level) import. TYPE_CHECKING-only imports do not count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_import_cycles_in_the_package() -> None:
    tool = ROOT / "tools" / "check_import_cycles.py"
    run = subprocess.run([sys.executable, str(tool), str(ROOT / "python" / "candle_py")], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_checker_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import g\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    tool = ROOT / "tools" / "check_import_cycles.py"
    run = subprocess.run([sys.executable, str(tool), str(pkg)], capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert "pkg.a <-> pkg.b" in run.stdout and "pkg.c" not in run.stdout
