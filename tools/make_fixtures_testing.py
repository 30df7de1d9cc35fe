"""Make the PyTorch reference fixture of the `torch.testing` cases (tests/testing_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/testing/ (tools/_fixture_tool.py).

Run from the repository root:  python tools/make_fixtures_testing.py
"""

from __future__ import annotations

from _fixture_tool import write
from testing_cases import CASES

if __name__ == "__main__":
    write(CASES, "testing")
