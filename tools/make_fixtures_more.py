"""Make the PyTorch reference fixture of the more composed ops' cases (tests/more_cases.py).

Needs torch; the tests never import it. Runs every case on torch and writes
tests/fixtures/more/ (tools/_fixture_tool.py).

Run from the repository root:  python tools/make_fixtures_more.py
"""

from __future__ import annotations

from _fixture_tool import write
from more_cases import CASES

if __name__ == "__main__":
    write(CASES, "more")
