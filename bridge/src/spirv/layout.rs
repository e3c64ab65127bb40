//! Explicit layouts as WGSL's natural ones (see the module documentation).

use std::collections::HashMap;

use rspirv::dr::{Instruction, Module, Operand};
use rspirv::spirv::{Decoration, Op, Word};

use super::{fresh, id_operand, type_map};

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

/// Every explicit layout decoration left (member offsets, array strides)
/// is WGSL's natural layout: naga's WGSL writer drops them, and the text
/// it writes is laid out naturally, so any other value would move bytes
/// silently. (Padded structs, [`pad_structs`], pass; nothing else is
/// changed here.)
pub(super) fn check_layouts(m: &Module) -> Result<(), String> {
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
    let none = (HashMap::new(), HashMap::new());
    let natural = |ty: Word| layout(&types, &constants, &none.0, &none.1, ty);
    let refuse = |what: String| {
        format!("unsupported SPIR-V layout: {what} (naga's WGSL writer drops explicit layouts)")
    };
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
                let elem = types.get(t).and_then(|a| id_operand(a, 0));
                let want = elem
                    .and_then(natural)
                    .map(|(size, align)| size.next_multiple_of(align));
                if want != Some(*s) {
                    return Err(refuse(format!(
                        "array stride {s} of %{t}, where WGSL's is {want:?}"
                    )));
                }
            }
            (
                Op::MemberDecorate,
                [
                    Operand::IdRef(t),
                    Operand::LiteralBit32(k),
                    Operand::Decoration(Decoration::Offset),
                    Operand::LiteralBit32(o),
                ],
            ) => {
                let Some(st) = types.get(t) else {
                    return Err(refuse(format!("an offset on %{t}, which is no type")));
                };
                let mut end = 0u32;
                let mut want = None;
                for i in 0..=*k as usize {
                    let Some((size, align)) = id_operand(st, i).and_then(natural) else {
                        want = None;
                        break;
                    };
                    let at = end.next_multiple_of(align);
                    want = Some(at);
                    end = at + size;
                }
                if want != Some(*o) {
                    return Err(refuse(format!(
                        "member {k} of %{t} at offset {o}, where WGSL's is {want:?}"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
