//! [`UnOp`]: the one-operand operations, and which types each takes.

/// One-operand operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-x` (signed and float).
    Neg,
    /// `!x` (bool).
    Not,
    /// `~x` (integers).
    BitNot,
    /// `abs` (numeric; `abs(i32::MIN)` wraps to itself, as `i64::MIN`).
    Abs,
    /// `exp`.
    Exp,
    /// `log`.
    Log,
    /// `sqrt`.
    Sqrt,
    /// `inverseSqrt`.
    InverseSqrt,
    /// `tanh`.
    Tanh,
    /// `sin`.
    Sin,
    /// `cos`.
    Cos,
    /// `floor`.
    Floor,
    /// `ceil`.
    Ceil,
    /// `exp2`.
    Exp2,
    /// `log2`.
    Log2,
    /// `trunc`: toward zero.
    Trunc,
    /// `round`: to nearest, ties to even.
    Round,
    /// `fract`: `x - floor(x)`.
    Fract,
    /// `sign`: -1, 0 or 1 (`i32` and floats; a float's `sign(-0.0)` is 0).
    Sign,
    /// `countOneBits` (32-bit integers).
    CountOneBits,
    /// `countLeadingZeros` (32-bit integers).
    CountLeadingZeros,
    /// `countTrailingZeros` (32-bit integers).
    CountTrailingZeros,
    /// `reverseBits` (32-bit integers).
    ReverseBits,
}

impl UnOp {
    /// The operation's name in messages (the WGSL name where there is one).
    pub const fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "not",
            UnOp::BitNot => "bit_not",
            UnOp::Abs => "abs",
            UnOp::Exp => "exp",
            UnOp::Log => "log",
            UnOp::Sqrt => "sqrt",
            UnOp::InverseSqrt => "inverseSqrt",
            UnOp::Tanh => "tanh",
            UnOp::Sin => "sin",
            UnOp::Cos => "cos",
            UnOp::Floor => "floor",
            UnOp::Ceil => "ceil",
            UnOp::Exp2 => "exp2",
            UnOp::Log2 => "log2",
            UnOp::Trunc => "trunc",
            UnOp::Round => "round",
            UnOp::Fract => "fract",
            UnOp::Sign => "sign",
            UnOp::CountOneBits => "countOneBits",
            UnOp::CountLeadingZeros => "countLeadingZeros",
            UnOp::CountTrailingZeros => "countTrailingZeros",
            UnOp::ReverseBits => "reverseBits",
        }
    }

    /// Float-only math functions.
    pub const fn float_only(self) -> bool {
        matches!(
            self,
            UnOp::Exp
                | UnOp::Log
                | UnOp::Sqrt
                | UnOp::InverseSqrt
                | UnOp::Tanh
                | UnOp::Sin
                | UnOp::Cos
                | UnOp::Floor
                | UnOp::Ceil
                | UnOp::Exp2
                | UnOp::Log2
                | UnOp::Trunc
                | UnOp::Round
                | UnOp::Fract
        )
    }

    /// Bit counts and reversal: on `i32` and `u32` only (naga's 64-bit
    /// forms are not emitted: lavapipe crashes compiling 64-bit
    /// `reverseBits`).
    pub const fn int32_only(self) -> bool {
        matches!(
            self,
            UnOp::CountOneBits
                | UnOp::CountLeadingZeros
                | UnOp::CountTrailingZeros
                | UnOp::ReverseBits
        )
    }

    /// Float functions with no `f64` form: Vulkan's GLSL.std.450 defines
    /// `exp`, `log`, `exp2`, `log2`, `tanh`, `sin` and `cos` on 16- and
    /// 32-bit floats only.
    pub const fn not_on_f64(self) -> bool {
        matches!(
            self,
            UnOp::Exp | UnOp::Log | UnOp::Exp2 | UnOp::Log2 | UnOp::Tanh | UnOp::Sin | UnOp::Cos
        )
    }
}
