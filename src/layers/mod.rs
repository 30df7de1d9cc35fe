//! Pure compute for the nn layer families, forward and backward, as Candle custom
//! ops (multi-threaded with rayon, SIMD variants picked at run time). No PyO3 here:
//! the Python entry points are in `crate::bindings::nn`.
pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod conv;
pub(crate) mod ctc;
pub(crate) mod linear;
pub(crate) mod llama_block;
pub(crate) mod loss;
pub(crate) mod loss_elementwise;
pub(crate) mod nll;
pub(crate) mod norm;
pub(crate) mod pointwise;
pub(crate) mod pooling;
pub(crate) mod recurrent;
pub(crate) mod resample;
pub(crate) mod rope;
