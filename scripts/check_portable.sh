#!/usr/bin/env bash
# Show that a wheel's code runs on x86-64 CPUs without AVX, and on AVX2-only ones.
#
# 1. tools/avx_audit.py: every AVX/AVX2/FMA/AVX-512 instruction in the library lies
#    in a runtime-dispatched function, named by the wheel's own symbol table
#    (scripts/build_wheel.sh keeps it).
# 2. QEMU user-mode emulation (Debian's qemu-user) of a Nehalem CPU (SSE4.2, no AVX)
#    and of a Haswell one (AVX2+FMA, no AVX-512) runs tools/isa_smoke.py (matmul,
#    conv, softmax, norms, attention, backward, checked against NumPy) and, on
#    Nehalem, a few test files. An AVX instruction there dies with SIGILL; a control
#    program checks that it does. Emulation is ~20x slower than native, hence a subset.
#
# Usage: scripts/check_portable.sh WHEEL [pytest args]
#        (after scripts/test_wheel.sh WHEEL, whose
#        virtualenv .venv-wheel it runs; TEST_WHEEL_VENV overrides)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=$1
shift
VENV=${TEST_WHEEL_VENV:-$ROOT/.venv-wheel}
cd "$ROOT"

echo "== disassembly: AVX code only in runtime-dispatched functions"
python3 tools/avx_audit.py "$WHEEL"

if ! command -v qemu-x86_64 >/dev/null; then
    echo "check_portable: qemu-x86_64 not found (apt-get install qemu-user)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# qemu warns about host-only CPUID bits it cannot emulate; that noise is dropped.
# Where the machine forces OpenBLAS's kernels (OPENBLAS_CORETYPE=Haswell is set on some
# hosts, for OpenBLAS builds that misdetect their CPU), NumPy's import-time check would
# run AVX2 code on the emulated Nehalem and die with SIGILL: the emulated runs name the
# emulated CPU instead. Unset, OpenBLAS detects the emulated CPU itself.
emu() {
    local cpu=$1
    shift
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
        OPENBLAS_CORETYPE=$cpu qemu-x86_64 -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support" >&2)
    else
        qemu-x86_64 -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support" >&2)
    fi
}

if command -v cc >/dev/null; then
    printf '%s\n' 'int main(void) { __asm__ volatile("vxorps %%ymm0, %%ymm0, %%ymm0" ::: "xmm0"); return 0; }' > "$tmp/avx.c"
    cc -o "$tmp/avx" "$tmp/avx.c"
    if emu Nehalem "$tmp/avx" 2>/dev/null; then
        echo "check_portable: the emulated Nehalem ran an AVX instruction; the check proves nothing" >&2
        exit 1
    fi
    echo "== control: an AVX instruction dies with SIGILL on the emulated Nehalem"
fi

echo "== emulated Nehalem (SSE4.2, no AVX): smoke"
emu Nehalem "$VENV/bin/python" tools/isa_smoke.py DEFAULT
echo "== emulated Haswell (AVX2+FMA, no AVX-512): smoke"
emu Haswell "$VENV/bin/python" tools/isa_smoke.py AVX2
echo "== emulated Nehalem: test files"
# Files whose tests run in-process (a subprocess would leave the emulator).
emu Nehalem "$VENV/bin/python" -m pytest -q -p no:cacheprovider -x \
    tests/test_activations.py tests/test_losses.py tests/test_attention.py "$@"
