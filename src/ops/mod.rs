//! Pure compute for the tensor math, no PyO3: Candle custom ops with their
//! backward where Candle's are slow or missing, and the pieces every kernel
//! shares (one float trait, one CPU-feature detector, one threading policy).
pub(crate) mod advanced_index;
pub(crate) mod approx;
pub(crate) mod assign;
pub(crate) mod binary;
pub(crate) mod bitwise;
pub(crate) mod bmm;
pub(crate) mod broadcast;
pub(crate) mod cast;
pub(crate) mod composite;
pub(crate) mod cpu;
pub(crate) mod dot_rows;
pub(crate) mod float;
pub(crate) mod gather;
pub(crate) mod gemm;
pub(crate) mod index_write;
pub(crate) mod lanes;
pub(crate) mod layout;
pub(crate) mod linalg;
pub(crate) mod optim;
pub(crate) mod optim_rules;
pub(crate) mod parallel;
pub(crate) mod pool;
pub(crate) mod qmatmul;
pub(crate) mod quantized;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod scan;
pub(crate) mod sgemm;
pub(crate) mod simd_map;
pub(crate) mod softmax;
pub(crate) mod sort;
pub(crate) mod special;
pub(crate) mod storage;
pub(crate) mod team;
pub(crate) mod tiles;
pub(crate) mod transpose;
pub(crate) mod unary;
pub(crate) mod vector;

/// Deterministic values in [-0.5, 0.5) for the kernels' tests (a cheap LCG: no rand in
/// tests); each `seed` gives its own sequence.
#[cfg(test)]
pub(crate) fn test_values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

/// A source of `test_values` for a test's operands: each call takes the next seed after
/// `seed`, so every operand gets its own sequence.
#[cfg(test)]
pub(crate) fn test_stream(mut seed: u64) -> impl FnMut(usize) -> Vec<f32> {
    move |len| {
        seed += 1;
        test_values(len, seed)
    }
}
