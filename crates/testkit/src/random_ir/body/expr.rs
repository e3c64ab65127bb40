//! Expressions of a random kernel: values of a wanted type, drawn from
//! what is in scope, literals and fresh operations.

use compute_ir::{BinOp, Op, Scalar, Type, UnOp, Val};

use super::super::{FloatOps, INPUT_LEN, rand_f32, rand_u32};
use super::{Gen, SCALARS};

impl Gen<'_> {
    fn floats(&self) -> bool {
        self.cfg.floats != FloatOps::None
    }

    pub(super) fn scalars(&self) -> Vec<Scalar> {
        SCALARS
            .iter()
            .copied()
            .filter(|s| *s != Scalar::F32 || self.floats())
            .collect()
    }

    pub(super) fn random_type(&mut self) -> Type {
        let scalars = self.scalars();
        let s = self.rng.pick(&scalars);
        let lanes = if self.cfg.vectors && self.rng.chance(30) {
            2 + self.rng.below(3) as u8
        } else {
            1
        };
        Type::vec(s, lanes)
    }

    fn in_scope(&self, ty: Type) -> Vec<Val> {
        self.scopes
            .iter()
            .flatten()
            .copied()
            .filter(|v| v.ty == ty)
            .collect()
    }

    pub(super) fn remember(&mut self, v: Val) -> Val {
        if let Some(s) = self.scopes.last_mut() {
            s.push(v);
        }
        v
    }

    pub(super) fn literal(&mut self, s: Scalar) -> Val {
        let tame = self.cfg.floats != FloatOps::All;
        match s {
            Scalar::U32 => {
                let x = rand_u32(self.rng);
                self.b.u32(x)
            }
            Scalar::I32 => {
                let x = rand_u32(self.rng) as i32;
                self.b.i32(x)
            }
            Scalar::F32 => {
                let x = rand_f32(self.rng, tame);
                self.b.f32(x)
            }
            _ => {
                let x = self.rng.chance(50);
                self.b.bool(x)
            }
        }
    }

    /// A value of type `ty`: an existing one, or a fresh operation.
    pub(super) fn value(&mut self, ty: Type, depth: u32) -> Val {
        let existing = self.in_scope(ty);
        if !existing.is_empty() && (depth >= 3 || self.rng.chance(40)) {
            return self.rng.pick(&existing);
        }
        if depth >= 3 {
            return if ty.lanes == 1 {
                self.literal(ty.scalar)
            } else {
                let x = self.literal(ty.scalar);
                self.b.splat(x, ty.lanes)
            };
        }
        let v = self.operation(ty, depth + 1);
        self.remember(v)
    }

    pub(super) fn index(&mut self, len: u32, depth: u32) -> Val {
        let i = if self.rng.chance(50) {
            self.value(Type::U32, depth)
        } else {
            let x = self.value(Type::I32, depth);
            self.b.cast(x, Scalar::U32)
        };
        let n = self.b.u32(len);
        self.b.rem(i, n)
    }

    /// A bit offset or count: mostly inside the width or just past it,
    /// sometimes any value (WGSL clamps both).
    fn bit_position(&mut self, depth: u32) -> Val {
        if self.rng.chance(70) {
            self.b.u32(self.rng.below(40))
        } else {
            self.value(Type::scalar(Scalar::U32), depth)
        }
    }

    fn operation(&mut self, ty: Type, depth: u32) -> Val {
        let s = ty.scalar;
        let all = self.cfg.floats == FloatOps::All;
        for _ in 0..8 {
            match self.rng.below(15) {
                0 if ty.lanes == 1 => {
                    return self.literal(s);
                }
                1 | 2 if s.is_numeric() => {
                    let mut ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Min, BinOp::Max];
                    if s.is_int() || all {
                        ops.extend([BinOp::Div, BinOp::Rem]);
                    }
                    if all && s.is_float() {
                        ops.extend([BinOp::Pow, BinOp::Atan2]);
                    }
                    let op = self.rng.pick(&ops);
                    let x = self.value(ty, depth);
                    let y = self.value(ty, depth);
                    return self.b.emit(Op::Binary(op, x.id, y.id));
                }
                3 if s.is_int() || s == Scalar::Bool => {
                    let op = if s == Scalar::Bool {
                        self.rng
                            .pick(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Eq, BinOp::Ne])
                    } else {
                        self.rng
                            .pick(&[BinOp::And, BinOp::Or, BinOp::Xor, BinOp::Shl, BinOp::Shr])
                    };
                    let x = self.value(ty, depth);
                    let yt = if matches!(op, BinOp::Shl | BinOp::Shr) {
                        ty.with_scalar(Scalar::U32)
                    } else {
                        ty
                    };
                    let y = self.value(yt, depth);
                    return self.b.emit(Op::Binary(op, x.id, y.id));
                }
                4 => {
                    let mut ops = Vec::new();
                    match s {
                        Scalar::Bool => ops.push(UnOp::Not),
                        Scalar::I32 => ops.extend([UnOp::Neg, UnOp::Abs, UnOp::BitNot, UnOp::Sign]),
                        Scalar::U32 => ops.extend([UnOp::BitNot, UnOp::Abs]),
                        _ => {
                            ops.extend([
                                UnOp::Neg,
                                UnOp::Abs,
                                UnOp::Floor,
                                UnOp::Ceil,
                                UnOp::Trunc,
                                UnOp::Round,
                            ]);
                            if all {
                                ops.extend([
                                    UnOp::Exp,
                                    UnOp::Log,
                                    UnOp::Sqrt,
                                    UnOp::InverseSqrt,
                                    UnOp::Tanh,
                                    UnOp::Sin,
                                    UnOp::Cos,
                                    UnOp::Exp2,
                                    UnOp::Log2,
                                    UnOp::Fract,
                                ]);
                            }
                        }
                    }
                    // Bit counts and reversal: 32-bit integers only.
                    if matches!(s, Scalar::I32 | Scalar::U32) {
                        ops.extend([
                            UnOp::CountOneBits,
                            UnOp::CountLeadingZeros,
                            UnOp::CountTrailingZeros,
                            UnOp::ReverseBits,
                        ]);
                    }
                    let op = self.rng.pick(&ops);
                    let x = self.value(ty, depth);
                    return self.b.emit(Op::Unary(op, x.id));
                }
                5 if s == Scalar::Bool => {
                    let scalars: Vec<Scalar> = self
                        .scalars()
                        .into_iter()
                        .filter(|s| s.is_numeric())
                        .collect();
                    let os = self.rng.pick(&scalars);
                    let op = self.rng.pick(&[
                        BinOp::Eq,
                        BinOp::Ne,
                        BinOp::Lt,
                        BinOp::Le,
                        BinOp::Gt,
                        BinOp::Ge,
                    ]);
                    let x = self.value(ty.with_scalar(os), depth);
                    let y = self.value(ty.with_scalar(os), depth);
                    return self.b.emit(Op::Binary(op, x.id, y.id));
                }
                6 => {
                    let lanes = if self.rng.chance(50) { 1 } else { ty.lanes };
                    let c = self.value(Type::vec(Scalar::Bool, lanes), depth);
                    let x = self.value(ty, depth);
                    let y = self.value(ty, depth);
                    return self.b.select(c, x, y);
                }
                7 if s.is_numeric() => {
                    let x = self.value(ty, depth);
                    let lo = self.value(ty, depth);
                    let hi = self.value(ty, depth);
                    if s.is_float() && all && self.rng.chance(50) {
                        return self.b.fma(x, lo, hi);
                    }
                    return self.b.clamp(x, lo, hi);
                }
                8 => {
                    let scalars = self.scalars();
                    let from = self.rng.pick(&scalars);
                    let x = self.value(ty.with_scalar(from), depth);
                    return self.b.cast(x, s);
                }
                9 if s != Scalar::Bool && (all || s != Scalar::F32) => {
                    let from = self.rng.pick(&[Scalar::U32, Scalar::I32, Scalar::F32]);
                    // A float's bits reach integer data only where floats
                    // are not compared bitwise: a driver may contract
                    // `a * b + c` into one fma (WGSL allows it), and the
                    // H200 did on seed 891 (`v2 + v2 * v2`, 1 ulp, stored
                    // through a bitcast into a u32 buffer).
                    if from == Scalar::F32 && !all {
                        continue;
                    }
                    let x = self.value(ty.with_scalar(from), depth);
                    return self.b.bitcast(x, s);
                }
                10 if ty.lanes == 1 && s != Scalar::Bool => {
                    let which = match s {
                        Scalar::U32 => 0,
                        Scalar::I32 => 1,
                        _ => 2,
                    };
                    let i = self.index(INPUT_LEN, depth);
                    return self.b.load(self.inputs[which], i);
                }
                11 if ty.lanes == 1 && self.cfg.vectors => {
                    let lanes = 2 + self.rng.below(3) as u8;
                    let v = self.value(Type::vec(s, lanes), depth);
                    if self.rng.chance(40) {
                        let lane = self.index(u32::from(lanes), depth);
                        return self.b.index(v, lane);
                    }
                    let lane = self.rng.below(u32::from(lanes)) as u8;
                    return self.b.extract(v, lane);
                }
                11 if ty.lanes > 1 => {
                    if self.rng.chance(40) {
                        let v = self.value(ty, depth);
                        let lane = self.index(u32::from(ty.lanes), depth);
                        let x = self.value(Type::scalar(s), depth);
                        return self.b.with_lane(v, lane, x);
                    }
                    let parts: Vec<Val> = (0..ty.lanes)
                        .map(|_| self.value(Type::scalar(s), depth))
                        .collect();
                    return self.b.vec(&parts);
                }
                14 => {
                    if let Some(local) = self.locals.iter().copied().find(|l| l.ty == ty) {
                        let i = self.index(local.len, depth);
                        return self.b.load(local, i);
                    }
                }
                12 if matches!(s, Scalar::I32 | Scalar::U32) => {
                    let e = self.value(ty, depth);
                    let offset = self.bit_position(depth);
                    let count = self.bit_position(depth);
                    if self.rng.chance(50) {
                        return self.b.extract_bits(e, offset, count);
                    }
                    let newbits = self.value(ty, depth);
                    return self.b.insert_bits(e, newbits, offset, count);
                }
                // Float dots only where values are not compared: the order
                // of the sum and fusing are the device's.
                13 if ty.lanes == 1
                    && self.cfg.vectors
                    && (matches!(s, Scalar::I32 | Scalar::U32) || all && s == Scalar::F32) =>
                {
                    let lanes = 2 + self.rng.below(3) as u8;
                    let a = self.value(Type::vec(s, lanes), depth);
                    let b = self.value(Type::vec(s, lanes), depth);
                    return self.b.dot(a, b);
                }
                _ => {}
            }
        }
        let x = self.literal(s);
        if ty.lanes == 1 {
            x
        } else {
            self.b.splat(x, ty.lanes)
        }
    }
}
