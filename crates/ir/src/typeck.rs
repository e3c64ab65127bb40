//! The typing rules: the one function that says what type an operation
//! yields, used by the builder as it goes and by the validator after.

use crate::ir::{ArrayRef, BinOp, KernelDef, Op, SubgroupOp, UnOp, ValueId};
use crate::{IrError, Scalar, Type};

fn val(def: &KernelDef, op: &'static str, v: ValueId) -> Result<Type, IrError> {
    def.values
        .get(v.0 as usize)
        .copied()
        .ok_or_else(|| IrError::structure(op, format!("value %{} does not exist", v.0)))
}

fn same(op: &'static str, a: Type, b: Type) -> Result<(), IrError> {
    if a == b {
        Ok(())
    } else {
        Err(IrError::ty(
            op,
            format!("operands must have the same type, got {a} and {b}"),
        ))
    }
}

fn index_type(op: &'static str, t: Type) -> Result<(), IrError> {
    if t == Type::U32 || t == Type::I32 {
        Ok(())
    } else {
        Err(IrError::ty(
            op,
            format!("index must be u32 or i32, got {t}"),
        ))
    }
}

/// The element type of an array reference, checking it exists.
pub(crate) fn array_elem(
    def: &KernelDef,
    op: &'static str,
    a: ArrayRef,
) -> Result<(Type, bool), IrError> {
    match a {
        ArrayRef::Global(i) => def
            .buffers
            .get(i as usize)
            .map(|b| (b.ty(), b.atomic))
            .ok_or_else(|| IrError::structure(op, format!("buffer {i} does not exist"))),
        ArrayRef::Shared(i) => def
            .shared
            .get(i as usize)
            .map(|s| (s.ty(), s.atomic))
            .ok_or_else(|| IrError::structure(op, format!("shared array {i} does not exist"))),
        ArrayRef::Local(i) => def
            .locals
            .get(i as usize)
            .map(|l| (l.ty, false))
            .ok_or_else(|| IrError::structure(op, format!("local array {i} does not exist"))),
    }
}

/// The element type of atomic array `a` (an atomic buffer the kernel may
/// write, or an atomic workgroup array).
pub(crate) fn atomic_array(
    def: &KernelDef,
    op: &'static str,
    a: ArrayRef,
) -> Result<Scalar, IrError> {
    let (ty, atomic) = array_elem(def, op, a)?;
    if !atomic {
        return Err(IrError::ty(
            op,
            match a {
                ArrayRef::Global(b) => {
                    format!("buffer {b} is not an atomic buffer (declare it with `atomic_buffer`)")
                }
                ArrayRef::Shared(s) => {
                    format!("shared array {s} is not atomic (declare it with `atomic_shared`)")
                }
                ArrayRef::Local(l) => format!("local array {l} cannot be atomic"),
            },
        ));
    }
    if let ArrayRef::Global(b) = a
        && def.buffers[b as usize].access != crate::Access::ReadWrite
    {
        return Err(IrError::structure(op, format!("buffer {b} is read-only")));
    }
    Ok(ty.scalar)
}

/// The result of subgroup operation `s` of an operand of type `t`.
fn subgroup_type(name: &'static str, s: SubgroupOp, t: Type) -> Result<Type, IrError> {
    let want = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(IrError::ty(
                name,
                format!("operand must be {what}, got {t}"),
            ))
        }
    };
    match s {
        SubgroupOp::Ballot | SubgroupOp::All | SubgroupOp::Any => {
            want(t == Type::BOOL, "bool")?;
            Ok(if s == SubgroupOp::Ballot {
                Type::vec(Scalar::U32, 4)
            } else {
                Type::BOOL
            })
        }
        SubgroupOp::And | SubgroupOp::Or | SubgroupOp::Xor => {
            want(
                matches!(t.scalar, Scalar::I32 | Scalar::U32),
                "i32 or u32 (or a vector of them)",
            )?;
            Ok(t)
        }
        SubgroupOp::Add
        | SubgroupOp::Mul
        | SubgroupOp::Min
        | SubgroupOp::Max
        | SubgroupOp::InclusiveAdd
        | SubgroupOp::InclusiveMul
        | SubgroupOp::ExclusiveAdd
        | SubgroupOp::ExclusiveMul
        | SubgroupOp::BroadcastFirst
        | SubgroupOp::Broadcast(_) => {
            want(
                matches!(t.scalar, Scalar::I32 | Scalar::U32 | Scalar::F32),
                "i32, u32 or f32 (or a vector of them)",
            )?;
            Ok(t)
        }
    }
}

/// The name of an operation, for messages.
pub fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Lit(_) => "lit",
        Op::Arg(_) => "scalar_arg",
        Op::Builtin(_) => "builtin",
        Op::Splat(..) => "splat",
        Op::Compose(_) => "compose",
        Op::Extract(..) => "extract",
        Op::Index(..) => "index",
        Op::WithLane(..) => "with_lane",
        Op::Unary(u, _) => u.name(),
        Op::Binary(b, ..) => b.name(),
        Op::Select { .. } => "select",
        Op::Clamp(..) => "clamp",
        Op::Fma(..) => "fma",
        Op::ExtractBits(..) => "extractBits",
        Op::InsertBits(..) => "insertBits",
        Op::Dot(..) => "dot",
        Op::Cast(..) => "cast",
        Op::Bitcast(..) => "bitcast",
        Op::Get(_) => "get",
        Op::Load(..) => "load",
        Op::ArrayLength(_) => "array_length",
        Op::AtomicLoad(..) => "atomic_load",
        Op::Atomic(a, ..) => a.wgsl(),
        Op::CompareExchange(..) => "atomicCompareExchangeWeak",
        Op::Subgroup(s, _) => s.wgsl(),
        Op::SubgroupShuffle(s, ..) => s.wgsl(),
    }
}

/// The type `op` yields, or why it is ill-typed.
pub fn op_type(def: &KernelDef, op: &Op) -> Result<Type, IrError> {
    let name = op_name(op);
    match op {
        Op::Lit(l) => Ok(Type::scalar(l.scalar())),
        Op::Arg(i) => def
            .scalars
            .get(*i as usize)
            .map(|s| Type::scalar(*s))
            .ok_or_else(|| IrError::structure(name, format!("scalar argument {i} does not exist"))),
        Op::Builtin(b) => Ok(b.ty()),
        Op::Splat(v, lanes) => {
            let t = val(def, name, *v)?;
            if t.is_vector() {
                return Err(IrError::ty(
                    name,
                    format!("operand must be a scalar, got {t}"),
                ));
            }
            if !(2..=4).contains(lanes) {
                return Err(IrError::ty(
                    name,
                    format!("vectors have 2 to 4 lanes, not {lanes}"),
                ));
            }
            Ok(Type::vec(t.scalar, *lanes))
        }
        Op::Compose(parts) => {
            if !(2..=4).contains(&parts.len()) {
                return Err(IrError::ty(
                    name,
                    format!("vectors have 2 to 4 lanes, not {}", parts.len()),
                ));
            }
            let first = val(def, name, parts[0])?;
            for p in parts {
                let t = val(def, name, *p)?;
                if t.is_vector() {
                    return Err(IrError::ty(name, format!("lanes must be scalars, got {t}")));
                }
                same(name, first, t)?;
            }
            Ok(Type::vec(first.scalar, parts.len() as u8))
        }
        Op::Extract(v, lane) => {
            let t = val(def, name, *v)?;
            if !t.is_vector() || *lane >= t.lanes {
                return Err(IrError::ty(name, format!("no lane {lane} in {t}")));
            }
            Ok(Type::scalar(t.scalar))
        }
        Op::Index(v, i) | Op::WithLane(v, i, _) => {
            let t = val(def, name, *v)?;
            if !t.is_vector() {
                return Err(IrError::ty(name, format!("{t} is not a vector")));
            }
            index_type(name, val(def, name, *i)?)?;
            if let Op::WithLane(_, _, x) = op {
                let tx = val(def, name, *x)?;
                if tx != Type::scalar(t.scalar) {
                    return Err(IrError::ty(name, format!("a lane of {t} is not {tx}")));
                }
                return Ok(t);
            }
            Ok(Type::scalar(t.scalar))
        }
        Op::Unary(u, v) => {
            let t = val(def, name, *v)?;
            let ok = match u {
                UnOp::Neg => t.scalar.is_signed(),
                UnOp::Not => t.scalar == Scalar::Bool,
                UnOp::BitNot => t.scalar.is_int(),
                UnOp::Abs => t.scalar.is_numeric(),
                UnOp::Sign => t.scalar == Scalar::I32 || t.scalar.is_float(),
                _ if u.int32_only() => matches!(t.scalar, Scalar::I32 | Scalar::U32),
                _ if t.scalar == Scalar::F64 => !u.not_on_f64(),
                _ => t.scalar.is_float(),
            };
            if !ok {
                let want = match u {
                    UnOp::Neg => "i32 or a float",
                    UnOp::Not => "bool",
                    UnOp::BitNot => "an integer",
                    UnOp::Abs => "a number",
                    UnOp::Sign => "i32 or a float",
                    _ if u.int32_only() => "i32 or u32",
                    _ if t.scalar == Scalar::F64 => "f32 or f16 (no 64-bit form on Vulkan)",
                    _ => "a float",
                };
                return Err(IrError::ty(
                    name,
                    format!("operand must be {want}, got {t}"),
                ));
            }
            Ok(t)
        }
        Op::Binary(b, x, y) => {
            let tx = val(def, name, *x)?;
            let ty = val(def, name, *y)?;
            match b {
                BinOp::Shl | BinOp::Shr => {
                    if !tx.scalar.is_int() {
                        return Err(IrError::ty(
                            name,
                            format!("left operand must be an integer, got {tx}"),
                        ));
                    }
                    if ty != tx.with_scalar(Scalar::U32) {
                        return Err(IrError::ty(
                            name,
                            format!(
                                "shift amount must be {}, got {ty}",
                                tx.with_scalar(Scalar::U32)
                            ),
                        ));
                    }
                    Ok(tx)
                }
                _ => {
                    same(name, tx, ty)?;
                    let s = tx.scalar;
                    let ok = match b {
                        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
                            s.is_numeric()
                        }
                        BinOp::Min | BinOp::Max => s.is_numeric(),
                        BinOp::Pow | BinOp::Atan2 => s.is_float() && s != Scalar::F64,
                        BinOp::And | BinOp::Or | BinOp::Xor => s.is_int() || s == Scalar::Bool,
                        BinOp::Eq | BinOp::Ne => true,
                        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => s.is_numeric(),
                        BinOp::Shl | BinOp::Shr => false,
                    };
                    if !ok {
                        return Err(IrError::ty(name, format!("not defined on {tx}")));
                    }
                    if b.is_comparison() {
                        Ok(tx.with_scalar(Scalar::Bool))
                    } else {
                        Ok(tx)
                    }
                }
            }
        }
        Op::Select {
            cond,
            on_true,
            on_false,
        } => {
            let tc = val(def, name, *cond)?;
            let tt = val(def, name, *on_true)?;
            let tf = val(def, name, *on_false)?;
            same(name, tt, tf)?;
            if tc.scalar != Scalar::Bool || (tc.lanes != 1 && tc.lanes != tt.lanes) {
                return Err(IrError::ty(
                    name,
                    format!(
                        "condition must be bool or {}, got {tc}",
                        tt.with_scalar(Scalar::Bool)
                    ),
                ));
            }
            Ok(tt)
        }
        Op::Clamp(x, lo, hi) | Op::Fma(x, lo, hi) => {
            let t = val(def, name, *x)?;
            same(name, t, val(def, name, *lo)?)?;
            same(name, t, val(def, name, *hi)?)?;
            let ok = if matches!(op, Op::Fma(..)) {
                t.scalar.is_float()
            } else {
                t.scalar.is_numeric()
            };
            if !ok {
                return Err(IrError::ty(name, format!("not defined on {t}")));
            }
            Ok(t)
        }
        Op::ExtractBits(e, offset, count) | Op::InsertBits(e, _, offset, count) => {
            let t = val(def, name, *e)?;
            if !matches!(t.scalar, Scalar::I32 | Scalar::U32) {
                return Err(IrError::ty(name, format!("not defined on {t}")));
            }
            if let Op::InsertBits(_, newbits, ..) = op {
                same(name, t, val(def, name, *newbits)?)?;
            }
            let u = Type::scalar(Scalar::U32);
            same(name, u, val(def, name, *offset)?)?;
            same(name, u, val(def, name, *count)?)?;
            Ok(t)
        }
        Op::Dot(a, b) => {
            let t = val(def, name, *a)?;
            same(name, t, val(def, name, *b)?)?;
            let ok = t.lanes > 1
                && matches!(
                    t.scalar,
                    Scalar::F32 | Scalar::F16 | Scalar::I32 | Scalar::U32
                );
            if !ok {
                return Err(IrError::ty(name, format!("not defined on {t}")));
            }
            Ok(Type::scalar(t.scalar))
        }
        Op::Cast(v, to) => Ok(val(def, name, *v)?.with_scalar(*to)),
        Op::Bitcast(v, to) => {
            let t = val(def, name, *v)?;
            let ok32 = |s: Scalar| matches!(s, Scalar::I32 | Scalar::U32 | Scalar::F32);
            let ok64 = |s: Scalar| matches!(s, Scalar::I64 | Scalar::U64 | Scalar::F64);
            if !(ok32(t.scalar) && ok32(*to) || ok64(t.scalar) && ok64(*to)) {
                return Err(IrError::ty(
                    name,
                    format!(
                        "bitcast is between i32, u32 and f32, or between i64, u64 and f64 \
                         (and their vectors), not {t} to {to}"
                    ),
                ));
            }
            Ok(t.with_scalar(*to))
        }
        Op::Get(var) => {
            def.vars.get(var.0 as usize).copied().ok_or_else(|| {
                IrError::structure(name, format!("variable {} does not exist", var.0))
            })
        }
        Op::Load(a, i) => {
            let (ty, atomic) = array_elem(def, name, *a)?;
            if atomic {
                return Err(IrError::ty(
                    name,
                    "an atomic buffer is read with `atomic_load`",
                ));
            }
            index_type(name, val(def, name, *i)?)?;
            Ok(ty)
        }
        Op::ArrayLength(b) => {
            if def.buffers.get(*b as usize).is_none() {
                return Err(IrError::structure(
                    name,
                    format!("buffer {b} does not exist"),
                ));
            }
            Ok(Type::U32)
        }
        Op::AtomicLoad(a, i) => {
            let elem = atomic_array(def, name, *a)?;
            index_type(name, val(def, name, *i)?)?;
            Ok(Type::scalar(elem))
        }
        Op::CompareExchange(a, i, cmp, v) => {
            let elem = atomic_array(def, name, *a)?;
            index_type(name, val(def, name, *i)?)?;
            for (what, x) in [("compared value", cmp), ("value", v)] {
                let t = val(def, name, *x)?;
                if t != Type::scalar(elem) {
                    return Err(IrError::ty(name, format!("{what} must be {elem}, got {t}")));
                }
            }
            Ok(Type::vec(elem, 2))
        }
        Op::Subgroup(s, v) => subgroup_type(name, *s, val(def, name, *v)?),
        Op::SubgroupShuffle(_, v, lane) => {
            let t = val(def, name, *v)?;
            if !matches!(t.scalar, Scalar::I32 | Scalar::U32 | Scalar::F32) {
                return Err(IrError::ty(
                    name,
                    format!("operand must be i32, u32 or f32 (or a vector of them), got {t}"),
                ));
            }
            let tl = val(def, name, *lane)?;
            if tl != Type::U32 {
                return Err(IrError::ty(name, format!("the lane must be u32, got {tl}")));
            }
            Ok(t)
        }
        Op::Atomic(_, a, i, v) => {
            let elem = atomic_array(def, name, *a)?;
            index_type(name, val(def, name, *i)?)?;
            let tv = val(def, name, *v)?;
            if tv != Type::scalar(elem) {
                return Err(IrError::ty(name, format!("value must be {elem}, got {tv}")));
            }
            Ok(Type::scalar(elem))
        }
    }
}

/// Casts are value conversions between numeric and bool types; bool <->
/// float and the like are all allowed (`f32(true) == 1.0`).
pub(crate) fn check_type(op: &'static str, t: Type) -> Result<(), IrError> {
    if !(1..=4).contains(&t.lanes) {
        return Err(IrError::ty(
            op,
            format!("vectors have 2 to 4 lanes, not {}", t.lanes),
        ));
    }
    Ok(())
}
