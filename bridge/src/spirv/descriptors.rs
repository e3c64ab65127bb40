//! Device addresses into descriptor bindings (see the module documentation).

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{AddressingModel, Capability, Decoration, Op, StorageClass, Word};

pub fn descriptors(module: &Module) -> Result<(Module, usize), String> {
    let mut m = module.clone();
    let types: HashMap<Word, Instruction> = m
        .types_global_values
        .iter()
        .filter_map(|i| i.result_id.map(|id| (id, i.clone())))
        .collect();
    let pointer = |id: Word| -> Option<(StorageClass, Word)> {
        let t = types.get(&id)?;
        if t.class.opcode != Op::TypePointer {
            return None;
        }
        match (&t.operands[0], &t.operands[1]) {
            (Operand::StorageClass(sc), Operand::IdRef(pointee)) => Some((*sc, *pointee)),
            _ => None,
        }
    };
    let constants: HashMap<Word, u32> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match (i.result_id, i.operands.first()) {
            (Some(id), Some(Operand::LiteralBit32(v))) => Some((id, *v)),
            _ => None,
        })
        .collect();

    // The block of addresses: a PushConstant/Uniform variable whose struct
    // holds PhysicalStorageBuffer pointers only.
    let mut params: Option<(Word, Word, Vec<Word>)> = None; // var, struct, member pointer types
    for inst in &m.types_global_values {
        if inst.class.opcode != Op::Variable {
            continue;
        }
        let Some((sc, st)) = inst.result_type.and_then(pointer) else {
            continue;
        };
        if !matches!(sc, StorageClass::PushConstant | StorageClass::Uniform) {
            continue;
        }
        let Some(s) = types.get(&st).filter(|s| s.class.opcode == Op::TypeStruct) else {
            continue;
        };
        let members: Vec<Word> = s
            .operands
            .iter()
            .filter_map(|o| match o {
                Operand::IdRef(id) => Some(*id),
                _ => None,
            })
            .collect();
        if members
            .iter()
            .all(|t| pointer(*t).is_some_and(|(sc, _)| sc == StorageClass::PhysicalStorageBuffer))
        {
            params = Some((inst.result_id.unwrap_or(0), st, members));
        }
    }
    let Some((params_var, params_struct, members)) = params else {
        // No buffers and no metadata: nothing to rewrite.
        return Ok((m, 0));
    };

    let mut bound = m.header.as_ref().map(|h| h.bound).unwrap_or(0);
    let mut vars = Vec::with_capacity(members.len());
    for (j, ty) in members.iter().enumerate() {
        let id = bound;
        bound += 1;
        vars.push(id);
        m.types_global_values.push(Instruction::new(
            Op::Variable,
            Some(*ty),
            Some(id),
            vec![Operand::StorageClass(StorageClass::StorageBuffer)],
        ));
        for (d, v) in [
            (Decoration::DescriptorSet, 0),
            (Decoration::Binding, j as u32),
        ] {
            m.annotations.push(Instruction::new(
                Op::Decorate,
                None,
                None,
                vec![
                    Operand::IdRef(id),
                    Operand::Decoration(d),
                    Operand::LiteralBit32(v),
                ],
            ));
        }
        m.debug_names.push(Instruction::new(
            Op::Name,
            None,
            None,
            vec![
                Operand::IdRef(id),
                Operand::LiteralString(format!("binding_{j}")),
            ],
        ));
    }
    if let Some(h) = m.header.as_mut() {
        h.bound = bound;
    }

    // The chains into the block, then the loads through them.
    let mut chains: HashMap<Word, usize> = HashMap::new();
    let mut loaded: HashMap<Word, Word> = HashMap::new();
    for f in &mut m.functions {
        for b in &mut f.blocks {
            let mut keep = Vec::with_capacity(b.instructions.len());
            for inst in b.instructions.drain(..) {
                let op = inst.class.opcode;
                if matches!(op, Op::AccessChain | Op::InBoundsAccessChain)
                    && inst.operands.first() == Some(&Operand::IdRef(params_var))
                {
                    let index = match inst.operands.get(1) {
                        Some(Operand::IdRef(c)) if inst.operands.len() == 2 => {
                            constants.get(c).copied()
                        }
                        _ => None,
                    };
                    let Some(index) = index.filter(|i| (*i as usize) < vars.len()) else {
                        return Err("an access chain into the address block that is not one \
                                    constant member"
                            .into());
                    };
                    chains.insert(inst.result_id.unwrap_or(0), index as usize);
                    continue;
                }
                if op == Op::Load
                    && let Some(Operand::IdRef(p)) = inst.operands.first()
                    && let Some(j) = chains.get(p)
                {
                    loaded.insert(inst.result_id.unwrap_or(0), vars[*j]);
                    continue;
                }
                keep.push(inst);
            }
            b.instructions = keep;
        }
    }

    // Every use of a loaded address is the variable now; anything else
    // still touching the block or a chain into it is a shape not handled.
    for f in &mut m.functions {
        for inst in f.all_inst_iter_mut() {
            for o in &mut inst.operands {
                if let Operand::IdRef(id) = o {
                    if let Some(v) = loaded.get(id) {
                        *id = *v;
                    } else if *id == params_var || chains.contains_key(id) {
                        return Err(format!(
                            "`{}` uses the address block other than by loading one address",
                            inst.class.opname
                        ));
                    }
                }
            }
        }
    }

    // The block, its struct and the pointer types to either go.
    let mut gone: HashSet<Word> = HashSet::from([params_var, params_struct]);
    for inst in &m.types_global_values {
        if let (Some(id), Some((sc, pointee))) = (inst.result_id, inst.result_id.and_then(pointer))
            && matches!(sc, StorageClass::PushConstant | StorageClass::Uniform)
            && (pointee == params_struct || members.contains(&pointee))
        {
            gone.insert(id);
        }
    }
    m.types_global_values
        .retain(|i| !i.result_id.is_some_and(|id| gone.contains(&id)));
    let targets_gone = |i: &Instruction| matches!(i.operands.first(), Some(Operand::IdRef(id)) if gone.contains(id));
    m.annotations.retain(|i| !targets_gone(i));
    m.debug_names.retain(|i| !targets_gone(i));
    for ep in &mut m.entry_points {
        ep.operands
            .retain(|o| !matches!(o, Operand::IdRef(id) if gone.contains(id)));
    }

    // Device addresses out of the module.
    for inst in &mut m.types_global_values {
        if inst.class.opcode == Op::TypePointer
            && let Some(Operand::StorageClass(sc)) = inst.operands.first_mut()
            && *sc == StorageClass::PhysicalStorageBuffer
        {
            *sc = StorageClass::StorageBuffer;
        }
    }
    m.annotations.retain(|i| {
        !i.operands.iter().any(|o| {
            matches!(
                o,
                Operand::Decoration(Decoration::RestrictPointer | Decoration::AliasedPointer)
            )
        })
    });
    m.capabilities.retain(|i| {
        !matches!(
            i.operands.first(),
            Some(Operand::Capability(
                Capability::PhysicalStorageBufferAddresses
            ))
        )
    });
    m.extensions.retain(|i| {
        !matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s.contains("physical_storage_buffer"))
    });
    if let Some(mm) = m.memory_model.as_mut()
        && let Some(Operand::AddressingModel(a)) = mm.operands.first_mut()
    {
        *a = AddressingModel::Logical;
    }
    for f in &mut m.functions {
        for inst in f.all_inst_iter_mut() {
            let keep = match inst.class.opcode {
                Op::Load => 1,
                Op::Store | Op::CopyMemory => 2,
                _ => continue,
            };
            inst.operands.truncate(keep);
        }
    }
    Ok((m, members.len()))
}
