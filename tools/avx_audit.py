"""Show, from the machine code, that a built extension runs on x86-64 without AVX.

The wheel is compiled for baseline x86-64; AVX, AVX2, FMA and AVX-512 code exists
only inside functions compiled with `#[target_feature]`, which run only after a CPU
check. This disassembles the library (objdump), finds every function holding an
instruction beyond that baseline (VEX/EVEX-encoded, ymm/zmm/mask registers, BMI,
LZCNT), and requires each to be one of:
  - ours: a `#[target_feature]` function of src/ (or a closure or generic instance of
    one), entered only after `ops::cpu::simd_level()` allows it;
  - a crate that dispatches at run time the same way (THIRD_PARTY says how);
  - an intrinsic of core::arch emitted out of line, called only from the above.
Anything else fails the check, as would a build with target-cpu=native (there AVX
is everywhere). Prints a count per owner.

A second check runs the other way: no kernel of ours may call the library `fmaf` / `fma`
(compiler-builtins' software or dispatching fused multiply-add). `mul_add` becomes that
call where a loop body meant for a `#[target_feature]` variant was not inlined into it
and was compiled for baseline x86-64: correct, but one call per element (Mish ran at
15x torch's time). FMA_FALLBACKS lists the scalar paths that call it on purpose.

The library must keep its symbol table, which names the functions: scripts/build_wheel.sh
builds the wheel that way. (A twin build with symbols is no stand-in for a stripped
wheel: compiled without --target, LLVM picked other instructions in the attention
tasks, so the two could not be matched instruction by instruction.)

Usage: python tools/avx_audit.py WHEEL_OR_SO [--list]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Beyond SSE2: VEX/EVEX mnemonics start with "v" (verr/verw are old protected-mode
# ops); BMI1/BMI2/LZCNT are AVX2-era (x86-64-v3) scalar instructions. Not `tzcnt`:
# its encoding is `rep bsf`, which LLVM emits on purpose in baseline code for a
# nonzero operand, and which older CPUs run as `bsf`, with the same result.
SCALAR_V3 = {"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "lzcnt", "mulx", "pdep", "pext", "rorx", "sarx", "shlx", "shrx"}
WIDE_REG = re.compile(r"%(ymm|zmm)\d+|%k[0-7]\b")
FUNC = re.compile(r"^[0-9a-f]+ <(.+)>:$")
INSN = re.compile(r"^\s+[0-9a-f]+:\s+(?:\{\w+\}\s+)?([a-z][a-z0-9.]*)\s*(.*)$")
# Patterns on the demangled name. Each was checked in the crate's source: its AVX
# variant is reached only through a CPU check.
THIRD_PARTY = {
    r"\bgemm(_common|_f16|_f32|_f64|_c32|_c64)?::": 'gemm* crates: feature_detected!("avx512f"/"fma") picks the kernel (Candle\'s matmul)',
    r"\bpulp::": "pulp: V3/V4::try_new() detect before the SIMD closure runs",
    r"\bmemchr::": "memchr: is_x86_feature_detected! before its AVX2 search",
    r"\bcandle_core::cpu::avx::": "candle-core: use_avx2() (cpuid, cached) before vec_dot/vec_sum/vec_add",
    r"\bcandle_core::quantized::avx::": "candle-core k_quants: has_avx2_fma() (cpu::features, cpuid) before each avx::vec_dot_*",
    r"\bcandle_core::quantized::repack_x86::": (
        'candle-core repack_x86: is_x86_feature_detected!("avx2"/"fma"/"avxvnni"/"avx512*") and a CPUID AMX check pick the tile kernel'
    ),
    r"\bhalf::binary16::arch::x86::": 'half: is_x86_feature_detected!("f16c") in every conversion',
    r"\brand_chacha::guts::\w+::impl_avx2?\b": 'rand_chacha (ppv-lite86 dispatch): is_x86_feature_detected!("avx2"/"avx")',
    r"\bcompiler_builtins::math::libm_math::arch::x86::fma::": "compiler-builtins fmaf: cpuid check before FMA/FMA4",
}
# Ours that call libm's fused multiply-add on purpose: the quantized tiles' scalar paths for
# CPUs without AVX2/FMA, which keep the SIMD path's fused roundings (the same results).
FMA_FALLBACKS = [r"_core::ops::qmatmul::\w+::\w+Pack::tile$"]
INTRINSIC = "core::core_arch::x86::"
CALL = re.compile(r"\b(?:call|jmp)\s+[0-9a-f]+ <(.+?)(?:\+0x[0-9a-f]+)?>$")


def target_feature_fns() -> set[str]:
    """Names of the functions in src/ that carry `#[target_feature(...)]`."""
    names = set()
    for path in (ROOT / "src").rglob("*.rs"):
        text = path.read_text()
        for m in re.finditer(r"#\[target_feature\([^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?fn\s+(\w+)", text):
            names.add(m.group(1))
    return names


def fma_slots(lib: Path, text: str) -> set[str]:
    """The addresses of the GOT slots that hold libm's `fmaf` / `fma` (position-independent
    code calls them through `mov slot(%rip), %reg; call *%reg`)."""
    funcs = {m.group(1).lstrip("0") for m in re.finditer(r"^([0-9a-f]+) <fmaf?>:$", text, re.M)}
    rel = subprocess.run(["readelf", "-rW", str(lib)], capture_output=True, text=True, check=True).stdout
    return {
        f[0].lstrip("0")
        for f in (line.split() for line in rel.splitlines())
        if len(f) >= 4 and f[2] == "R_X86_64_RELATIVE" and f[3].lstrip("0") in funcs
    }


def disassemble(lib: Path) -> tuple[dict[str, set[str]], Counter[str], dict[str, set[str]], set[str]]:
    """Function name -> the beyond-baseline mnemonics it holds; how many of each; for
    each core::arch intrinsic, the functions that call it; and the functions that call
    libm's `fmaf` / `fma`."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, check=True).stdout
    slots = fma_slots(lib, out)
    found: dict[str, set[str]] = {}
    total: Counter[str] = Counter()
    callers: dict[str, set[str]] = {}
    fma_users: set[str] = set()
    func = "?"
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            func = m.group(1)
            continue
        m = INSN.match(line)
        if not m:
            continue
        op, args = m.groups()
        call = CALL.search(line)
        if call and call.group(1).startswith(INTRINSIC) and call.group(1) != func:
            callers.setdefault(call.group(1), set()).add(func)
        slot = re.search(r"# ([0-9a-f]+) <", args)
        if (call and call.group(1) in ("fmaf", "fma")) or (slot and slot.group(1).lstrip("0") in slots):
            fma_users.add(func)
        if (op.startswith("v") and op not in ("verr", "verw")) or op in SCALAR_V3 or WIDE_REG.search(args):
            found.setdefault(func, set()).add(op)
            total[op] += 1
    return found, total, callers, fma_users


def owner(func: str, ours: set[str], callers: dict[str, set[str]]) -> str | None:
    """Who may hold AVX code in `func`, or None if nobody should."""
    if func.startswith("_core::") or "<_core::" in func or " _core::" in func:
        parts = set(re.split(r"::|<|>|\s|,", func))
        return "ours: a #[target_feature] variant chosen by ops::cpu::simd_level()" if parts & ours else None
    for pattern, why in THIRD_PARTY.items():
        if re.search(pattern, func):
            return why
    if func.startswith(INTRINSIC):
        # An intrinsic is inlined into callers that have its feature; one left out of
        # line is safe only if every caller is itself runtime-dispatched code.
        if all(owner(c, ours, {}) for c in callers.get(func, ())):
            return "core::arch intrinsics out of line, called only from the code above"
    return None


def has_symtab(lib: Path) -> bool:
    """Whether the library kept its (static) symbol table, which names local functions."""
    out = subprocess.run(["objdump", "-t", str(lib)], capture_output=True, text=True, check=False).stdout
    return out.count("\n") > 100  # a stripped one lists nothing ("no symbols")


def library(target: Path, tmp: str) -> Path:
    """The extension module itself: `target`, or the one inside a wheel."""
    if target.suffix != ".whl":
        return target
    with zipfile.ZipFile(target) as z:
        return Path(z.extract(next(n for n in z.namelist() if n.endswith(".so")), tmp))


def main() -> int:
    args = sys.argv[1:]
    listing = "--list" in args
    with tempfile.TemporaryDirectory() as tmp:
        lib = library(Path(args[0]), tmp)
        if not has_symtab(lib):
            print(f"{lib.name} has no symbol table: build it with CARGO_PROFILE_RELEASE_STRIP=none (scripts/build_wheel.sh does)")
            return 1
        found, total, callers, fma_users = disassemble(lib)
    ours = target_feature_fns()
    counts: Counter[str] = Counter()
    bad = []
    for func, ops in sorted(found.items()):
        who = owner(func, ours, callers)
        if who is None:
            bad.append(f"{func}: {' '.join(sorted(ops)[:8])}")
        else:
            counts[who] += 1
        if listing:
            print(f"{who or 'UNEXPECTED'}\t{func}\t{' '.join(sorted(ops)[:6])}")
    print(f"{len(found)} functions hold AVX/AVX2/FMA/AVX-512/BMI instructions ({sum(total.values())} instructions)")
    for who, n in counts.most_common():
        print(f"  {n:5d}  {who}")
    if bad:
        print(f"{len(bad)} functions outside the runtime-detected code:", *bad[:40], sep="\n  ")
        return 1
    print("ok: every one is a runtime-dispatched variant; the rest of the library is baseline x86-64")
    ours_fma = sorted(f for f in fma_users if owner_is_ours(f) and not any(re.search(p, f) for p in FMA_FALLBACKS))
    if ours_fma:
        print(
            f"{len(ours_fma)} kernels of ours call libm's fmaf/fma (a loop body not inlined into its #[target_feature] variant):",
            *ours_fma[:40],
            sep="\n  ",
        )
        return 1
    print(f"ok: no kernel of ours calls libm's fmaf/fma ({len(fma_users)} callers in all: third-party and the scalar fallbacks)")
    return 0


def owner_is_ours(func: str) -> bool:
    """Whether `func` is (an instance of) a function of this crate."""
    return func.startswith("_core::") or "<_core::" in func or " _core::" in func


if __name__ == "__main__":
    sys.exit(main())
