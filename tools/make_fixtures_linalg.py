"""Make the PyTorch reference fixture of the composed linear-algebra and shape cases (tests/linalg_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/linalg/ (tools/_fixture_tool.py).

Run from the repository root:  python tools/make_fixtures_linalg.py
"""

from __future__ import annotations

from _fixture_tool import write
from linalg_cases import CASES

if __name__ == "__main__":
    write(CASES, "linalg")
