"""Make the PyTorch reference fixture of the elementwise special-function cases (tests/special_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/special/ (tools/_fixture_tool.py).

Run from the repository root:  python tools/make_fixtures_special.py
"""

from __future__ import annotations

from _fixture_tool import write
from special_cases import CASES

if __name__ == "__main__":
    write(CASES, "special")
