//! WGSL spellings of types and literals.
//!
//! Independent of `compute_ir::interp` on purpose: the interpreter is the
//! oracle the emitted code is tested against, so nothing here borrows its
//! arithmetic (not even its f16 decoding).

use compute_ir::{Scalar, Type};

/// `f32`, `vec3<u32>`...
pub(super) fn ty(t: Type) -> String {
    if t.lanes == 1 {
        t.scalar.wgsl().to_string()
    } else {
        format!("vec{}<{}>", t.lanes, t.scalar.wgsl())
    }
}

/// The value of f16 `bits` as an f32 (exact: every f16 is an f32). A NaN
/// keeps its payload, quieted.
pub(super) fn f16_to_f32(bits: u16) -> f32 {
    let negative = bits & 0x8000 != 0;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let magnitude = match exponent {
        // Zero or subnormal: mantissa * 2^-24, exact in f32.
        0 => mantissa as f32 * f32::from_bits(0x3380_0000),
        0x1f if mantissa == 0 => f32::INFINITY,
        0x1f => f32::from_bits(0x7fc0_0000 | (mantissa << 13)),
        // Normal: rebias the exponent (15 -> 127), widen the mantissa.
        e => f32::from_bits(((e + 127 - 15) << 23) | (mantissa << 13)),
    };
    if negative { -magnitude } else { magnitude }
}

/// Whether a scalar of type `s` with `bits` has a WGSL literal (a finite
/// float, or any integer or bool): WGSL has no NaN or infinity literal.
pub(super) fn representable(s: Scalar, bits: u64) -> bool {
    match s {
        Scalar::F32 => f32::from_bits(bits as u32).is_finite(),
        Scalar::F16 => f16_to_f32(bits as u16).is_finite(),
        Scalar::F64 => f64::from_bits(bits).is_finite(),
        _ => true,
    }
}

fn float(s: String, suffix: &str) -> String {
    // `{:?}` is the shortest string that reads back as the same float; for
    // an f16 value (printed as f32) it also reads back as the same f16
    // (exactly representable).
    let s = if s.contains(['.', 'e', 'E']) {
        s
    } else {
        format!("{s}.0")
    };
    if let Some(rest) = s.strip_prefix('-') {
        format!("(-{rest}{suffix})")
    } else {
        format!("{s}{suffix}")
    }
}

/// One scalar literal (finite floats only; see [`representable`]).
pub(super) fn scalar(s: Scalar, bits: u64) -> String {
    match s {
        Scalar::Bool => (if bits != 0 { "true" } else { "false" }).to_string(),
        Scalar::U32 => format!("{}u", bits as u32),
        Scalar::U64 => format!("{bits}lu"),
        Scalar::I64 => {
            let v = bits as i64;
            if v == i64::MIN {
                "(-9223372036854775807li - 1li)".to_string()
            } else if v < 0 {
                format!("(-{}li)", -v)
            } else {
                format!("{v}li")
            }
        }
        Scalar::F64 => float(format!("{:?}", f64::from_bits(bits)), "lf"),
        Scalar::I32 => {
            let v = bits as i32;
            if v == i32::MIN {
                "bitcast<i32>(0x80000000u)".to_string()
            } else if v < 0 {
                format!("(-{}i)", -v)
            } else {
                format!("{v}i")
            }
        }
        Scalar::F32 => float(format!("{:?}", f32::from_bits(bits as u32)), "f"),
        Scalar::F16 => float(format!("{:?}", f16_to_f32(bits as u16)), "h"),
    }
}

/// `bits` (a representable scalar of `t`'s scalar type) in every lane of
/// `t`.
pub(super) fn splat(t: Type, bits: u64) -> String {
    let lit = scalar(t.scalar, bits);
    if t.lanes == 1 {
        lit
    } else {
        format!("{}({lit})", ty(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two implementations written apart agree on every f16 (the
    /// interpreter's is the oracle's; this one spells the emitter's
    /// literals).
    #[test]
    fn f16_decoding_agrees_with_the_interpreter_on_every_value() {
        for bits in 0..=u16::MAX {
            let ours = f16_to_f32(bits);
            let oracle = compute_ir::interp::f16::to_f32(bits);
            assert!(
                ours.to_bits() == oracle.to_bits() || (ours.is_nan() && oracle.is_nan()),
                "{bits:#06x}: {ours:?} vs {oracle:?}"
            );
        }
    }

    #[test]
    fn negative_and_extreme_integers_are_spelled_as_wgsl_reads_them() {
        assert_eq!(scalar(Scalar::I32, (-5i32) as u32 as u64), "(-5i)");
        assert_eq!(
            scalar(Scalar::I32, i32::MIN as u32 as u64),
            "bitcast<i32>(0x80000000u)"
        );
        assert_eq!(
            scalar(Scalar::I64, i64::MIN as u64),
            "(-9223372036854775807li - 1li)"
        );
        assert_eq!(scalar(Scalar::U32, u64::from(u32::MAX)), "4294967295u");
        assert_eq!(scalar(Scalar::F32, u64::from(1.0f32.to_bits())), "1.0f");
        assert_eq!(scalar(Scalar::F16, 0xbc00), "(-1.0h)");
        assert!(!representable(Scalar::F16, 0x7c00), "infinity");
    }
}
