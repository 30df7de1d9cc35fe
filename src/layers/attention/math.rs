//! PyTorch's "math" attention backend from tensor ops, for tensors off the CPU
//! (the fused kernel is CPU code): `softmax(Q K^T * scale + mask) V` with the fused
//! kernel's semantics — additive mask (bool masks arrive as 0 / -inf), top-left
//! causal mask, grouped kv heads, and zeros for rows whose keys are all masked.
//! The backend itself is `autograd::composed::sdpa_math` (written with recorded ops,
//! so it is differentiable twice); this file holds its settings.

/// The attention settings besides the tensors.
pub(crate) struct MathCfg {
    pub(crate) causal: bool,
    pub(crate) scale: f64,
    /// Grouped-query attention: query heads (dim -3) share key / value heads.
    pub(crate) gqa: bool,
    pub(crate) dropout: f64,
}
