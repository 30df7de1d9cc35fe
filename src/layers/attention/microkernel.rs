//! The operands of the attention kernel's register-tiled float32 products
//! (`ops::tiles`, AVX2 or AVX-512): K^T transposed into panels once per call, V padded,
//! strided rows copied dense. The `gemm` crate packs both operands of every tile it is
//! given: at the tiles of an attention (64 x 64 x 64 and the like) that packing and its
//! dispatch were ~15% of the AVX2 backward (`perf`), and the causal cut could not be
//! fused into it.
use super::*;

/// K transposed into (d x 64) panels (sp keys, a multiple of 64) and V padded to (s, dvp) per kv slice, with sp and dvp
/// rounded up to 16 lanes, for the f32 micro-kernel (no per-tile packing).
pub(crate) struct Packed {
    pub(crate) kt: Vec<f32>,
    pub(crate) vp: Vec<f32>,
    pub(crate) sp: usize,
    /// Keys per K^T panel: 64, or all of them (rounded to 16) when fewer.
    pub(crate) pw: usize,
    pub(crate) dvp: usize,
}

/// The keys per panel of a sequence of `s` keys and the padded key count:
/// panels of 64, or one of `s` rounded up to 16 when shorter.
pub(crate) fn panel_width(s: usize) -> (usize, usize) {
    let pw = s.div_ceil(16).clamp(1, 4) * 16;
    (pw, s.div_ceil(pw) * pw)
}

/// The rows of each slice (`slices[u]` its start in `src`, `s` rows of `d` elements
/// `rs` apart) transposed into (d x pw) panels of `pw` rows each (`panel_width(s)`),
/// zero past the last row: `slices.len() * d * sp` floats, by `ops::transpose_padded`
/// (register blocks at the CPU's level, which it dispatches on).
pub(crate) fn panels(src: &[f32], slices: &[usize], rs: usize, s: usize, d: usize) -> Vec<f32> {
    let (pw, sp) = panel_width(s);
    let nk = slices.len();
    // Panel p holds [d][pw] contiguous, so the micro-kernel streams it (a plain
    // (d, s) transpose would alias in L1). Each panel row is written left to right
    // (reading the rows, which sit in L1, with a stride); columns past the last row
    // are zeroed, nothing else is.
    crate::ops::parallel::filled(nk * d * sp, |kt| {
        crate::ops::parallel::for_chunks(kt, d * sp, crate::ops::parallel::par_ok(nk * d * sp), |u, dst| {
            let src = &src[slices[u]..];
            for (pi, panel) in dst.chunks_mut(d * pw).enumerate() {
                let j0 = pi * pw;
                let keys = s.min(j0 + pw) - j0;
                let inside = keys > 0 && (j0 + keys - 1) * rs + d <= src.len();
                if inside {
                    // Square blocks transposed in registers (`ops::transpose`: 16 x 16 with
                    // AVX-512, 8 x 8 with AVX2), the columns past the last key written as
                    // zeros by the same blocks. The AVX-512 path was one masked 16-lane
                    // gather per panel row segment: 0.8% of a GPT training step and 1.8%
                    // of a ViT's (`perf`), mostly in the gathers.
                    let out = panel.as_mut_ptr() as *mut f32;
                    // SAFETY: `inside` keeps every read element ((j0 + jj) * rs + dd, jj <
                    // keys, dd < d) inside `src`; `panel` is d rows of pw >= keys floats,
                    // all written.
                    unsafe { crate::ops::transpose::transpose_padded(src.as_ptr().add(j0 * rs), rs, keys, pw, d, out, pw) };
                    continue;
                }
                for (dd, prow) in panel.chunks_mut(pw).enumerate() {
                    for (jj, o) in prow[..keys].iter_mut().enumerate() {
                        o.write(src[(j0 + jj) * rs + dd]);
                    }
                    for o in prow[keys..].iter_mut() {
                        o.write(0.0);
                    }
                }
            }
        })
    })
}

/// Where the tiles read `rows` rows of `width` elements `rs` apart from `src`: in
/// place when they are contiguous (`rs == width`), else copied into `dst` first.
/// Q, K and V split from one projection are views with rows 3 d apart (a GPT's
/// 1152 floats): rows that far apart share few L1 sets, and the tiles' operands
/// thrashed there (the tiled attention ran slower than the `gemm` crate's, which
/// packs, on exactly those views).
///
/// # Safety
/// `src` must be readable at `r * rs + c` for r < rows, c < width, and `dst` hold
/// `rows * width` elements.
#[inline(always)]
pub(crate) unsafe fn dense_rows<T: Copy>(src: *const T, rs: usize, rows: usize, width: usize, dst: &mut [T]) -> (*const T, usize) {
    if rs == width {
        return (src, rs);
    }
    for (r, row) in dst[..rows * width].chunks_exact_mut(width).enumerate() {
        // SAFETY: row r's `width` elements at `src + r * rs` are readable (the caller's).
        row.copy_from_slice(unsafe { std::slice::from_raw_parts(src.add(r * rs), width) });
    }
    (dst.as_ptr(), width)
}

/// K^T panels and V copied to contiguous rows of `dvp` columns (zero past dv), unless
/// its rows already are (`dv` a multiple of 16, rows `dv` apart).
pub(crate) fn pack(g: &Geo, k: &[f32], v: &[f32]) -> Packed {
    let (s, d, dv) = (g.s, g.d, g.dv);
    let dvp = dv.div_ceil(16) * 16;
    let nv = g.v_slices.len();
    let v_rs = g.v_rs;
    let (pw, sp) = panel_width(s);
    let kt = panels(k, &g.k_slices, g.k_rs, s, d);
    let vp = if dvp == dv && v_rs == dv {
        Vec::new()
    } else {
        let mut vp = vec![0f32; nv * s * dvp];
        if nv > 0 && s * dvp > 0 {
            crate::ops::parallel::for_chunks(&mut vp, s * dvp, true, |u, dst| {
                let base = g.v_slices[u];
                for j in 0..s {
                    dst[j * dvp..j * dvp + dv].copy_from_slice(&v[base + j * v_rs..base + j * v_rs + dv]);
                }
            });
        }
        vp
    };
    Packed { kt, vp, sp, pw, dvp }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 20) as f32 / 4096.0 - 0.5).collect()
    }

    /// `panels` equals the plain transpose with zero padding, over key counts around
    /// the register blocks and panels, at this CPU's level (`CANDLE_PY_MAX_ISA` selects a
    /// lower one; `ops::transpose`'s tests cover the blocks themselves).
    #[test]
    fn panels_are_the_transpose() {
        for &(s, d, rs) in &[(5usize, 3usize, 3usize), (37, 16, 20), (100, 64, 64), (133, 21, 50)] {
            let slices = [0, 7];
            let src = data(7 + s * rs, 5);
            let (pw, sp) = panel_width(s);
            let got = panels(&src, &slices, rs, s, d);
            assert_eq!(got.len(), 2 * d * sp);
            for (u, &base) in slices.iter().enumerate() {
                for j in 0..sp {
                    for dd in 0..d {
                        let want = if j < s { src[base + j * rs + dd] } else { 0.0 };
                        assert_eq!(got[u * d * sp + j / pw * d * pw + dd * pw + j % pw], want, "s={s} d={d} slice {u} key {j} dim {dd}");
                    }
                }
            }
        }
    }
}
