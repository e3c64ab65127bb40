//! cubecl-spirv's SPIR-V made into what naga's SPIR-V front end reads.
//!
//! cubecl-spirv (0.12) reaches every buffer through a device address: one
//! `PushConstant` (or `Uniform`) block holds a `PhysicalStorageBuffer`
//! pointer per buffer, and one more for the launch metadata when the kernel
//! has any. The entry function loads each pointer once, at its start, and
//! indexes through it. Neither naga nor WGSL has device addresses, so
//! [`descriptors`] rewrites that into descriptor bindings:
//!
//! - pointer `j` of the block becomes a `StorageBuffer` variable at
//!   `DescriptorSet 0, Binding j` (the metadata last, after the buffers,
//!   where this server binds it);
//! - the loads of the pointers are replaced by those variables, and the
//!   block, its type and its pointer types are dropped;
//! - every `PhysicalStorageBuffer` pointer type becomes a `StorageBuffer`
//!   one, the addressing model `Logical`, the capability and extension
//!   removed;
//! - memory operands of loads and stores are dropped (naga reads at most
//!   one memory-access word, and `Aligned` carries a literal).
//!
//! [`for_naga`] also works around what naga's front end and WGSL back end
//! would otherwise get wrong on cubecl-spirv's output:
//!
//! - [`shared_variables`]: cubecl-spirv's shared memory variables are
//!   declared with a pointer-to-pointer type (its implicit-layout path);
//!   they get the pointer type their uses expect.
//! - [`pad_structs`]: naga's WGSL writer drops explicit member offsets, and
//!   cubecl's metadata struct places members at 8-byte offsets; padding
//!   members make the WGSL layout the SPIR-V one.
//! - [`signed_ops`]: cubecl-spirv types every integer unsigned and carries
//!   signedness in the opcode (`OpSDiv`, `SAbs`...), while naga's front end
//!   takes the signedness from the operand types: signed operations get
//!   their operands and results bitcast to signed types around them.
//! - [`polyfills`]: what naga reads but cannot express in WGSL, or does not
//!   read: vector `OpLogicalAnd`/`OpLogicalOr` (WGSL's `&&` is scalar) as
//!   `OpSelect`; `OpIsNan`/`OpIsInf` (no WGSL builtin) on 16- and 32-bit floats
//!   as bit tests; 64-bit shift amounts narrowed to u32 (naga's validator
//!   takes them, WGSL does not); `OpUMulExtended` (not in naga's front end) from 16-bit
//!   halves; `NonSemantic.DebugPrintf` dropped; function-level `OpUndef`
//!   hoisted to module level.
//! - [`byte_vectors`]: WGSL has no 8-bit integers; cubecl-spirv's minifloat
//!   lowering packs and unpacks bytes through `vec4<u8>` (bitcasts to and
//!   from `u32`, `OpUConvert` to and from `vec4<u32>`, `OpIEqual`), which
//!   become shifts and masks on `vec4<u32>` lanes.

use std::collections::{HashMap, HashSet};

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{AddressingModel, Capability, Decoration, Op, StorageClass, Word};

/// `module` with device addresses replaced by descriptor bindings; how
/// many bindings it declares. An error says which shape it did not expect.
pub fn for_naga(module: &Module, fixes: bool) -> Result<Module, String> {
    let (mut m, _) = descriptors(module)?;
    if fixes {
        shared_variables(&mut m);
        pad_structs(&mut m)?;
        signed_ops(&mut m);
        polyfills(&mut m);
        byte_vectors(&mut m);
    }
    Ok(m)
}

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

/// Fresh ids past the module's bound.
fn fresh(m: &mut Module) -> Word {
    let h = m
        .header
        .get_or_insert_with(|| rspirv::dr::ModuleHeader::new(1));
    let id = h.bound;
    h.bound += 1;
    id
}

fn type_map(m: &Module) -> HashMap<Word, Instruction> {
    m.types_global_values
        .iter()
        .filter_map(|i| i.result_id.map(|id| (id, i.clone())))
        .collect()
}

fn id_operand(i: &Instruction, n: usize) -> Option<Word> {
    match i.operands.get(n) {
        Some(Operand::IdRef(id)) => Some(*id),
        _ => None,
    }
}

/// Workgroup variables declared `ptr<Workgroup, ptr<Workgroup, T>>` get
/// the inner pointer type, which is how every use reads them; the outer
/// pointer type goes when nothing else uses it.
pub fn shared_variables(m: &mut Module) {
    let types = type_map(m);
    let mut outer = HashSet::new();
    for inst in &mut m.types_global_values {
        if inst.class.opcode != Op::Variable {
            continue;
        }
        let Some(p) = inst.result_type.and_then(|t| types.get(&t)) else {
            continue;
        };
        if p.class.opcode != Op::TypePointer {
            continue;
        }
        let Some(q) = id_operand(p, 1) else { continue };
        if types
            .get(&q)
            .is_some_and(|q| q.class.opcode == Op::TypePointer)
        {
            outer.insert(p.result_id.unwrap_or(0));
            inst.result_type = Some(q);
        }
    }
    if outer.is_empty() {
        return;
    }
    let used: HashSet<Word> = m
        .all_inst_iter()
        .flat_map(|i| {
            i.result_type
                .into_iter()
                .chain(i.operands.iter().filter_map(|o| match o {
                    Operand::IdRef(id) => Some(*id),
                    _ => None,
                }))
        })
        .collect();
    m.types_global_values.retain(|i| {
        !i.result_id
            .is_some_and(|id| outer.contains(&id) && !used.contains(&id))
    });
}

/// Size and alignment of a type in WGSL's storage layout.
fn layout(
    types: &HashMap<Word, Instruction>,
    constants: &HashMap<Word, u32>,
    strides: &HashMap<Word, u32>,
    offsets: &HashMap<(Word, u32), u32>,
    ty: Word,
) -> Option<(u32, u32)> {
    let t = types.get(&ty)?;
    let lit = |n: usize| match t.operands.get(n) {
        Some(Operand::LiteralBit32(v)) => Some(*v),
        _ => None,
    };
    match t.class.opcode {
        Op::TypeInt | Op::TypeFloat => {
            let s = lit(0)? / 8;
            Some((s, s))
        }
        Op::TypeBool => Some((4, 4)),
        Op::TypeVector => {
            let (s, _) = layout(types, constants, strides, offsets, id_operand(t, 0)?)?;
            let n = lit(1)?;
            let align = if n == 2 { 2 * s } else { 4 * s };
            Some((n * s, align))
        }
        Op::TypeArray | Op::TypeRuntimeArray => {
            let elem = id_operand(t, 0)?;
            let (size, align) = layout(types, constants, strides, offsets, elem)?;
            let stride = strides
                .get(&ty)
                .copied()
                .unwrap_or(size.next_multiple_of(align));
            let len = match t.class.opcode {
                Op::TypeArray => *constants.get(&id_operand(t, 1)?)?,
                _ => 0,
            };
            Some((len * stride, align))
        }
        Op::TypeStruct => {
            let mut end = 0;
            let mut align = 1;
            for (i, _) in t.operands.iter().enumerate() {
                let (s, a) = layout(types, constants, strides, offsets, id_operand(t, i)?)?;
                let off = offsets.get(&(ty, i as u32)).copied().unwrap_or(end);
                end = off + s;
                align = align.max(a);
            }
            Some((end.next_multiple_of(align), align))
        }
        _ => None,
    }
}

/// A padded struct: old member index -> new one, and the padding members
/// (index, offset, words).
type Plan = (Vec<u32>, Vec<(u32, u32, u32)>);

/// Structs whose explicit member offsets are not WGSL's natural layout get
/// `array<u32, n>` padding members, and the access chains into them the
/// new member indices.
pub fn pad_structs(m: &mut Module) -> Result<(), String> {
    let types = type_map(m);
    let constants: HashMap<Word, u32> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match (i.result_id, i.operands.first()) {
            (Some(id), Some(Operand::LiteralBit32(v))) => Some((id, *v)),
            _ => None,
        })
        .collect();
    let mut strides = HashMap::new();
    let mut offsets = HashMap::new();
    for a in &m.annotations {
        match (a.class.opcode, a.operands.as_slice()) {
            (
                Op::Decorate,
                [
                    Operand::IdRef(t),
                    Operand::Decoration(Decoration::ArrayStride),
                    Operand::LiteralBit32(s),
                ],
            ) => {
                strides.insert(*t, *s);
            }
            (
                Op::MemberDecorate,
                [
                    Operand::IdRef(t),
                    Operand::LiteralBit32(i),
                    Operand::Decoration(Decoration::Offset),
                    Operand::LiteralBit32(o),
                ],
            ) => {
                offsets.insert((*t, *i), *o);
            }
            _ => {}
        }
    }
    // struct -> (old member -> new member, [(pad index, offset, words)])
    let mut plans: HashMap<Word, Plan> = HashMap::new();
    for (id, t) in &types {
        if t.class.opcode != Op::TypeStruct || !offsets.contains_key(&(*id, 0)) {
            continue;
        }
        let mut cursor = 0u32;
        let mut map = Vec::new();
        let mut pads = Vec::new();
        let mut next = 0u32;
        for i in 0..t.operands.len() as u32 {
            let member = id_operand(t, i as usize).unwrap_or(0);
            let Some((size, align)) = layout(&types, &constants, &strides, &offsets, member) else {
                return Err(format!("no WGSL layout for member {i} of struct %{id}"));
            };
            let natural = cursor.next_multiple_of(align);
            let off = offsets.get(&(*id, i)).copied().unwrap_or(natural);
            if off < natural {
                return Err(format!(
                    "member {i} of struct %{id} overlaps the one before"
                ));
            }
            if off > natural {
                if (off - natural) % 4 != 0 {
                    return Err(format!(
                        "a gap before member {i} of %{id} is not whole words"
                    ));
                }
                pads.push((next, natural, (off - natural) / 4));
                next += 1;
            }
            map.push(next);
            next += 1;
            cursor = off + size;
        }
        if !pads.is_empty() {
            plans.insert(*id, (map, pads));
        }
    }
    if plans.is_empty() {
        return Ok(());
    }
    // u32, and the constants the new arrays and indices need.
    let u32_ty = match types.values().find(|t| {
        t.class.opcode == Op::TypeInt
            && t.operands == [Operand::LiteralBit32(32), Operand::LiteralBit32(0)]
    }) {
        Some(t) => t.result_id.unwrap_or(0),
        None => {
            let id = fresh(m);
            m.types_global_values.insert(
                0,
                Instruction::new(
                    Op::TypeInt,
                    None,
                    Some(id),
                    vec![Operand::LiteralBit32(32), Operand::LiteralBit32(0)],
                ),
            );
            id
        }
    };
    let mut consts: HashMap<(Word, u32), Word> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match (i.result_type, i.result_id, i.operands.first()) {
            (Some(t), Some(id), Some(Operand::LiteralBit32(v))) => Some(((t, *v), id)),
            _ => None,
        })
        .collect();
    let mut new_globals = Vec::new();
    let mut constant = |m: &mut Module, new_globals: &mut Vec<Instruction>, ty: Word, v: u32| {
        *consts.entry((ty, v)).or_insert_with(|| {
            let id = fresh(m);
            new_globals.push(Instruction::new(
                Op::Constant,
                Some(ty),
                Some(id),
                vec![Operand::LiteralBit32(v)],
            ));
            id
        })
    };
    let mut struct_ops: HashMap<Word, Vec<Operand>> = HashMap::new();
    let mut new_annotations = Vec::new();
    for (sid, (map, pads)) in &plans {
        let old = &types[sid];
        let mut members: Vec<Option<Operand>> = vec![None; map.len() + pads.len()];
        for (i, o) in old.operands.iter().enumerate() {
            members[map[i] as usize] = Some(o.clone());
        }
        for (at, off, words) in pads {
            // A constant of its own, defined just before the array (an
            // equal one may come later in the module).
            let len = fresh(m);
            new_globals.push(Instruction::new(
                Op::Constant,
                Some(u32_ty),
                Some(len),
                vec![Operand::LiteralBit32(*words)],
            ));
            let arr = fresh(m);
            new_globals.push(Instruction::new(
                Op::TypeArray,
                None,
                Some(arr),
                vec![Operand::IdRef(u32_ty), Operand::IdRef(len)],
            ));
            new_annotations.push(Instruction::new(
                Op::Decorate,
                None,
                None,
                vec![
                    Operand::IdRef(arr),
                    Operand::Decoration(Decoration::ArrayStride),
                    Operand::LiteralBit32(4),
                ],
            ));
            new_annotations.push(Instruction::new(
                Op::MemberDecorate,
                None,
                None,
                vec![
                    Operand::IdRef(*sid),
                    Operand::LiteralBit32(*at),
                    Operand::Decoration(Decoration::Offset),
                    Operand::LiteralBit32(*off),
                ],
            ));
            members[*at as usize] = Some(Operand::IdRef(arr));
        }
        struct_ops.insert(*sid, members.into_iter().flatten().collect());
    }
    // New types and constants go before the first struct that uses them.
    let first = m
        .types_global_values
        .iter()
        .position(|i| i.result_id.is_some_and(|id| plans.contains_key(&id)))
        .unwrap_or(0);
    for (k, g) in new_globals.into_iter().enumerate() {
        m.types_global_values.insert(first + k, g);
    }
    for inst in &mut m.types_global_values {
        if let Some(ops) = inst.result_id.and_then(|id| struct_ops.get(&id)) {
            inst.operands = ops.clone();
        }
    }
    for a in m.annotations.iter_mut().chain(m.debug_names.iter_mut()) {
        if let (Some(Operand::IdRef(t)), Some(Operand::LiteralBit32(i))) =
            (a.operands.first().cloned(), a.operands.get(1).cloned())
            && matches!(a.class.opcode, Op::MemberDecorate | Op::MemberName)
            && let Some((map, _)) = plans.get(&t)
        {
            a.operands[1] = Operand::LiteralBit32(map[i as usize]);
        }
    }
    m.annotations.extend(new_annotations);
    // Access chains whose base points at a padded struct.
    let types = type_map(m);
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    let mut wanted: Vec<(usize, usize, usize, Word, u32)> = Vec::new();
    for (fi, f) in m.functions.iter().enumerate() {
        for (bi, b) in f.blocks.iter().enumerate() {
            for (ii, inst) in b.instructions.iter().enumerate() {
                if !matches!(inst.class.opcode, Op::AccessChain | Op::InBoundsAccessChain) {
                    continue;
                }
                let Some(base) = id_operand(inst, 0) else {
                    continue;
                };
                let pointee = type_of
                    .get(&base)
                    .and_then(|t| types.get(t))
                    .and_then(|p| id_operand(p, 1));
                let Some((map, _)) = pointee.and_then(|s| plans.get(&s)) else {
                    continue;
                };
                let Some(index) = id_operand(inst, 1) else {
                    continue;
                };
                let Some(v) = constants.get(&index) else {
                    return Err("a dynamic index into a padded struct".into());
                };
                let ty = type_of.get(&index).copied().unwrap_or(u32_ty);
                wanted.push((fi, bi, ii, ty, map[*v as usize]));
            }
        }
    }
    let mut more = Vec::new();
    let mut fixes = Vec::new();
    for (fi, bi, ii, ty, v) in wanted {
        let new = constant(m, &mut more, ty, v);
        fixes.push((fi, bi, ii, new));
    }
    let at = m
        .types_global_values
        .iter()
        .position(|i| i.class.opcode == Op::Variable)
        .unwrap_or(m.types_global_values.len());
    for (k, g) in more.into_iter().enumerate() {
        m.types_global_values.insert(at + k, g);
    }
    for (fi, bi, ii, new) in fixes {
        m.functions[fi].blocks[bi].instructions[ii].operands[1] = Operand::IdRef(new);
    }
    Ok(())
}

/// GLSL.std.450 instructions with signed semantics, and which of their
/// operands are signed (all of them here).
const GLSL_SIGNED: &[u32] = &[
    5,  // SAbs
    7,  // SSign
    39, // SMin
    42, // SMax
    45, // SClamp
    74, // FindSMsb
];

/// Signed integer operations on unsigned-typed values: their operands are
/// bitcast to the signed type of the same shape, the operation computes
/// in it, and its result is bitcast back.
pub fn signed_ops(m: &mut Module) {
    let types = type_map(m);
    let glsl: HashSet<Word> = m
        .ext_inst_imports
        .iter()
        .filter(|i| matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s == "GLSL.std.450"))
        .filter_map(|i| i.result_id)
        .collect();
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    // unsigned int (or vector of) -> its signed twin, created on demand.
    let mut signed: HashMap<Word, Word> = HashMap::new();
    for t in types.values() {
        if t.class.opcode == Op::TypeInt
            && let [Operand::LiteralBit32(w), Operand::LiteralBit32(1)] = t.operands.as_slice()
        {
            // An existing signed type of this width: its unsigned twin maps to it.
            if let Some(u) = types.values().find(|u| {
                u.class.opcode == Op::TypeInt
                    && u.operands == [Operand::LiteralBit32(*w), Operand::LiteralBit32(0)]
            }) {
                signed.insert(u.result_id.unwrap_or(0), t.result_id.unwrap_or(0));
            }
        }
    }
    let mut new_types: Vec<Instruction> = Vec::new();
    let is_unsigned = |t: Word| -> bool {
        let Some(i) = types.get(&t) else { return false };
        match i.class.opcode {
            Op::TypeInt => i.operands.get(1) == Some(&Operand::LiteralBit32(0)),
            Op::TypeVector => id_operand(i, 0).is_some_and(|c| {
                types.get(&c).is_some_and(|c| {
                    c.class.opcode == Op::TypeInt
                        && c.operands.get(1) == Some(&Operand::LiteralBit32(0))
                })
            }),
            _ => false,
        }
    };
    let mut header = m.header.clone();
    let mut next_id = || {
        let h = header.get_or_insert_with(|| rspirv::dr::ModuleHeader::new(1));
        let id = h.bound;
        h.bound += 1;
        id
    };
    let mut twin =
        |t: Word, new_types: &mut Vec<Instruction>, next_id: &mut dyn FnMut() -> Word| -> Word {
            fn go(
                t: Word,
                types: &HashMap<Word, Instruction>,
                signed: &mut HashMap<Word, Word>,
                new_types: &mut Vec<Instruction>,
                next_id: &mut dyn FnMut() -> Word,
            ) -> Word {
                if let Some(s) = signed.get(&t) {
                    return *s;
                }
                let i = &types[&t];
                let id = next_id();
                let inst = match i.class.opcode {
                    Op::TypeInt => Instruction::new(
                        Op::TypeInt,
                        None,
                        Some(id),
                        vec![i.operands[0].clone(), Operand::LiteralBit32(1)],
                    ),
                    _ => {
                        let c = go(
                            id_operand(i, 0).unwrap_or(0),
                            types,
                            signed,
                            new_types,
                            next_id,
                        );
                        Instruction::new(
                            Op::TypeVector,
                            None,
                            Some(id),
                            vec![Operand::IdRef(c), i.operands[1].clone()],
                        )
                    }
                };
                new_types.push(inst);
                signed.insert(t, id);
                id
            }
            go(t, &types, &mut signed, new_types, next_id)
        };
    for f in &mut m.functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for mut inst in b.instructions.drain(..) {
                let op = inst.class.opcode;
                // Which operands are signed values, and whether the result is.
                let (signed_operands, signed_result): (Vec<usize>, bool) = match op {
                    Op::SDiv | Op::SRem | Op::SMod => (vec![0, 1], true),
                    Op::SNegate => (vec![0], true),
                    Op::ShiftRightArithmetic => (vec![0], true),
                    Op::ConvertSToF => (vec![0], false),
                    // naga reads these as signed, but mistypes the casts
                    // it adds for vectors.
                    Op::SLessThan
                    | Op::SLessThanEqual
                    | Op::SGreaterThan
                    | Op::SGreaterThanEqual => (vec![0, 1], false),
                    Op::SConvert => (vec![0], true),
                    Op::BitFieldSExtract => (vec![0], true),
                    Op::ExtInst
                        if id_operand(&inst, 0).is_some_and(|s| glsl.contains(&s))
                            && matches!(inst.operands.get(1), Some(Operand::LiteralExtInstInteger(n)) if GLSL_SIGNED.contains(n)) =>
                    {
                        ((2..inst.operands.len()).collect(), true)
                    }
                    _ => (vec![], false),
                };
                let result_unsigned = inst.result_type.is_some_and(is_unsigned);
                for k in signed_operands {
                    let Some(v) = id_operand(&inst, k) else {
                        continue;
                    };
                    let Some(t) = type_of.get(&v).copied().filter(|t| is_unsigned(*t)) else {
                        continue;
                    };
                    let s = twin(t, &mut new_types, &mut next_id);
                    let cast = next_id();
                    out.push(Instruction::new(
                        Op::Bitcast,
                        Some(s),
                        Some(cast),
                        vec![Operand::IdRef(v)],
                    ));
                    inst.operands[k] = Operand::IdRef(cast);
                }
                if signed_result && result_unsigned {
                    let t = inst.result_type.unwrap_or(0);
                    let s = twin(t, &mut new_types, &mut next_id);
                    let result = inst.result_id.unwrap_or(0);
                    let inner = next_id();
                    inst.result_type = Some(s);
                    inst.result_id = Some(inner);
                    out.push(inst);
                    out.push(Instruction::new(
                        Op::Bitcast,
                        Some(t),
                        Some(result),
                        vec![Operand::IdRef(inner)],
                    ));
                } else {
                    out.push(inst);
                }
            }
            b.instructions = out;
        }
    }
    m.header = header;
    // After the last existing scalar or vector type (a new vector may use
    // an existing signed scalar), scalars before the vectors using them.
    let at = m
        .types_global_values
        .iter()
        .rposition(|i| {
            matches!(
                i.class.opcode,
                Op::TypeInt | Op::TypeFloat | Op::TypeBool | Op::TypeVector
            )
        })
        .map_or(0, |p| p + 1);
    for (k, t) in new_types.into_iter().enumerate() {
        m.types_global_values.insert(at + k, t);
    }
}

/// Builds the constants and types a polyfill needs, appended after every
/// existing global (only function bodies use them).
struct Globals {
    types: HashMap<Word, Instruction>,
    new: Vec<Instruction>,
    u32_ty: Option<Word>,
    consts: HashMap<(Word, u32), Word>,
    splats: HashMap<(Word, Word), Word>,
}

impl Globals {
    fn new(m: &Module) -> Self {
        Self {
            types: type_map(m),
            new: Vec::new(),
            u32_ty: None,
            consts: HashMap::new(),
            splats: HashMap::new(),
        }
    }

    fn u32_ty(&mut self, m: &mut Module) -> Word {
        if let Some(t) = self.u32_ty {
            return t;
        }
        let found = self.types.values().find(|t| {
            t.class.opcode == Op::TypeInt
                && t.operands == [Operand::LiteralBit32(32), Operand::LiteralBit32(0)]
        });
        let t = match found {
            Some(t) => t.result_id.unwrap_or(0),
            None => {
                let id = fresh(m);
                self.new.push(Instruction::new(
                    Op::TypeInt,
                    None,
                    Some(id),
                    vec![Operand::LiteralBit32(32), Operand::LiteralBit32(0)],
                ));
                id
            }
        };
        self.u32_ty = Some(t);
        t
    }

    /// The constant `v` of scalar type `scalar`, splat to `ty` when `ty`
    /// is a vector of it.
    fn constant(&mut self, m: &mut Module, scalar: Word, ty: Word, v: u32) -> Word {
        let c = *self.consts.entry((scalar, v)).or_insert_with(|| {
            let h = m
                .header
                .get_or_insert_with(|| rspirv::dr::ModuleHeader::new(1));
            let id = h.bound;
            h.bound += 1;
            self.new.push(Instruction::new(
                Op::Constant,
                Some(scalar),
                Some(id),
                vec![Operand::LiteralBit32(v)],
            ));
            id
        });
        if ty == scalar {
            return c;
        }
        let n = self
            .types
            .get(&ty)
            .and_then(|t| match t.operands.get(1) {
                Some(Operand::LiteralBit32(n)) => Some(*n),
                _ => None,
            })
            .unwrap_or(1);
        *self.splats.entry((ty, c)).or_insert_with(|| {
            let h = m
                .header
                .get_or_insert_with(|| rspirv::dr::ModuleHeader::new(1));
            let id = h.bound;
            h.bound += 1;
            self.new.push(Instruction::new(
                Op::ConstantComposite,
                Some(ty),
                Some(id),
                (0..n).map(|_| Operand::IdRef(c)).collect(),
            ));
            id
        })
    }

    /// The 32-bit float type (a new one when the module has none).
    fn f32_ty(&mut self, m: &mut Module) -> Word {
        let ops = vec![Operand::LiteralBit32(32)];
        if let Some(t) = self
            .types
            .values()
            .find(|t| t.class.opcode == Op::TypeFloat && t.operands == ops)
        {
            return t.result_id.unwrap_or(0);
        }
        let id = fresh(m);
        let t = Instruction::new(Op::TypeFloat, None, Some(id), ops);
        self.types.insert(id, t.clone());
        self.new.push(t);
        id
    }

    /// `scalar`, or the vector of `n` of it (a new type when the module
    /// has none).
    fn vec_of(&mut self, m: &mut Module, scalar: Word, n: u32) -> Word {
        if n <= 1 {
            return scalar;
        }
        let u = scalar;
        if let Some(t) = self.types.values().find(|t| {
            t.class.opcode == Op::TypeVector
                && t.operands == [Operand::IdRef(u), Operand::LiteralBit32(n)]
        }) {
            return t.result_id.unwrap_or(0);
        }
        let id = fresh(m);
        let t = Instruction::new(
            Op::TypeVector,
            None,
            Some(id),
            vec![Operand::IdRef(u), Operand::LiteralBit32(n)],
        );
        self.types.insert(id, t.clone());
        self.new.push(t);
        id
    }

    /// (scalar type, component count) of `ty`.
    /// The vector of `n` u32 (a new type when the module has none).
    fn u32_vec(&mut self, m: &mut Module, n: u32) -> Word {
        let u = self.u32_ty(m);
        self.vec_of(m, u, n)
    }

    /// Bit width of the scalar (or vector component) type `ty`.
    fn width(&self, ty: Word) -> Option<u32> {
        let (s, _) = self.shape(ty)?;
        match self.types.get(&s)?.operands.first() {
            Some(Operand::LiteralBit32(w)) => Some(*w),
            _ => None,
        }
    }

    fn shape(&self, ty: Word) -> Option<(Word, u32)> {
        let t = self.types.get(&ty)?;
        match t.class.opcode {
            Op::TypeVector => match (t.operands.first(), t.operands.get(1)) {
                (Some(Operand::IdRef(c)), Some(Operand::LiteralBit32(n))) => Some((*c, *n)),
                _ => None,
            },
            _ => Some((ty, 1)),
        }
    }

    fn finish(self, m: &mut Module) {
        m.types_global_values.extend(self.new);
    }
}

fn inst(op: Op, ty: Word, id: Word, args: &[Word]) -> Instruction {
    Instruction::new(
        op,
        Some(ty),
        Some(id),
        args.iter().map(|a| Operand::IdRef(*a)).collect(),
    )
}

/// See the module documentation.
pub fn polyfills(m: &mut Module) {
    let mut g = Globals::new(m);
    let printf: HashSet<Word> = m
        .ext_inst_imports
        .iter()
        .filter(|i| matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s.starts_with("NonSemantic.DebugPrintf")))
        .filter_map(|i| i.result_id)
        .collect();
    m.ext_inst_imports
        .retain(|i| !i.result_id.is_some_and(|id| printf.contains(&id)));
    m.extensions.retain(|i| {
        !matches!(i.operands.first(), Some(Operand::LiteralString(s)) if s == "SPV_KHR_non_semantic_info")
    });
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    let constants64: HashMap<Word, u64> = m
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::Constant)
        .filter_map(|i| match (i.result_id, i.operands.first()) {
            (Some(id), Some(Operand::LiteralBit64(v))) => Some((id, *v)),
            _ => None,
        })
        .collect();
    // Vectors built of 64-bit constants only, by their components.
    let vectors64: HashMap<Word, Vec<u64>> = m
        .all_inst_iter()
        .filter(|i| {
            matches!(
                i.class.opcode,
                Op::CompositeConstruct | Op::ConstantComposite
            )
        })
        .filter_map(|i| {
            let parts: Option<Vec<u64>> = i
                .operands
                .iter()
                .map(|o| match o {
                    Operand::IdRef(c) => constants64.get(c).copied(),
                    _ => None,
                })
                .collect();
            Some((i.result_id?, parts?))
        })
        .collect();
    let mut functions = std::mem::take(&mut m.functions);
    for f in &mut functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for i in b.instructions.drain(..) {
                let op = i.class.opcode;
                let ty = i.result_type.unwrap_or(0);
                let id = i.result_id.unwrap_or(0);
                let args: Vec<Word> = i
                    .operands
                    .iter()
                    .filter_map(|o| match o {
                        Operand::IdRef(x) => Some(*x),
                        _ => None,
                    })
                    .collect();
                let vector = g.shape(ty).is_some_and(|(_, n)| n > 1);
                match op {
                    Op::ExtInst if args.first().is_some_and(|s| printf.contains(s)) => {}
                    // naga's front end emits a function-level undef twice
                    // when a phi reads it; at module level it is a constant.
                    Op::Undef => g.new.push(i),
                    Op::LogicalAnd if vector => {
                        out.push(inst(Op::Select, ty, id, &[args[0], args[1], args[0]]));
                    }
                    Op::LogicalOr if vector => {
                        out.push(inst(Op::Select, ty, id, &[args[0], args[0], args[1]]));
                    }
                    Op::IsNan | Op::IsInf
                        if type_of
                            .get(&args[0])
                            .and_then(|t| g.width(*t))
                            .is_some_and(|w| w == 32 || w == 16) =>
                    {
                        let (_, n) = g.shape(ty).unwrap_or((0, 1));
                        let u = g.u32_ty(m);
                        let uv = g.vec_of(m, u, n);
                        // A 16-bit float widens exactly (NaN and infinity
                        // included): WGSL has no 16-bit integer to test.
                        let mut x = args[0];
                        if type_of.get(&x).and_then(|t| g.width(*t)) == Some(16) {
                            let f = g.f32_ty(m);
                            let fv = g.vec_of(m, f, n);
                            let wide = fresh(m);
                            out.push(inst(Op::FConvert, fv, wide, &[x]));
                            x = wide;
                        }
                        let bits = fresh(m);
                        out.push(inst(Op::Bitcast, uv, bits, &[x]));
                        let mask = g.constant(m, u, uv, 0x7fff_ffff);
                        let abs = fresh(m);
                        out.push(inst(Op::BitwiseAnd, uv, abs, &[bits, mask]));
                        let inf = g.constant(m, u, uv, 0x7f80_0000);
                        let cmp = if op == Op::IsNan {
                            Op::UGreaterThan
                        } else {
                            Op::IEqual
                        };
                        out.push(inst(cmp, ty, id, &[abs, inf]));
                    }
                    // WGSL shifts by a u32 amount, 64-bit values too.
                    Op::ShiftLeftLogical | Op::ShiftRightLogical | Op::ShiftRightArithmetic
                        if type_of.get(&args[1]).and_then(|t| g.width(*t)) == Some(64) =>
                    {
                        let n = type_of
                            .get(&args[1])
                            .and_then(|t| g.shape(*t))
                            .map_or(1, |(_, n)| n);
                        let u = g.u32_ty(m);
                        let uv = g.vec_of(m, u, n);
                        // A constant amount as a u32 constant: naga's
                        // constant evaluator refuses `u32(63lu)`.
                        let amount = match (constants64.get(&args[1]), vectors64.get(&args[1])) {
                            (Some(v), _) if n == 1 => g.constant(m, u, u, *v as u32),
                            (_, Some(parts)) => {
                                let parts: Vec<Word> = parts
                                    .iter()
                                    .map(|v| g.constant(m, u, u, *v as u32))
                                    .collect();
                                let amount = fresh(m);
                                out.push(inst(Op::CompositeConstruct, uv, amount, &parts));
                                amount
                            }
                            _ => {
                                let amount = fresh(m);
                                out.push(inst(Op::UConvert, uv, amount, &[args[1]]));
                                amount
                            }
                        };
                        let mut i = i;
                        i.operands[1] = Operand::IdRef(amount);
                        out.push(i);
                    }
                    Op::UMulExtended => {
                        // The result struct {lo, hi} of the operands' type,
                        // 32-bit integers only.
                        let shape = type_of.get(&args[0]).and_then(|vt| {
                            let (s, _) = g.shape(*vt)?;
                            let t = g.types.get(&s)?;
                            (t.operands.first() == Some(&Operand::LiteralBit32(32)))
                                .then_some((*vt, s))
                        });
                        let Some((vt, s)) = shape else {
                            out.push(i);
                            continue;
                        };
                        let (a, b) = (args[0], args[1]);
                        let lo16 = g.constant(m, s, vt, 0xffff);
                        let sh = g.constant(m, s, vt, 16);
                        let mut emit = |op: Op, x: Word, y: Word, out: &mut Vec<Instruction>| {
                            let r = fresh(m);
                            out.push(inst(op, vt, r, &[x, y]));
                            r
                        };
                        let al = emit(Op::BitwiseAnd, a, lo16, &mut out);
                        let ah = emit(Op::ShiftRightLogical, a, sh, &mut out);
                        let bl = emit(Op::BitwiseAnd, b, lo16, &mut out);
                        let bh = emit(Op::ShiftRightLogical, b, sh, &mut out);
                        let ll = emit(Op::IMul, al, bl, &mut out);
                        let lh = emit(Op::IMul, al, bh, &mut out);
                        let hl = emit(Op::IMul, ah, bl, &mut out);
                        let hh = emit(Op::IMul, ah, bh, &mut out);
                        let ll_h = emit(Op::ShiftRightLogical, ll, sh, &mut out);
                        let lh_l = emit(Op::BitwiseAnd, lh, lo16, &mut out);
                        let hl_l = emit(Op::BitwiseAnd, hl, lo16, &mut out);
                        let mid = emit(Op::IAdd, ll_h, lh_l, &mut out);
                        let mid = emit(Op::IAdd, mid, hl_l, &mut out);
                        let lh_h = emit(Op::ShiftRightLogical, lh, sh, &mut out);
                        let hl_h = emit(Op::ShiftRightLogical, hl, sh, &mut out);
                        let mid_h = emit(Op::ShiftRightLogical, mid, sh, &mut out);
                        let hi = emit(Op::IAdd, hh, lh_h, &mut out);
                        let hi = emit(Op::IAdd, hi, hl_h, &mut out);
                        let hi = emit(Op::IAdd, hi, mid_h, &mut out);
                        let lo = emit(Op::IMul, a, b, &mut out);
                        out.push(inst(Op::CompositeConstruct, ty, id, &[lo, hi]));
                    }
                    _ => out.push(i),
                }
            }
            b.instructions = out;
        }
    }
    m.functions = functions;
    g.finish(m);
}

/// See the module documentation.
pub fn byte_vectors(m: &mut Module) {
    let mut g = Globals::new(m);
    let bytes: HashSet<Word> = g
        .types
        .values()
        .filter(|t| {
            t.class.opcode == Op::TypeInt
                && t.operands == [Operand::LiteralBit32(8), Operand::LiteralBit32(0)]
        })
        .filter_map(|t| t.result_id)
        .collect();
    if bytes.is_empty() {
        return;
    }
    let byte_vecs: HashSet<Word> = g
        .types
        .values()
        .filter(|t| {
            t.class.opcode == Op::TypeVector
                && matches!(t.operands.first(), Some(Operand::IdRef(c)) if bytes.contains(c))
                && t.operands.get(1) == Some(&Operand::LiteralBit32(4))
        })
        .filter_map(|t| t.result_id)
        .collect();
    let mut type_of: HashMap<Word, Word> = HashMap::new();
    for i in m.all_inst_iter() {
        if let (Some(id), Some(t)) = (i.result_id, i.result_type) {
            type_of.insert(id, t);
        }
    }
    let u = g.u32_ty(m);
    let uv = g.u32_vec(m, 4);
    // byte vector id -> its lanes as vec4<u32>, each 0..=255
    let mut lanes: HashMap<Word, Word> = HashMap::new();
    let mut functions = std::mem::take(&mut m.functions);
    for f in &mut functions {
        for b in &mut f.blocks {
            let mut out = Vec::with_capacity(b.instructions.len());
            for mut i in b.instructions.drain(..) {
                let op = i.class.opcode;
                let ty = i.result_type.unwrap_or(0);
                let id = i.result_id.unwrap_or(0);
                let arg = id_operand(&i, 0).unwrap_or(0);
                let arg_ty = type_of.get(&arg).copied().unwrap_or(0);
                match op {
                    // u32 -> vec4<u8>: the four bytes, low first.
                    Op::Bitcast if byte_vecs.contains(&ty) && arg_ty == u => {
                        let x = fresh(m);
                        out.push(inst(Op::CompositeConstruct, uv, x, &[arg, arg, arg, arg]));
                        let sh = fresh(m);
                        let c: Vec<Word> = [0, 8, 16, 24]
                            .iter()
                            .map(|v| g.constant(m, u, u, *v))
                            .collect();
                        out.push(inst(Op::CompositeConstruct, uv, sh, &c));
                        let shifted = fresh(m);
                        out.push(inst(Op::ShiftRightLogical, uv, shifted, &[x, sh]));
                        let mask = g.constant(m, u, uv, 0xff);
                        let l = fresh(m);
                        out.push(inst(Op::BitwiseAnd, uv, l, &[shifted, mask]));
                        lanes.insert(id, l);
                    }
                    // vec4<u32> -> vec4<u8>: truncated lanes.
                    Op::UConvert if byte_vecs.contains(&ty) && arg_ty == uv => {
                        let mask = g.constant(m, u, uv, 0xff);
                        let l = fresh(m);
                        out.push(inst(Op::BitwiseAnd, uv, l, &[arg, mask]));
                        lanes.insert(id, l);
                    }
                    Op::UConvert if ty == uv && lanes.contains_key(&arg) => {
                        out.push(inst(Op::CopyObject, uv, id, &[lanes[&arg]]));
                    }
                    // vec4<u8> -> u32: the lanes packed, low first.
                    Op::Bitcast if ty == u && lanes.contains_key(&arg) => {
                        let l = lanes[&arg];
                        let c: Vec<Word> = [0, 8, 16, 24]
                            .iter()
                            .map(|v| g.constant(m, u, u, *v))
                            .collect();
                        let sh = fresh(m);
                        out.push(inst(Op::CompositeConstruct, uv, sh, &c));
                        let shifted = fresh(m);
                        out.push(inst(Op::ShiftLeftLogical, uv, shifted, &[l, sh]));
                        let mut acc = None;
                        for k in 0..4u32 {
                            let e = fresh(m);
                            out.push(Instruction::new(
                                Op::CompositeExtract,
                                Some(u),
                                Some(e),
                                vec![Operand::IdRef(shifted), Operand::LiteralBit32(k)],
                            ));
                            acc = Some(match acc {
                                None => e,
                                Some(a) => {
                                    let o = if k == 3 { id } else { fresh(m) };
                                    out.push(inst(Op::BitwiseOr, u, o, &[a, e]));
                                    o
                                }
                            });
                        }
                    }
                    _ => {
                        if matches!(op, Op::IEqual | Op::INotEqual) {
                            for o in &mut i.operands {
                                if let Operand::IdRef(x) = o
                                    && let Some(l) = lanes.get(x)
                                {
                                    *x = *l;
                                }
                            }
                        }
                        out.push(i);
                    }
                }
            }
            b.instructions = out;
        }
    }
    m.functions = functions;
    g.finish(m);
    // The byte types go when nothing uses them any more.
    let used: HashSet<Word> = m
        .all_inst_iter()
        .filter(|i| {
            !i.result_id
                .is_some_and(|id| bytes.contains(&id) || byte_vecs.contains(&id))
        })
        .flat_map(|i| {
            i.result_type
                .into_iter()
                .chain(i.operands.iter().filter_map(|o| match o {
                    Operand::IdRef(id) => Some(*id),
                    _ => None,
                }))
        })
        .collect();
    if byte_vecs.iter().all(|v| !used.contains(v)) {
        m.types_global_values
            .retain(|i| !i.result_id.is_some_and(|id| byte_vecs.contains(&id)));
        if bytes.iter().all(|v| !used.contains(v)) {
            m.types_global_values
                .retain(|i| !i.result_id.is_some_and(|id| bytes.contains(&id)));
        }
    }
}
