"""Make the PyTorch reference fixture of the distributions cases (tests/distributions_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/distributions/ (tools/_fixture_tool.py).

Run from the repository root:  python tools/make_fixtures_distributions.py
"""

from __future__ import annotations

from _fixture_tool import write
from distributions_cases import CASES

if __name__ == "__main__":
    write(CASES, "distributions")
