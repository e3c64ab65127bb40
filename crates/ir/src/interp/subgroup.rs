//! A subgroup operation over the live invocations of one subgroup, once
//! every one of them waits at it: each invocation's result.
//!
//! Reductions and scans fold in lane order (`subgroup_invocation_id`), the
//! same order for integers as any other (they wrap) and one order among
//! those a device may take for floats. A shuffle or broadcast that reads an
//! invocation that is not live, or a shuffle whose mask or delta differs
//! between invocations, is an error: WGSL leaves the first indeterminate
//! and requires the second to be uniform. A shuffle up or down past the end
//! of the subgroup (lane `i - delta < 0`, `i + delta >= size`) reads the
//! invocation's own operand here, where WGSL leaves it indeterminate: a
//! kernel must discard those lanes' results (a scan by shuffles selects
//! `lane >= delta`), and a test that does not compares garbage on the
//! device.

use crate::error::RunError;
use crate::interp::exec::Collective;
use crate::interp::value::{self, Value};
use crate::ir::{BinOp, ShuffleOp, SubgroupOp};
use crate::{Scalar, Type};

/// One live invocation waiting at the operation: its lane, the operation,
/// its operand and (shuffles) its lane, mask or delta.
pub(crate) type Waiting = (usize, Collective, Value, Value);

/// Each live invocation's result, in the order of `ops` (lane order).
pub(crate) fn evaluate(
    ops: &[Waiting],
    size: usize,
    workgroup: [u32; 3],
    subgroup: u32,
) -> Result<Vec<Value>, RunError> {
    let Some(&(_, op, first, _)) = ops.first() else {
        return Ok(Vec::new());
    };
    let fail = |op: &'static str, problem: String| RunError::SubgroupLane {
        op,
        workgroup,
        subgroup,
        problem,
    };
    let ty = first.ty;
    let same = |v: Value| vec![v; ops.len()];
    let fold = |b: BinOp| {
        ops.iter()
            .skip(1)
            .fold(first, |acc, (_, _, x, _)| value::binary(b, ty, acc, *x))
    };
    let scan = |b: BinOp, start: Value, inclusive: bool| {
        let mut acc = start;
        ops.iter()
            .map(|(_, _, x, _)| {
                let before = acc;
                acc = value::binary(b, ty, acc, *x);
                if inclusive { acc } else { before }
            })
            .collect::<Vec<_>>()
    };
    let of_lane = |lane: u64, name: &'static str| {
        ops.iter()
            .find(|(l, ..)| *l as u64 == lane)
            .map(|(_, _, x, _)| *x)
            .ok_or_else(|| fail(name, format!("lane {lane} is not an active invocation")))
    };
    Ok(match op {
        Collective::One(op) => match op {
            SubgroupOp::Add => same(fold(BinOp::Add)),
            SubgroupOp::Mul => same(fold(BinOp::Mul)),
            SubgroupOp::Min => same(fold(BinOp::Min)),
            SubgroupOp::Max => same(fold(BinOp::Max)),
            SubgroupOp::And | SubgroupOp::All => same(fold(BinOp::And)),
            SubgroupOp::Or | SubgroupOp::Any => same(fold(BinOp::Or)),
            SubgroupOp::Xor => same(fold(BinOp::Xor)),
            SubgroupOp::InclusiveAdd => scan(BinOp::Add, Value::zero(ty), true),
            SubgroupOp::InclusiveMul => scan(BinOp::Mul, one(ty), true),
            SubgroupOp::ExclusiveAdd => scan(BinOp::Add, Value::zero(ty), false),
            SubgroupOp::ExclusiveMul => scan(BinOp::Mul, one(ty), false),
            SubgroupOp::BroadcastFirst => same(first),
            SubgroupOp::Broadcast(lane) => same(of_lane(u64::from(lane), op.wgsl())?),
            SubgroupOp::Ballot => {
                let mut out = Value::zero(Type::vec(Scalar::U32, 4));
                for (i, _, x, _) in ops {
                    if x.bits() != 0 {
                        out.lanes[i / 32] |= 1 << (i % 32);
                    }
                }
                same(out)
            }
        },
        Collective::Shuffle(s) => {
            let name = s.wgsl();
            let arg = |v: &Value| v.bits() & u64::from(u32::MAX);
            if s != ShuffleOp::Shuffle && ops.iter().any(|(.., l)| arg(l) != arg(&ops[0].3)) {
                return Err(fail(
                    name,
                    "the mask or delta differs between invocations".into(),
                ));
            }
            let mut out = Vec::with_capacity(ops.len());
            for (lane, _, _, l) in ops {
                let (lane, a) = (*lane as u64, arg(l));
                let from = match s {
                    ShuffleOp::Shuffle => a,
                    ShuffleOp::Xor => lane ^ a,
                    // Past either end of the subgroup: the invocation's own
                    // operand (see the module doc).
                    ShuffleOp::Up => lane.checked_sub(a).unwrap_or(lane),
                    ShuffleOp::Down => Some(lane + a)
                        .filter(|f| (*f as usize) < size)
                        .unwrap_or(lane),
                };
                out.push(of_lane(from, name)?);
            }
            out
        }
    })
}

/// 1 in every lane of `ty` (i32, u32 or f32).
fn one(ty: Type) -> Value {
    let mut v = Value::zero(ty);
    let bits = match ty.scalar {
        Scalar::F32 => u64::from(1.0f32.to_bits()),
        Scalar::F16 => 0x3c00,
        Scalar::F64 => 1.0f64.to_bits(),
        Scalar::Bool | Scalar::I32 | Scalar::U32 | Scalar::I64 | Scalar::U64 => 1,
    };
    for lane in &mut v.lanes[..usize::from(ty.lanes)] {
        *lane = bits;
    }
    v
}
