//! WGSL spellings of types and constants.

use compute_ir::interp::{f16, value::Value};
use compute_ir::{Scalar, Type};

/// `f32`, `vec3<u32>`...
pub(super) fn ty(t: Type) -> String {
    if t.lanes == 1 {
        t.scalar.wgsl().to_string()
    } else {
        format!("vec{}<{}>", t.lanes, t.scalar.wgsl())
    }
}

/// Whether every lane of a constant has a WGSL literal (finite floats):
/// a NaN or infinity is not a valid constant expression.
pub(super) fn representable(v: &Value) -> bool {
    (0..usize::from(v.ty.lanes)).all(|i| match v.ty.scalar {
        Scalar::F32 => f32::from_bits(v.lanes[i] as u32).is_finite(),
        Scalar::F16 => f16::to_f32(v.lanes[i] as u16).is_finite(),
        Scalar::F64 => f64::from_bits(v.lanes[i]).is_finite(),
        _ => true,
    })
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

/// One scalar constant (finite floats only; see [`representable`]).
pub(super) fn scalar(s: Scalar, bits: u64) -> String {
    match s {
        Scalar::Bool => (if bits != 0 { "true" } else { "false" }).to_string(),
        Scalar::U32 => format!("{bits}u"),
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
        Scalar::F16 => float(format!("{:?}", f16::to_f32(bits as u16)), "h"),
    }
}

/// A constant value of any type.
pub(super) fn value(v: &Value) -> String {
    if v.ty.lanes == 1 {
        return scalar(v.ty.scalar, v.bits());
    }
    let lanes: Vec<String> = (0..usize::from(v.ty.lanes))
        .map(|i| scalar(v.ty.scalar, v.lanes[i]))
        .collect();
    format!("{}({})", ty(v.ty), lanes.join(", "))
}
