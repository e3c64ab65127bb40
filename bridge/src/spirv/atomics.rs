//! Signed atomic minimum and maximum on memory cubecl-spirv types unsigned.
//!
//! naga reads `OpAtomicSMin`/`OpAtomicSMax` as `atomicMin`/`atomicMax`,
//! whose signedness is the memory's type: on cubecl-spirv's `u32` buffers
//! that is an unsigned comparison, and `max(-1, 1)` would be `-1`. The
//! variable such an atomic reaches is retyped instead: every unsigned
//! integer in its type becomes the signed integer of the same width (the
//! same bytes, so the host sees no change), the pointers derived from it
//! follow, and each access through them converts at the edge: a load's
//! (or an atomic's) result is bitcast back to the unsigned type its users
//! expect, a stored (or atomic) value is bitcast to the signed one.
//!
//! An unsigned atomic minimum or maximum on the same variable then reads
//! signed memory, which the allowlist refuses; any other use of a retyped
//! pointer than the accesses above fails the rewrite.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Op, Word};

use super::{id_operand, type_map};

/// See the module documentation.
pub fn signed_atomics(m: &mut Module) -> Result<(), String> {
    let types = type_map(m);
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    let mut base_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
        if matches!(
            i.class.opcode,
            Op::AccessChain | Op::InBoundsAccessChain | Op::CopyObject
        ) && let (Some(id), Some(base)) = (i.result_id, id_operand(i, 0))
        {
            base_of.insert(id, base);
        }
    }
    let pointee = |p: Word| type_of.get(&p).and_then(|t| id_operand(types.get(t)?, 1));
    let unsigned = |t: Word| {
        types.get(&t).is_some_and(|t| {
            t.class.opcode == Op::TypeInt && t.operands.get(1) == Some(&Operand::LiteralBit32(0))
        })
    };
    let mut roots = HashSet::new();
    for i in m.functions.iter().flat_map(|f| f.all_inst_iter()) {
        if !matches!(i.class.opcode, Op::AtomicSMin | Op::AtomicSMax) {
            continue;
        }
        let Some(p) = id_operand(i, 0).filter(|p| pointee(*p).is_some_and(unsigned)) else {
            continue;
        };
        let mut root = p;
        while let Some(b) = base_of.get(&root) {
            root = *b;
        }
        roots.insert(root);
    }
    if roots.is_empty() {
        return Ok(());
    }
    let mut twins = Twins {
        types: &types,
        decorations: m.annotations.clone(),
        bound: m.header.as_ref().map_or(1, |h| h.bound),
        map: HashMap::new(),
        new: Vec::new(),
        annotations: Vec::new(),
    };
    // The variables themselves (module or function level) get the twin of
    // their pointer type; new types go before the first such global.
    let global_at = m
        .types_global_values
        .iter()
        .position(|i| i.result_id.is_some_and(|id| roots.contains(&id)));
    let mut found = 0;
    let variables = m.types_global_values.iter_mut().chain(
        m.functions
            .iter_mut()
            .flat_map(|f| f.blocks.iter_mut().flat_map(|b| b.instructions.iter_mut())),
    );
    for i in variables {
        if i.class.opcode == Op::Variable && i.result_id.is_some_and(|id| roots.contains(&id)) {
            i.result_type = i.result_type.map(|t| twins.twin(t));
            found += 1;
        }
    }
    if found != roots.len() {
        return Err("a signed atomic through a pointer that leads back to no variable".into());
    }
    let mut derived: HashSet<Word> = roots;
    for f in &mut m.functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for mut i in b.instructions.drain(..) {
                let through = id_operand(&i, 0).is_some_and(|p| derived.contains(&p));
                // (operands holding a value stored, whether a result is read)
                let (values, result): (&[usize], bool) = match i.class.opcode {
                    Op::AccessChain | Op::InBoundsAccessChain | Op::CopyObject if through => {
                        i.result_type = i.result_type.map(|t| twins.twin(t));
                        derived.extend(i.result_id);
                        (&[], false)
                    }
                    Op::ArrayLength if through => (&[], false),
                    Op::Load | Op::AtomicLoad if through => (&[], true),
                    Op::Store if through => (&[1], false),
                    Op::AtomicStore if through => (&[3], false),
                    Op::AtomicExchange
                    | Op::AtomicIAdd
                    | Op::AtomicISub
                    | Op::AtomicSMin
                    | Op::AtomicSMax
                    | Op::AtomicUMin
                    | Op::AtomicUMax
                    | Op::AtomicAnd
                    | Op::AtomicOr
                    | Op::AtomicXor
                        if through =>
                    {
                        (&[3], true)
                    }
                    Op::AtomicCompareExchange if through => (&[4, 5], true),
                    _ if i
                        .operands
                        .iter()
                        .any(|o| matches!(o, Operand::IdRef(x) if derived.contains(x))) =>
                    {
                        return Err(format!(
                            "`Op{}` uses memory a signed atomic retypes",
                            i.class.opname
                        ));
                    }
                    _ => (&[], false),
                };
                for &k in values {
                    let Some(v) = id_operand(&i, k) else { continue };
                    let t = type_of.get(&v).copied().unwrap_or(0);
                    if let Some(s) = twins.scalar_twin(t)? {
                        let cast = twins.fresh();
                        out.push(bitcast(s, cast, v));
                        i.operands[k] = Operand::IdRef(cast);
                    }
                }
                if let (true, Some(t), Some(id)) = (result, i.result_type, i.result_id)
                    && let Some(s) = twins.scalar_twin(t)?
                {
                    let inner = twins.fresh();
                    i.result_type = Some(s);
                    i.result_id = Some(inner);
                    out.push(i);
                    out.push(bitcast(t, id, inner));
                    continue;
                }
                out.push(i);
            }
            b.instructions = out;
        }
    }
    if let Some(h) = m.header.as_mut() {
        h.bound = twins.bound;
    }
    let at = global_at.unwrap_or(m.types_global_values.len());
    for (k, t) in std::mem::take(&mut twins.new).into_iter().enumerate() {
        m.types_global_values.insert(at + k, t);
    }
    m.annotations.append(&mut twins.annotations);
    Ok(())
}

fn bitcast(ty: Word, id: Word, value: Word) -> Instruction {
    Instruction::new(Op::Bitcast, Some(ty), Some(id), vec![Operand::IdRef(value)])
}

/// Signed twins of types: the same type with every unsigned integer in it
/// signed, new types (with the layout decorations of the original) created
/// on demand.
struct Twins<'a> {
    types: &'a HashMap<Word, Instruction>,
    decorations: Vec<Instruction>,
    bound: Word,
    map: HashMap<Word, Word>,
    new: Vec<Instruction>,
    annotations: Vec<Instruction>,
}

impl Twins<'_> {
    fn fresh(&mut self) -> Word {
        self.bound += 1;
        self.bound - 1
    }

    /// The twin of a value's type `t` when it differs: a scalar or vector,
    /// which a bitcast converts; an aggregate is an error.
    fn scalar_twin(&mut self, t: Word) -> Result<Option<Word>, String> {
        let s = self.twin(t);
        if s == t {
            return Ok(None);
        }
        match self.types.get(&t).map(|t| t.class.opcode) {
            Some(Op::TypeInt | Op::TypeVector) => Ok(Some(s)),
            _ => Err(
                "a whole aggregate loaded or stored through memory a signed atomic retypes".into(),
            ),
        }
    }

    fn twin(&mut self, t: Word) -> Word {
        if let Some(s) = self.map.get(&t) {
            return *s;
        }
        let Some(i) = self.types.get(&t).cloned() else {
            return t;
        };
        let mut ops = i.operands.clone();
        let mut changed = false;
        // The element (vector, arrays), members (struct) or pointee
        // (pointer); an array's length is a constant, not a type.
        let parts: Vec<usize> = match i.class.opcode {
            Op::TypeInt if ops.get(1) == Some(&Operand::LiteralBit32(0)) => {
                ops[1] = Operand::LiteralBit32(1);
                changed = true;
                vec![]
            }
            Op::TypeStruct => (0..ops.len()).collect(),
            Op::TypePointer => vec![1],
            Op::TypeVector | Op::TypeArray | Op::TypeRuntimeArray => vec![0],
            _ => vec![],
        };
        for k in parts {
            if let Some(Operand::IdRef(p)) = ops.get(k).cloned() {
                let s = self.twin(p);
                if s != p {
                    ops[k] = Operand::IdRef(s);
                    changed = true;
                }
            }
        }
        if !changed {
            self.map.insert(t, t);
            return t;
        }
        // A scalar, vector or pointer type the module (or this pass) has
        // already: SPIR-V declares those once.
        let once = matches!(
            i.class.opcode,
            Op::TypeInt | Op::TypeVector | Op::TypePointer
        );
        let existing = self
            .types
            .values()
            .chain(self.new.iter())
            .find(|x| once && x.class.opcode == i.class.opcode && x.operands == ops)
            .and_then(|x| x.result_id);
        let id = match existing {
            Some(id) => id,
            None => {
                let id = self.fresh();
                self.new
                    .push(Instruction::new(i.class.opcode, None, Some(id), ops));
                // The layout (strides, offsets, `Block`) goes with the type.
                for a in &self.decorations {
                    if matches!(a.class.opcode, Op::Decorate | Op::MemberDecorate)
                        && a.operands.first() == Some(&Operand::IdRef(t))
                    {
                        let mut a = a.clone();
                        a.operands[0] = Operand::IdRef(id);
                        self.annotations.push(a);
                    }
                }
                id
            }
        };
        self.map.insert(t, id);
        id
    }
}
