//! PyTorch's integer bitwise operators (`&`, `|`, `^`, `<<`, `>>`, `~`) on
//! Candle's integer dtypes, which Candle has no kernels for. Values are widened to
//! i64 (exact for every integer dtype Candle stores), combined with the semantics of
//! the operand's own width (shifts past the width give 0, or the sign for `>>` of a
//! signed type, as PyTorch's CPU kernels), and narrowed back with two's-complement
//! wrap-around.
use candle_core::{DType, Device, Tensor};

/// A bitwise binary operator.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BitOp {
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// Width in bits and signedness of an integer dtype.
fn width(dt: DType) -> candle_core::Result<(u32, bool)> {
    Ok(match dt {
        DType::U8 => (8, false),
        DType::U32 => (32, false),
        DType::I16 => (16, true),
        DType::I32 => (32, true),
        DType::I64 => (64, true),
        other => candle_core::bail!("bitwise operations need an integer dtype, got {other:?}"),
    })
}

fn widen(t: &Tensor) -> candle_core::Result<Vec<i64>> {
    t.flatten_all()?.to_device(&Device::Cpu)?.to_dtype(DType::I64)?.to_vec1::<i64>()
}

/// `v` (values of an integer dtype of `bits` width, held in i64) back as a tensor of `dt`,
/// wrapping as two's complement.
fn narrow(v: Vec<i64>, dt: DType, dims: &[usize], dev: &Device) -> candle_core::Result<Tensor> {
    let t = match dt {
        DType::U8 => Tensor::from_vec(v.into_iter().map(|x| x as u8).collect::<Vec<_>>(), dims, &Device::Cpu)?,
        DType::U32 => Tensor::from_vec(v.into_iter().map(|x| x as u32).collect::<Vec<_>>(), dims, &Device::Cpu)?,
        DType::I16 => Tensor::from_vec(v.into_iter().map(|x| x as i16).collect::<Vec<_>>(), dims, &Device::Cpu)?,
        DType::I32 => Tensor::from_vec(v.into_iter().map(|x| x as i32).collect::<Vec<_>>(), dims, &Device::Cpu)?,
        DType::I64 => Tensor::from_vec(v, dims, &Device::Cpu)?,
        other => candle_core::bail!("bitwise operations need an integer dtype, got {other:?}"),
    };
    t.to_device(dev)
}

/// One element of `a (op) b` for an integer type of `bits` width (`signed` or not);
/// `a` and `b` are that type's values widened to i64.
fn apply(op: BitOp, a: i64, b: i64, bits: u32, signed: bool) -> i64 {
    match op {
        BitOp::And => a & b,
        BitOp::Or => a | b,
        BitOp::Xor => a ^ b,
        // A negative shift or one past the width shifts every bit out.
        BitOp::Shl => {
            if b < 0 || b >= bits as i64 {
                0
            } else {
                ((a as u64) << b) as i64
            }
        }
        // A signed value keeps its sign bit: past the width it becomes 0 or -1.
        BitOp::Shr => {
            let max = bits as i64 - signed as i64;
            if b < 0 || b >= max {
                if signed {
                    a >> (bits - 1).min(63)
                } else {
                    0
                }
            } else {
                a >> b
            }
        }
    }
}

/// `a (op) b` elementwise for two integer tensors of one dtype and one shape.
pub(crate) fn bitwise(a: &Tensor, b: &Tensor, op: BitOp) -> candle_core::Result<Tensor> {
    if a.dtype() != b.dtype() || a.dims() != b.dims() {
        candle_core::bail!("bitwise operands differ: {:?} {:?} and {:?} {:?}", a.dtype(), a.dims(), b.dtype(), b.dims());
    }
    let (bits, signed) = width(a.dtype())?;
    let (x, y) = (widen(a)?, widen(b)?);
    let out: Vec<i64> = x.iter().zip(&y).map(|(&p, &q)| apply(op, p, q, bits, signed)).collect();
    narrow(out, a.dtype(), a.dims(), a.device())
}

/// `~a` elementwise for an integer tensor.
pub(crate) fn bitwise_not(a: &Tensor) -> candle_core::Result<Tensor> {
    width(a.dtype())?;
    let out: Vec<i64> = widen(a)?.into_iter().map(|x| !x).collect();
    narrow(out, a.dtype(), a.dims(), a.device())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_follow_the_width() {
        assert_eq!(apply(BitOp::Shl, 1, 64, 64, true), 0);
        assert_eq!(apply(BitOp::Shl, 1, -1, 64, true), 0);
        assert_eq!(apply(BitOp::Shr, -8, 100, 64, true), -1);
        assert_eq!(apply(BitOp::Shr, -8, -1, 32, true), -1);
        assert_eq!(apply(BitOp::Shr, 200, 9, 8, false), 0);
        assert_eq!(apply(BitOp::Shr, -8, 1, 64, true), -4);
    }

    #[test]
    fn narrowing_wraps() -> candle_core::Result<()> {
        let a = Tensor::new(&[1u8, 3], &Device::Cpu)?;
        let b = Tensor::new(&[9u8, 7], &Device::Cpu)?;
        assert_eq!(bitwise(&a, &b, BitOp::Shl)?.to_vec1::<u8>()?, vec![0, 128]);
        assert_eq!(bitwise_not(&a)?.to_vec1::<u8>()?, vec![254, 252]);
        Ok(())
    }
}
