"""Make the PyTorch reference fixture of the complex-tensor cases (tests/complex_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/complex/ (tools/_fixture_tool.py).

Run from the repository root:  python tools/make_fixtures_complex.py
"""

from __future__ import annotations

from _fixture_tool import write
from complex_cases import CASES

if __name__ == "__main__":
    write(CASES, "complex")
