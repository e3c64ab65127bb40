//! Each rewrite and each fix of a misread, on a kernel that needs it: the
//! instructions after the rewrite, naga's acceptance of the result, and
//! the operation in naga's WGSL.

use rspirv::dr::{Builder, Operand};
use rspirv::spirv::{GroupOperation, Op, Word};

use super::*;

/// `o` on input values `v` of two (or one) u32 buffers into a third, in
/// cubecl-spirv's shape (the signedness in the opcode, every integer
/// unsigned): naga's WGSL with expression names as `_`.
fn unsigned_typed(o: Op, arity: usize, out: Elem) -> String {
    let inputs: &[Elem] = if arity == 2 { &[u32s, u32s] } else { &[u32s] };
    let m = kernel(inputs, out, |b, _, v| {
        let ty = out(b).0;
        op(b, o, ty, &v[..arity])
    });
    shape(&bridged(&m).1)
}

#[test]
fn signed_arithmetic_computes_on_signed_types() {
    for (o, arity, want) in [
        (
            Op::SDiv,
            2,
            "bitcast<u32>((bitcast<i32>(_) / bitcast<i32>(_)))",
        ),
        (
            Op::SRem,
            2,
            "bitcast<u32>((bitcast<i32>(_) % bitcast<i32>(_)))",
        ),
        (Op::SNegate, 1, "bitcast<u32>(-(bitcast<i32>(_)))"),
        (
            Op::ShiftRightArithmetic,
            2,
            "bitcast<u32>((bitcast<i32>(_) >> bitcast<u32>(_)))",
        ),
    ] {
        let wgsl = unsigned_typed(o, arity, u32s);
        assert!(wgsl.contains(want), "{o:?}: no `{want}` in\n{wgsl}");
    }
}

#[test]
fn signed_conversions_convert_from_and_to_signed_types() {
    // Sign-extended to 64 bits (naga would zero-extend a u32).
    let wgsl = unsigned_typed(Op::SConvert, 1, u64s);
    assert!(
        wgsl.contains("bitcast<u64>(i64(bitcast<i32>(_)))"),
        "{wgsl}"
    );
    let wgsl = unsigned_typed(Op::ConvertSToF, 1, f32s);
    assert!(wgsl.contains("f32(bitcast<i32>(_))"), "{wgsl}");
    // Float to signed: `u32(-1.5)` would be 0, `i32(-1.5)` is -1.
    let m = kernel(&[f32s], u32s, |b, ctx, v| {
        op(b, Op::ConvertFToS, ctx.u32, &[v[0]])
    });
    let wgsl = shape(&bridged(&m).1);
    assert!(wgsl.contains("bitcast<u32>(i32(_))"), "{wgsl}");
    assert!(!wgsl.contains("u32(_)") || wgsl.contains("bitcast<u32>(i32(_))"));
}

#[test]
fn signed_comparisons_compare_signed_values() {
    for (o, sign) in [
        (Op::SLessThan, "<"),
        (Op::SLessThanEqual, "<="),
        (Op::SGreaterThan, ">"),
        (Op::SGreaterThanEqual, ">="),
    ] {
        let m = kernel(&[u32s, u32s], u32s, |b, ctx, v| {
            let c = op(b, o, ctx.bool, &[v[0], v[1]]);
            let one = b.constant_bit32(ctx.u32, 1);
            op(b, Op::Select, ctx.u32, &[c, one, ctx.zero])
        });
        let wgsl = shape(&bridged(&m).1);
        let want = format!("(bitcast<i32>(_) {sign} bitcast<i32>(_))");
        assert!(wgsl.contains(&want), "{o:?}: no `{want}` in\n{wgsl}");
    }
}

#[test]
fn signed_bit_operations_read_signed_values() {
    let m = kernel(&[u32s], u32s, |b, ctx, v| {
        let (off, n) = (b.constant_bit32(ctx.u32, 4), b.constant_bit32(ctx.u32, 8));
        op(b, Op::BitFieldSExtract, ctx.u32, &[v[0], off, n])
    });
    let wgsl = shape(&bridged(&m).1);
    assert!(
        wgsl.contains("extractBits(bitcast<i32>(_), 4u, 8u)"),
        "{wgsl}"
    );
}

#[test]
fn signed_glsl_instructions_take_signed_operands() {
    for (n, arity, want) in [
        (5, 1, "abs(bitcast<i32>(_))"),
        (7, 1, "sign(bitcast<i32>(_))"),
        (39, 2, "min(bitcast<i32>(_), bitcast<i32>(_))"),
        (42, 2, "max(bitcast<i32>(_), bitcast<i32>(_))"),
        (74, 1, "firstLeadingBit(bitcast<i32>(_))"),
    ] {
        let inputs: &[Elem] = if arity == 2 { &[u32s, u32s] } else { &[u32s] };
        let m = kernel(inputs, u32s, |b, ctx, v| glsl(b, ctx, n, ctx.u32, v));
        let wgsl = shape(&bridged(&m).1);
        assert!(wgsl.contains(want), "GLSL {n}: no `{want}` in\n{wgsl}");
    }
    let m = kernel(&[u32s, u32s, u32s], u32s, |b, ctx, v| {
        glsl(b, ctx, 45, ctx.u32, v)
    });
    let wgsl = shape(&bridged(&m).1);
    let want = "clamp(bitcast<i32>(_), bitcast<i32>(_), bitcast<i32>(_))";
    assert!(wgsl.contains(want), "SClamp: {wgsl}");
}

#[test]
fn signed_subgroup_minimum_and_maximum_compare_signed_values() {
    for (o, want) in [
        (Op::GroupNonUniformSMax, "subgroupMax(bitcast<i32>(_))"),
        (Op::GroupNonUniformSMin, "subgroupMin(bitcast<i32>(_))"),
    ] {
        let m = kernel(&[u32s], u32s, |b, ctx, v| {
            let scope = b.constant_bit32(ctx.u32, rspirv::spirv::Scope::Subgroup as u32);
            let id = b.id();
            let i = rspirv::dr::Instruction::new(
                o,
                Some(ctx.u32),
                Some(id),
                vec![
                    Operand::IdScope(scope),
                    Operand::GroupOperation(GroupOperation::Reduce),
                    Operand::IdRef(v[0]),
                ],
            );
            b.insert_into_block(rspirv::dr::InsertPoint::End, i)
                .expect("inserted");
            id
        });
        let wgsl = shape(&bridged(&m).1);
        assert!(wgsl.contains(want), "{o:?}: {wgsl}");
    }
}

#[test]
fn smod_is_a_truncated_remainder_with_a_sign_correction() {
    for (elem, zero) in [(u32s as Elem, "0u"), (u64s, "0lu")] {
        let m = kernel(&[elem, elem], elem, |b, _, v| {
            let ty = elem(b).0;
            op(b, Op::SMod, ty, &[v[0], v[1]])
        });
        let (fixed, wgsl) = bridged(&m);
        assert_eq!(count(&fixed, Op::SMod), 0, "OpSMod is rewritten away");
        assert_eq!(count(&fixed, Op::SRem), 1);
        let wgsl = shape(&wgsl);
        // Not naga's float detour, `x - y * floor(f(x) / f(y))`: a signed
        // `%`, and the divisor added where the signs differ.
        assert!(!wgsl.contains("floor") && !wgsl.contains("f32"), "{wgsl}");
        assert!(wgsl.contains("(bitcast<i"), "{wgsl}");
        assert!(wgsl.contains("(_) % bitcast<i"), "{wgsl}");
        let fix = format!("select(_, (_ + _), ((_ != {zero}) && (bitcast<i");
        assert!(wgsl.contains(&fix), "{wgsl}");
    }
}

/// A kernel whose body runs `atomic` on `buffer[idx]` of its output buffer
/// (a u32 buffer), with the invocation's input value.
fn atomic_kernel(atomics: &[Op]) -> rspirv::dr::Module {
    let atomics = atomics.to_vec();
    kernel_with(&[u32s], &[u32s, u32s], move |b, ctx, v| {
        let p = element(b, ctx, 1);
        let scope = b.constant_bit32(ctx.u32, rspirv::spirv::Scope::Device as u32);
        let semantics = b.constant_bit32(ctx.u32, 0x48);
        let mut last = ctx.zero;
        for o in atomics {
            let id = b.id();
            let i = rspirv::dr::Instruction::new(
                o,
                Some(ctx.u32),
                Some(id),
                vec![
                    Operand::IdRef(p),
                    Operand::IdScope(scope),
                    Operand::IdMemorySemantics(semantics),
                    Operand::IdRef(v[0]),
                ],
            );
            b.insert_into_block(rspirv::dr::InsertPoint::End, i)
                .expect("inserted");
            last = id;
        }
        // The old value, to the second output (a plain buffer).
        vec![ctx.zero, last][1..].to_vec()
    })
}

#[test]
fn signed_atomics_retype_the_memory_they_reach() {
    let m = atomic_kernel(&[Op::AtomicSMax, Op::AtomicIAdd, Op::AtomicSMin]);
    let (_, wgsl) = bridged(&m);
    let wgsl = shape(&wgsl);
    assert!(wgsl.contains("array<atomic<i32>>"), "{wgsl}");
    assert!(
        wgsl.contains("atomicMax((&binding_1_.member[_]), bitcast<i32>(_))"),
        "{wgsl}"
    );
    assert!(
        wgsl.contains("atomicMin((&binding_1_.member[_]), bitcast<i32>(_))"),
        "{wgsl}"
    );
    // The other buffers keep their type; the old value is bitcast back.
    assert!(wgsl.contains("array<u32>"), "{wgsl}");
    assert!(wgsl.contains("bitcast<u32>(_)"), "{wgsl}");
}

#[test]
fn unsigned_atomics_leave_the_memory_unsigned() {
    let m = atomic_kernel(&[Op::AtomicUMax, Op::AtomicIAdd]);
    let wgsl = shape(&bridged(&m).1);
    assert!(wgsl.contains("array<atomic<u32>>"), "{wgsl}");
    assert!(!wgsl.contains("i32"), "{wgsl}");
}

#[test]
fn vector_logical_operations_become_selects() {
    let m = kernel(&[u32x4s, u32x4s], u32x4s, |b, ctx, v| {
        let u4 = b.type_vector(ctx.u32, 4);
        let b4 = b.type_vector(ctx.bool, 4);
        let zeros = b.constant_composite(u4, [ctx.zero; 4]);
        let one = b.constant_bit32(ctx.u32, 1);
        let ones = b.constant_composite(u4, [one; 4]);
        let x = op(b, Op::INotEqual, b4, &[v[0], zeros]);
        let y = op(b, Op::INotEqual, b4, &[v[1], zeros]);
        let and = op(b, Op::LogicalAnd, b4, &[x, y]);
        let or = op(b, Op::LogicalOr, b4, &[and, y]);
        op(b, Op::Select, u4, &[or, ones, zeros])
    });
    let (fixed, wgsl) = bridged(&m);
    assert_eq!(
        count(&fixed, Op::LogicalAnd) + count(&fixed, Op::LogicalOr),
        0
    );
    assert!(!wgsl.contains("&&") && !wgsl.contains("||"), "{wgsl}");
}

#[test]
fn nan_and_infinity_tests_read_the_bits() {
    for (o, want) in [(Op::IsNan, "> 2139095040u"), (Op::IsInf, "== 2139095040u")] {
        let m = kernel(&[f32s], u32s, |b, ctx, v| {
            let c = op(b, o, ctx.bool, &[v[0]]);
            let one = b.constant_bit32(ctx.u32, 1);
            op(b, Op::Select, ctx.u32, &[c, one, ctx.zero])
        });
        let (fixed, wgsl) = bridged(&m);
        assert_eq!(count(&fixed, o), 0);
        let wgsl = shape(&wgsl);
        assert!(wgsl.contains("(bitcast<u32>(_) & 2147483647u)"), "{wgsl}");
        assert!(wgsl.contains(want), "{o:?}: {wgsl}");
    }
}

/// The high word of `o` (`OpUMulExtended`/`OpSMulExtended`) of two u32s.
fn mul_high(o: Op) -> (rspirv::dr::Module, String) {
    let m = kernel(&[u32s, u32s], u32s, |b, ctx, v| {
        let st = b.type_struct([ctx.u32, ctx.u32]);
        let wide = op(b, o, st, &[v[0], v[1]]);
        b.composite_extract(ctx.u32, None, wide, [1])
            .expect("extract")
    });
    let (fixed, wgsl) = bridged(&m);
    (fixed, shape(&wgsl))
}

#[test]
fn extended_multiplications_are_built_from_halves() {
    let (fixed, wgsl) = mul_high(Op::UMulExtended);
    assert_eq!(count(&fixed, Op::UMulExtended), 0);
    assert!(
        wgsl.contains("65535u") && wgsl.contains(">> bitcast<u32>(16u)"),
        "{wgsl}"
    );
    let (fixed, wgsl) = mul_high(Op::SMulExtended);
    assert_eq!(count(&fixed, Op::SMulExtended), 0);
    // The unsigned high word, less each operand where the other is negative.
    assert!(wgsl.contains("> 2147483647u"), "{wgsl}");
    assert!(wgsl.contains("select(0u, _, (_ > 2147483647u))"), "{wgsl}");
}

#[test]
fn wide_shift_amounts_are_narrowed() {
    let m = kernel(&[u64s, u64s], u64s, |b, _, v| {
        let ty = u64s(b).0;
        op(b, Op::ShiftLeftLogical, ty, &[v[0], v[1]])
    });
    let wgsl = shape(&bridged(&m).1);
    assert!(wgsl.contains("(_ << bitcast<u32>(u32(_)))"), "{wgsl}");
}

#[test]
fn byte_vectors_become_lanes_of_u32() {
    let m = kernel(&[u32s], u32s, |b, ctx, v| {
        b.capability(rspirv::spirv::Capability::Int8);
        let u8_t = b.type_int(8, 0);
        let bytes = b.type_vector(u8_t, 4);
        let u4 = b.type_vector(ctx.u32, 4);
        let packed = op(b, Op::Bitcast, bytes, &[v[0]]);
        let lanes = op(b, Op::UConvert, u4, &[packed]);
        b.composite_extract(ctx.u32, None, lanes, [2])
            .expect("extract")
    });
    let (fixed, wgsl) = bridged(&m);
    assert!(
        !fixed
            .types_global_values
            .iter()
            .any(|t| t.class.opcode == Op::TypeInt
                && t.operands.first() == Some(&Operand::LiteralBit32(8)))
    );
    let wgsl = shape(&wgsl);
    assert!(
        wgsl.contains("vec4<u32>(0u, 8u, 16u, 24u)") && wgsl.contains("255u"),
        "{wgsl}"
    );
}

/// `b`'s workgroup array of four u32 declared as cubecl-spirv does,
/// through a pointer to a pointer.
fn shared_array(b: &mut Builder, ctx: &Ctx) -> (Word, Word) {
    let four = b.constant_bit32(ctx.u32, 4);
    let arr = b.type_array(ctx.u32, four);
    let inner = b.type_pointer(None, rspirv::spirv::StorageClass::Workgroup, arr);
    let outer = b.type_pointer(None, rspirv::spirv::StorageClass::Workgroup, inner);
    let var = b.id();
    b.module_mut()
        .types_global_values
        .push(rspirv::dr::Instruction::new(
            Op::Variable,
            Some(outer),
            Some(var),
            vec![Operand::StorageClass(
                rspirv::spirv::StorageClass::Workgroup,
            )],
        ));
    let elem = b.type_pointer(None, rspirv::spirv::StorageClass::Workgroup, ctx.u32);
    (var, elem)
}

#[test]
fn shared_variables_get_the_pointer_type_their_uses_read() {
    let m = kernel(&[u32s], u32s, |b, ctx, v| {
        let (var, elem) = shared_array(b, ctx);
        let p = b
            .in_bounds_access_chain(elem, None, var, [ctx.zero])
            .expect("chain");
        b.store(p, v[0], None, []).expect("store");
        b.load(ctx.u32, None, p, None, []).expect("load")
    });
    let wgsl = bridged(&m).1;
    assert!(
        wgsl.contains("var<workgroup> global_1: array<u32, 4>;") || wgsl.contains("var<workgroup>"),
        "{wgsl}"
    );
}

/// Non-finite float constants become run-time values: WGSL (and naga's
/// validator) refuse a NaN or infinite literal, even through a
/// const-expression `bitcast`.
#[test]
fn nan_and_infinite_constants_become_run_time_values() {
    let m = kernel(&[f32s], f32s, |b, _ctx, v| {
        let f32_t = b.type_float(32, None);
        let nan = b.constant_bit32(f32_t, 0x7fc0_0000);
        let inf = b.constant_bit32(f32_t, 0x7f80_0000);
        let sum = op(b, Op::FAdd, f32_t, &[v[0], nan]);
        op(b, Op::FMul, f32_t, &[sum, inf])
    });
    assert!(naga_wgsl(&m).is_err(), "naga takes NaN literals now?");
    let (fixed, wgsl) = bridged(&m);
    assert_eq!(count(&fixed, Op::Bitcast), 2, "{wgsl}");
    assert!(wgsl.contains("var<private>"), "{wgsl}");
    assert!(wgsl.contains("bitcast<f32>("), "{wgsl}");
    // What the server parses again: the WGSL front end takes it too.
    naga::front::wgsl::parse_str(&wgsl).unwrap_or_else(|e| panic!("{e}\n{wgsl}"));
}

/// A loop whose header defines `x = idx + 1` and `c = idx < 1`; after the
/// loop (its merge block, outside the loop body naga builds) `reader`
/// reads them: naga's front end spills such values, and panicked doing it
/// for a branch or a subgroup instruction.
fn read_after_loop(reader: impl FnOnce(&mut Builder, &Ctx, Word, Word) -> Word) -> Module {
    kernel(&[], u32s, |b, ctx, _| {
        let one = b.constant_bit32(ctx.u32, 1);
        let (header, body, cont, merge) = (b.id(), b.id(), b.id(), b.id());
        b.branch(header).expect("branch");
        b.begin_block(Some(header)).expect("header");
        let x = b.i_add(ctx.u32, None, ctx.idx, one).expect("add");
        let c = b
            .u_less_than(ctx.bool, None, ctx.idx, one)
            .expect("compare");
        b.loop_merge(merge, cont, rspirv::spirv::LoopControl::NONE, [])
            .expect("loop merge");
        b.branch_conditional(c, body, merge, []).expect("exit");
        b.begin_block(Some(body)).expect("body");
        b.branch(cont).expect("to continue");
        b.begin_block(Some(cont)).expect("continue");
        b.branch(header).expect("back edge");
        b.begin_block(Some(merge)).expect("merge");
        reader(b, ctx, x, c)
    })
}

#[test]
fn a_subgroup_instruction_reading_a_value_from_another_block_reads_a_copy() {
    let m = read_after_loop(|b, ctx, x, _| {
        let scope = b.constant_bit32(ctx.u32, rspirv::spirv::Scope::Subgroup as u32);
        let id = b.id();
        let i = Instruction::new(
            Op::GroupNonUniformIAdd,
            Some(ctx.u32),
            Some(id),
            vec![
                Operand::IdScope(scope),
                Operand::GroupOperation(GroupOperation::Reduce),
                Operand::IdRef(x),
            ],
        );
        b.insert_into_block(rspirv::dr::InsertPoint::End, i)
            .expect("inserted");
        id
    });
    let caught = std::panic::catch_unwind(|| naga_wgsl(&m));
    assert!(caught.is_err(), "naga's front end reads it as is now");
    let (fixed, wgsl) = bridged(&m);
    assert_eq!(count(&fixed, Op::CopyObject), 1);
    assert!(shape(&wgsl).contains("subgroupAdd("), "{wgsl}");
}

/// A rank-sized array of the function indexed by `index(v, ctx)`: cubecl's
/// fused reductions index the shape by an axis read from the metadata.
fn private_array_indexed_by(index: fn(&[Word], &Ctx) -> Word) -> (rspirv::dr::Module, String) {
    let m = kernel(&[u32s], u32s, |b, ctx, v| {
        let three = b.constant_bit32(ctx.u32, 3);
        let array = b.type_array(ctx.u32, three);
        let ptr = b.type_pointer(None, rspirv::spirv::StorageClass::Function, array);
        let elem_ptr = b.type_pointer(None, rspirv::spirv::StorageClass::Function, ctx.u32);
        let shape = b.variable(ptr, None, rspirv::spirv::StorageClass::Function, None);
        let one = b.constant_bit32(ctx.u32, 1);
        let first = b
            .in_bounds_access_chain(elem_ptr, None, shape, [one])
            .expect("chain");
        b.store(first, v[0], None, []).expect("store");
        let at = b
            .in_bounds_access_chain(elem_ptr, None, shape, [index(v, ctx)])
            .expect("chain");
        b.load(ctx.u32, None, at, None, []).expect("load")
    });
    let (fixed, wgsl) = bridged(&m);
    (fixed, shape(&wgsl))
}

#[test]
fn an_index_read_from_a_buffer_into_a_private_array_is_clamped_where_it_is_used() {
    let (fixed, wgsl) = private_array_indexed_by(|v, _| v[0]);
    assert_eq!(count(&fixed, Op::ExtInst), 1, "{wgsl}");
    assert!(wgsl.contains("[min(_, 2u)]"), "{wgsl}");
}

#[test]
fn an_index_from_a_thread_id_is_left_for_the_proof() {
    let (fixed, wgsl) = private_array_indexed_by(|_, ctx| ctx.idx);
    assert_eq!(count(&fixed, Op::ExtInst), 0, "{wgsl}");
    assert!(!wgsl.contains("min("), "{wgsl}");
}
