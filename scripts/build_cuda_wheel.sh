#!/usr/bin/env bash
# Build a candle-py wheel with `--features cuda` on a machine that has no GPU
# and no system CUDA toolkit.
#
# Everything comes from PyPI into .cuda-tools/ inside the clone (gitignored):
# nvcc, cicc/libnvvm, the CUDA headers and the CCCL headers to compile Candle's
# kernels, and the cuBLAS/cuRAND/NVRTC/cudart libraries to link against. The
# build goes to target-cuda/ so the CPU build in target/ is never touched.
#
# Version: CUDA 13.0 (nvcc 13.0.88). Candle loads its kernels as PTX that the
# driver JIT-compiles, and a driver accepts PTX only from a toolkit no newer
# than itself: 13.0 suits driver 580 (CUDA 13.0) on H100/H200. A newer nvcc
# would build fine but fail at run time with CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
#
# No GPU here, so the compute capability is given: CUDA_COMPUTE_CAP=90
# (Hopper; Candle's build turns it into sm_90a). Override for other cards,
# e.g. CUDA_COMPUTE_CAP=80 for A100.
#
# At run time the wheel needs the NVIDIA driver (libcuda.so.1) and the CUDA 13
# libraries libcudart.so.13, libcublas.so.13, libcublasLt.so.13,
# libcurand.so.10 and libnvrtc.so.13: from a system CUDA 13 install, or from
# `pip install nvidia-cuda-runtime nvidia-cublas nvidia-curand nvidia-cuda-nvrtc`
# in the same environment (the library carries an rpath to site-packages/nvidia/cu13/lib).
#
# Usage: scripts/build_cuda_wheel.sh [extra maturin args]
#        scripts/build_cuda_wheel.sh --check   (cargo check of the crate with the feature, no wheel)
# Output: the wheel path on the last line (in target-cuda/wheels/).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

TOOLS=${CUDA_TOOLS_DIR:-$ROOT/.cuda-tools}
PY=${PYTHON:-python3}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-cuda}

# Pinned to CUDA 13.0 (see above); cuBLAS/cuRAND have their own numbering.
PKGS=(
    "nvidia-cuda-nvcc==13.0.88"
    "nvidia-nvvm==13.0.88"
    "nvidia-cuda-crt==13.0.88"
    "nvidia-cuda-runtime==13.0.96"
    "nvidia-cuda-cccl==13.0.85"
    "nvidia-cuda-nvrtc==13.0.88"
    "nvidia-cublas==13.0.2.14"
    "nvidia-curand==10.4.0.35"
    "maturin>=1.5,<2"
)

if [ ! -x "$TOOLS/venv/bin/python" ]; then
    echo "== creating $TOOLS/venv"
    "$PY" -m venv "$TOOLS/venv"
fi
echo "== installing the CUDA 13.0 toolchain from PyPI (cached after the first run)"
"$TOOLS/venv/bin/python" -m pip install -q --disable-pip-version-check "${PKGS[@]}"

CUDA_ROOT=$("$TOOLS/venv/bin/python" -c 'import nvidia.cu13 as m; print(list(m.__path__)[0])')
export CUDA_ROOT CUDA_HOME=$CUDA_ROOT CUDA_PATH=$CUDA_ROOT
export PATH="$CUDA_ROOT/bin:$TOOLS/venv/bin:$PATH"
LIB=$CUDA_ROOT/lib

# The wheels ship only versioned libraries (libcublas.so.13); the linker's
# -lcublas wants the unversioned name.
for so in cudart.so.13 cublas.so.13 cublasLt.so.13 curand.so.10 nvrtc.so.13; do
    ln -sf "lib$so" "$LIB/lib${so%.*}"
done

# libcuda.so comes with the driver, which a build machine lacks. Link against
# a stub that exports every driver-API function named in cuda.h (after the
# preprocessor applies its _v2 renames), under the driver's soname; at run
# time the real libcuda.so.1 is loaded instead. Empty stubs are never called.
mkdir -p "$LIB/stubs"
if [ ! -f "$LIB/stubs/libcuda.so" ] || [ "$CUDA_ROOT/include/cuda.h" -nt "$LIB/stubs/libcuda.so" ]; then
    echo "== generating the libcuda.so link stub"
    gcc -E -P -I"$CUDA_ROOT/include" "$CUDA_ROOT/include/cuda.h" \
        | grep -oE '\bcu[A-Za-z0-9_]+[[:space:]]*\(' | tr -d ' (' | sort -u \
        | sed 's/.*/void &(void) {}/' > "$TOOLS/libcuda_stub.c"
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$LIB/stubs/libcuda.so" "$TOOLS/libcuda_stub.c"
fi
ln -sf libcuda.so "$LIB/stubs/libcuda.so.1"

nvcc --version | tail -2
# The rpath lets a pip-installed CUDA runtime (nvidia-* wheels) be found
# without LD_LIBRARY_PATH; a system install is found through ld.so as usual.
# (--check uses the same flags, so it reuses the build's compiled kernels.)
export RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,-rpath,\$ORIGIN/../nvidia/cu13/lib"
if [ "${1:-}" = "--check" ]; then
    echo "== cargo check --release --features cuda (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    exec cargo check --release --features cuda --lib
fi
echo "== building: CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP CARGO_TARGET_DIR=$CARGO_TARGET_DIR"
# --auditwheel skip: repairing would copy ~700 MB of CUDA libraries into the
# wheel; the native `linux` tag says honestly that it is not manylinux.
start=$(date +%s)
maturin build --release --features cuda --compatibility linux --auditwheel skip \
    --out "$CARGO_TARGET_DIR/wheels" "$@"
echo "== built in $(( $(date +%s) - start )) s"
ls -t "$CARGO_TARGET_DIR"/wheels/candle_py-*-linux_x86_64.whl | head -1
