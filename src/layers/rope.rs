//! Rotary position embedding (RoPE): each pair of a head's features is rotated by an
//! angle that grows with the position. Two pairings exist in the wild: the two halves
//! of the head (Hugging Face's `rotate_half`) and adjacent elements (GGML's layout:
//! llama.cpp's converter permutes the Q/K rows of Llama checkpoints to it). Candle's
//! kernels do both on every device; this picks one and fixes the operands' layout.
use crate::ops::layout::Dense;
use candle_core::{Result, Tensor};

/// `x` (B, H, T, D) with pair `i` of position `t` rotated by the angle whose cosine
/// and sine are `cos[t, i]`, `sin[t, i]` (tables of T x D/2): `(a, b)` becomes
/// `(a cos - b sin, a sin + b cos)`, the pairs `(2i, 2i + 1)` when `interleaved`, else
/// `(i, i + D/2)`.
pub(crate) fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor, interleaved: bool) -> Result<Tensor> {
    // The kernels read contiguous operands of one dtype.
    let x = x.dense()?;
    let cos = cos.to_dtype(x.dtype())?.dense()?;
    let sin = sin.to_dtype(x.dtype())?.dense()?;
    if interleaved {
        candle_nn::rotary_emb::rope_i(&x, &cos, &sin)
    } else {
        candle_nn::rotary_emb::rope(&x, &cos, &sin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Both pairings against the rotation written out element by element.
    #[test]
    fn rotates_pairs() -> Result<()> {
        let (t, d) = (3usize, 4usize);
        let x: Vec<f32> = (0..t * d).map(|i| (i as f32 * 0.37).sin()).collect();
        let ang: Vec<f32> = (0..t * d / 2).map(|i| i as f32 * 0.5 + 0.1).collect();
        let xt = Tensor::from_vec(x.clone(), (1, 1, t, d), &Device::Cpu)?;
        let at = Tensor::from_vec(ang.clone(), (t, d / 2), &Device::Cpu)?;
        for interleaved in [false, true] {
            let y = rope(&xt, &at.cos()?, &at.sin()?, interleaved)?.flatten_all()?.to_vec1::<f32>()?;
            for p in 0..t {
                for i in 0..d / 2 {
                    let (ia, ib) = if interleaved { (2 * i, 2 * i + 1) } else { (i, i + d / 2) };
                    let (a, b, th) = (x[p * d + ia], x[p * d + ib], ang[p * d / 2 + i]);
                    assert!((y[p * d + ia] - (a * th.cos() - b * th.sin())).abs() < 1e-6);
                    assert!((y[p * d + ib] - (a * th.sin() + b * th.cos())).abs() < 1e-6);
                }
            }
        }
        Ok(())
    }
}
