#!/usr/bin/env bash
# Build the release artifacts: an abi3 manylinux wheel and an sdist, without Docker.
#
# The wheel is linked by zig (PyPI's `ziglang`) against glibc 2.17's symbol versions,
# so it loads on any Linux x86-64 with glibc >= 2.17 (manylinux2014), whatever glibc
# this machine has. The code is compiled for baseline x86-64 (SSE2; nothing sets
# target-cpu): the AVX2 / AVX-512 kernels are chosen at run time (src/ops/cpu.rs and
# the gemm crate), so one wheel runs on old and new CPUs. `auditwheel show` then
# confirms the tag: no library outside the manylinux set, no newer symbol version.
#
# Tools (maturin, ziglang, auditwheel) come from PyPI into .wheel-tools/ (gitignored).
# cargo's work goes to $CARGO_TARGET_DIR (default target/); zig builds name the target
# triple, so they use target/x86_64-unknown-linux-gnu/, beside `pip install .`'s.
#
# Usage: scripts/build_wheel.sh [OUTDIR]     (default dist/)
# Output: OUTDIR/candle_py-<v>-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#         and OUTDIR/candle_py-<v>.tar.gz; the wheel's path is the last line printed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
TOOLS=${WHEEL_TOOLS_DIR:-$ROOT/.wheel-tools}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
# The manylinux policy; `manylinux_2_28` also works (glibc 2.28, fewer old distros).
POLICY=${WHEEL_POLICY:-manylinux2014}

# A wheel compiled for this CPU would die with SIGILL on an older one.
for flags in "${RUSTFLAGS:-}" "${CARGO_ENCODED_RUSTFLAGS:-}" "${CARGO_BUILD_RUSTFLAGS:-}"; do
    case "$flags" in *target-cpu*|*target-feature*)
        echo "build_wheel: refusing RUSTFLAGS with target-cpu/target-feature ($flags): the wheel must run on any x86-64" >&2
        exit 1 ;;
    esac
done
if grep -rqsE 'target-(cpu|feature)' .cargo/ "$HOME/.cargo/config" "$HOME/.cargo/config.toml"; then
    echo "build_wheel: a cargo config sets target-cpu/target-feature; the wheel must run on any x86-64" >&2
    exit 1
fi

if [ ! -x "$TOOLS/bin/python" ]; then
    python3 -m venv "$TOOLS"
fi
# Pinned: a new zig has broken maturin's zig linking before.
"$TOOLS/bin/python" -m pip install -q --disable-pip-version-check \
    "maturin==1.16.0" "ziglang==0.17.1" "auditwheel==6.8.2"
export PATH="$TOOLS/bin:$PATH"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
rm -f "$OUT"/candle_py-"$version"-*.whl "$OUT"/candle_py-"$version".tar.gz

# The wheel keeps its symbol table (and std's line tables: +0.9 MB compressed). cargo's
# default release strip, `debuginfo`, reaches zig's linker as --strip-debug, which zig
# treats as strip-all; without names, tools/avx_audit.py could audit only a twin build,
# and a twin compiled without --target is not the same machine code (LLVM's choices
# differ in large inlined functions: the attention tasks' zeroing idioms did).
export CARGO_PROFILE_RELEASE_STRIP=none
echo "== wheel: maturin build --release --zig --compatibility $POLICY (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
start=$(date +%s)
maturin build --release --zig --compatibility "$POLICY" --out "$OUT"
echo "== wheel built in $(( $(date +%s) - start )) s"

echo "== sdist"
maturin sdist --out "$OUT"

wheel=$(ls "$OUT"/candle_py-"$version"-cp39-abi3-manylinux*_x86_64.whl)
sdist=$OUT/candle_py-$version.tar.gz
test -f "$sdist"

echo "== auditwheel show"
report=$(auditwheel show "$wheel")
echo "$report"
# The tag auditwheel finds must be at least as old (as portable) as the one the wheel claims.
found=$(printf '%s\n' "$report" | tr -d '\n' | sed -n 's/.*consistent with the following platform tag: *"manylinux_2_\([0-9]*\)_x86_64".*/\1/p')
claimed=$(basename "$wheel" | sed -n 's/.*manylinux_2_\([0-9]*\)_x86_64.*/\1/p')
if [ -z "$found" ] || [ -z "$claimed" ] || [ "$found" -gt "$claimed" ]; then
    echo "build_wheel: auditwheel does not confirm the wheel's tag (claims glibc 2.$claimed, found '${found:-none}')" >&2
    exit 1
fi
echo "== ok: $(basename "$sdist"), $(du -h "$wheel" | cut -f1) wheel"
echo "$wheel"
