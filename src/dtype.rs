//! dtypes as the Python user sees them (PyTorch's names) over Candle's `DType`.
//!
//! Candle has no boolean type: comparisons give `U8`. We keep a `Bool` dtype at
//! the Python surface and store it as `U8` underneath, so masks print, index and
//! export to NumPy as `bool`, whatever Candle does inside.
use candle_core::DType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DT {
    Bool,
    U8,
    I16,
    I32,
    I64,
    U32,
    F16,
    BF16,
    F32,
    F64,
}

/// Promotion categories, ordered as PyTorch orders them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    Bool,
    Int,
    Float,
}

pub const ALL: [DT; 10] = [DT::Bool, DT::U8, DT::I16, DT::I32, DT::I64, DT::U32, DT::F16, DT::BF16, DT::F32, DT::F64];

impl DT {
    pub fn candle(self) -> DType {
        match self {
            DT::Bool | DT::U8 => DType::U8,
            DT::I16 => DType::I16,
            DT::I32 => DType::I32,
            DT::I64 => DType::I64,
            DT::U32 => DType::U32,
            DT::F16 => DType::F16,
            DT::BF16 => DType::BF16,
            DT::F32 => DType::F32,
            DT::F64 => DType::F64,
        }
    }

    /// Like `from_candle`, without building an error (for hot paths).
    #[inline]
    pub fn of_candle(d: DType) -> Option<DT> {
        Some(match d {
            DType::U8 => DT::U8,
            DType::I16 => DT::I16,
            DType::I32 => DT::I32,
            DType::I64 => DT::I64,
            DType::U32 => DT::U32,
            DType::F16 => DT::F16,
            DType::BF16 => DT::BF16,
            DType::F32 => DT::F32,
            DType::F64 => DT::F64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DT::Bool => "bool",
            DT::U8 => "uint8",
            DT::I16 => "int16",
            DT::I32 => "int32",
            DT::I64 => "int64",
            DT::U32 => "uint32",
            DT::F16 => "float16",
            DT::BF16 => "bfloat16",
            DT::F32 => "float32",
            DT::F64 => "float64",
        }
    }

    pub fn from_name(s: &str) -> Option<DT> {
        let s = s.strip_prefix("torch.").or_else(|| s.strip_prefix("candle_py.")).unwrap_or(s);
        Some(match s {
            "bool" | "bool_" => DT::Bool,
            "uint8" | "u8" => DT::U8,
            "int16" | "short" | "i16" => DT::I16,
            "int32" | "int" | "i32" => DT::I32,
            "int64" | "long" | "i64" => DT::I64,
            "uint32" | "u32" => DT::U32,
            "float16" | "half" | "f16" => DT::F16,
            "bfloat16" | "bf16" => DT::BF16,
            "float32" | "float" | "f32" => DT::F32,
            "float64" | "double" | "f64" => DT::F64,
            _ => return None,
        })
    }

    pub fn category(self) -> Category {
        match self {
            DT::Bool => Category::Bool,
            DT::F16 | DT::BF16 | DT::F32 | DT::F64 => Category::Float,
            _ => Category::Int,
        }
    }

    pub fn is_float(self) -> bool {
        self.category() == Category::Float
    }

    pub fn itemsize(self) -> usize {
        match self {
            DT::Bool | DT::U8 => 1,
            DT::I16 | DT::F16 | DT::BF16 => 2,
            DT::I32 | DT::U32 | DT::F32 => 4,
            DT::I64 | DT::F64 => 8,
        }
    }

    fn rank_in_category(self) -> u8 {
        match self {
            DT::Bool => 0,
            DT::U8 => 1,
            DT::I16 => 2,
            DT::I32 => 3,
            DT::U32 => 4,
            DT::I64 => 5,
            DT::BF16 => 1,
            DT::F16 => 2,
            DT::F32 => 3,
            DT::F64 => 4,
        }
    }

    /// PyTorch's `promote_types` for two tensor dtypes.
    pub fn promote(a: DT, b: DT) -> DT {
        if a == b {
            return a;
        }
        match (a.category(), b.category()) {
            (x, y) if x != y => {
                if x > y {
                    a
                } else {
                    b
                }
            }
            (Category::Float, _) => {
                // float16 with bfloat16 goes to float32, as in PyTorch.
                if (a == DT::F16 && b == DT::BF16) || (a == DT::BF16 && b == DT::F16) {
                    DT::F32
                } else if a.rank_in_category() > b.rank_in_category() {
                    a
                } else {
                    b
                }
            }
            _ => {
                // uint8 with a signed int goes to the signed one (int16 at least).
                if a.rank_in_category() > b.rank_in_category() {
                    a
                } else {
                    b
                }
            }
        }
    }
}
