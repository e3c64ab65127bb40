//! Values read across blocks by instructions naga's front end reads with
//! its expression emitter stopped.
//!
//! naga 30's SPIR-V front end turns a value defined in a block whose
//! structured body is not an ancestor of the reader's (a loop header's
//! value read after the loop, say: dominance allows it, naga's nested
//! bodies do not) into a spill: a local variable and a load. It emits that
//! load through its expression emitter, which the `OpGroupNonUniform*`
//! family stops before reading its operands (the only instructions of
//! `front/spv/next_block.rs` that do). There `Emitter::finish` unwraps
//! `None` and the front end panics (seen on cubek-reduce's plane
//! kernels). An `OpCopyObject` of the operand placed just before, in the
//! reader's own block, reads it with the emitter running (the spill
//! happens there) and hands the reader a value of its own block.

use std::collections::HashMap;

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

use super::fresh;

/// Every such operand defined in another block is read through a copy
/// made in the reader's block.
pub fn copy_cross_block_operands(m: &mut Module) {
    for f in 0..m.functions.len() {
        // Where each value of the function is defined, and its type.
        let mut defined: HashMap<Word, (usize, Word)> = HashMap::new();
        for (b, block) in m.functions[f].blocks.iter().enumerate() {
            for inst in &block.instructions {
                if let (Some(id), Some(ty)) = (inst.result_id, inst.result_type) {
                    defined.insert(id, (b, ty));
                }
            }
        }
        for b in 0..m.functions[f].blocks.len() {
            let mut k = 0;
            while k < m.functions[f].blocks[b].instructions.len() {
                let inst = &m.functions[f].blocks[b].instructions[k];
                let reads: Vec<(usize, Word, Word)> = stopped_operands(inst)
                    .filter_map(|(n, id)| match defined.get(&id) {
                        Some(&(at, ty)) if at != b => Some((n, id, ty)),
                        _ => None,
                    })
                    .collect();
                if reads.is_empty() {
                    k += 1;
                    continue;
                }
                let mut copies = Vec::new();
                for (n, id, ty) in reads {
                    let copy = fresh(m);
                    copies.push(Instruction::new(
                        Op::CopyObject,
                        Some(ty),
                        Some(copy),
                        vec![Operand::IdRef(id)],
                    ));
                    m.functions[f].blocks[b].instructions[k].operands[n] = Operand::IdRef(copy);
                }
                let added = copies.len();
                let block = &mut m.functions[f].blocks[b].instructions;
                block.splice(k..k, copies);
                k += added + 1;
            }
        }
    }
}

/// The value operands `inst` reads with naga's emitter stopped: (operand
/// index, id).
fn stopped_operands(inst: &Instruction) -> impl Iterator<Item = (usize, Word)> + '_ {
    let stopped = group_non_uniform(inst.class.opcode);
    inst.operands
        .iter()
        .enumerate()
        .filter_map(move |(n, o)| match o {
            Operand::IdRef(id) if stopped => Some((n, *id)),
            _ => None,
        })
}

/// The subgroup instructions naga's front end reads (each stops the
/// emitter first).
fn group_non_uniform(op: Op) -> bool {
    matches!(
        op,
        Op::GroupNonUniformBallot
            | Op::GroupNonUniformAll
            | Op::GroupNonUniformAny
            | Op::GroupNonUniformAllEqual
            | Op::GroupNonUniformIAdd
            | Op::GroupNonUniformFAdd
            | Op::GroupNonUniformIMul
            | Op::GroupNonUniformFMul
            | Op::GroupNonUniformSMax
            | Op::GroupNonUniformUMax
            | Op::GroupNonUniformFMax
            | Op::GroupNonUniformSMin
            | Op::GroupNonUniformUMin
            | Op::GroupNonUniformFMin
            | Op::GroupNonUniformBitwiseAnd
            | Op::GroupNonUniformBitwiseOr
            | Op::GroupNonUniformBitwiseXor
            | Op::GroupNonUniformLogicalAnd
            | Op::GroupNonUniformLogicalOr
            | Op::GroupNonUniformLogicalXor
            | Op::GroupNonUniformBroadcastFirst
            | Op::GroupNonUniformBroadcast
            | Op::GroupNonUniformShuffle
            | Op::GroupNonUniformShuffleXor
            | Op::GroupNonUniformShuffleUp
            | Op::GroupNonUniformShuffleDown
            | Op::GroupNonUniformQuadBroadcast
            | Op::GroupNonUniformQuadSwap
    )
}
