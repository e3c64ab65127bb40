//! What the allowlist refuses, each refusal naming the instruction.

use rspirv::dr::{Builder, Instruction, Module, Operand};
use rspirv::spirv::{
    BuiltIn, Decoration, FPRoundingMode, MemorySemantics, Op, Scope, SelectionControl, StorageClass,
};

use super::*;

/// The refusal of `m` (through the whole rewrite), which must name `op`.
fn refused(m: &Module, op: &str) -> String {
    let e = match for_naga(m) {
        Ok(_) => panic!("Op{op} passed the allowlist"),
        Err(e) => e,
    };
    let want = format!(
        "unsupported SPIR-V instruction Op{op} (naga's SPIR-V front end misreads or lacks it)"
    );
    assert!(e.starts_with(&want), "{e}");
    e
}

/// A kernel storing `o` of its inputs' values (of `elem`) as `out`.
fn with(o: Op, inputs: &[Elem], out: Elem) -> Module {
    kernel(inputs, out, |b, _, v| {
        let ty = out(b).0;
        op(b, o, ty, v)
    })
}

#[test]
fn smod_without_the_rewrite_is_refused() {
    // naga reads it through floats: the allowlist alone refuses it.
    let m = with(Op::SMod, &[u32s, u32s], u32s);
    let e = crate::spirv::allow::check(&m).expect_err("OpSMod is not listed");
    assert!(
        e.starts_with(
            "unsupported SPIR-V instruction OpSMod (naga's SPIR-V front end misreads or lacks it)"
        ),
        "{e}"
    );
}

#[test]
fn instructions_naga_lacks_are_refused() {
    let m = kernel(&[u32s, u32s], u32s, |b, ctx, v| {
        let st = b.type_struct([ctx.u32, ctx.u32]);
        let r = op(b, Op::IAddCarry, st, v);
        b.composite_extract(ctx.u32, None, r, [1]).expect("extract")
    });
    refused(&m, "IAddCarry");
    let m = kernel(&[u32s, u32s], u32s, |b, ctx, v| {
        let st = b.type_struct([ctx.u32, ctx.u32]);
        let r = op(b, Op::ISubBorrow, st, v);
        b.composite_extract(ctx.u32, None, r, [1]).expect("extract")
    });
    refused(&m, "ISubBorrow");
    // The polyfill covers 32 bits only.
    let m = kernel(&[u64s, u64s], u64s, |b, _, v| {
        let u64_t = u64s(b).0;
        let st = b.type_struct([u64_t, u64_t]);
        let r = op(b, Op::SMulExtended, st, v);
        b.composite_extract(u64_t, None, r, [1]).expect("extract")
    });
    refused(&m, "SMulExtended");
    let m = kernel(&[u32s], u32s, |b, ctx, _| {
        let scope = b.constant_bit32(ctx.u32, Scope::Subgroup as u32);
        let id = b.id();
        b.insert_into_block(
            rspirv::dr::InsertPoint::End,
            Instruction::new(
                Op::GroupNonUniformElect,
                Some(ctx.bool),
                Some(id),
                vec![Operand::IdScope(scope)],
            ),
        )
        .expect("inserted");
        let one = b.constant_bit32(ctx.u32, 1);
        op(b, Op::Select, ctx.u32, &[id, one, ctx.zero])
    });
    refused(&m, "GroupNonUniformElect");
}

#[test]
fn operations_on_the_wrong_signedness_are_refused() {
    // naga would divide, shift and compare these by their (signed) type.
    let e = refused(&with(Op::UDiv, &[i32s, i32s], i32s), "UDiv");
    assert!(e.ends_with("operand 0 is not an unsigned integer"), "{e}");
    refused(
        &with(Op::ShiftRightLogical, &[i32s, u32s], i32s),
        "ShiftRightLogical",
    );
    refused(&with(Op::ConvertUToF, &[i32s], f32s), "ConvertUToF");
    let m = kernel(&[i32s, i32s], i32s, |b, ctx, v| {
        let ty = i32s(b).0;
        glsl(b, ctx, 38, ty, v)
    });
    let e = refused(&m, "ExtInst");
    assert!(e.contains("GLSL.std.450 instruction 38"), "{e}");
}

#[test]
fn unordered_comparisons_and_nan_aware_glsl_are_refused() {
    let m = kernel(&[f32s, f32s], u32s, |b, ctx, v| {
        let c = op(b, Op::FUnordEqual, ctx.bool, v);
        let one = b.constant_bit32(ctx.u32, 1);
        op(b, Op::Select, ctx.u32, &[c, one, ctx.zero])
    });
    refused(&m, "FUnordEqual");
    let m = kernel(&[f32s, f32s], f32s, |b, ctx, v| {
        let ty = f32s(b).0;
        glsl(b, ctx, 79, ty, v)
    });
    refused(&m, "ExtInst");
    // 64-bit NaN tests are left by the polyfill (16 and 32 bits only).
    let m = kernel(&[f32s], u32s, |b, ctx, v| {
        let f64_t = b.type_float(64, None);
        let wide = op(b, Op::FConvert, f64_t, v);
        let c = op(b, Op::IsNan, ctx.bool, &[wide]);
        let one = b.constant_bit32(ctx.u32, 1);
        op(b, Op::Select, ctx.u32, &[c, one, ctx.zero])
    });
    refused(&m, "IsNan");
}

#[test]
fn barriers_naga_would_drop_or_widen_are_refused() {
    for (exec, semantics) in [
        // A plane (subgroup) sync: naga writes `workgroupBarrier()`.
        (Scope::Subgroup, MemorySemantics::WORKGROUP_MEMORY),
        // Device scope: naga drops it.
        (Scope::Device, MemorySemantics::UNIFORM_MEMORY),
        // No memory: naga writes no barrier at all.
        (Scope::Workgroup, MemorySemantics::ACQUIRE_RELEASE),
    ] {
        let m = kernel(&[u32s], u32s, |b, ctx, v| {
            let e = b.constant_bit32(ctx.u32, exec as u32);
            let s = b.constant_bit32(ctx.u32, semantics.bits());
            b.control_barrier(e, e, s).expect("barrier");
            v[0]
        });
        refused(&m, "ControlBarrier");
    }
    let m = kernel(&[u32s], u32s, |b, ctx, v| {
        let e = b.constant_bit32(ctx.u32, Scope::Workgroup as u32);
        let s = b.constant_bit32(
            ctx.u32,
            (MemorySemantics::ACQUIRE_RELEASE | MemorySemantics::WORKGROUP_MEMORY).bits(),
        );
        b.control_barrier(e, e, s).expect("barrier");
        v[0]
    });
    assert!(bridged(&m).1.contains("workgroupBarrier()"));
}

#[test]
fn a_wide_switch_is_refused() {
    // naga reads one literal word per case: a 64-bit selector's cases
    // would be misparsed.
    let m = kernel(&[u64s], u64s, |b, _, v| {
        let (merge, case) = (b.id(), b.id());
        b.selection_merge(merge, SelectionControl::NONE)
            .expect("merge");
        b.switch(v[0], merge, [(Operand::LiteralBit64(1), case)])
            .expect("switch");
        b.begin_block(Some(case)).expect("case");
        b.branch(merge).expect("branch");
        b.begin_block(Some(merge)).expect("merge block");
        v[0]
    });
    refused(&m, "Switch");
}

#[test]
fn bitcasts_that_change_the_shape_are_refused() {
    let m = kernel(&[u64s], u32x4s, |b, ctx, v| {
        let u2 = b.type_vector(ctx.u32, 2);
        let halves = op(b, Op::Bitcast, u2, v);
        let u4 = b.type_vector(ctx.u32, 4);
        b.vector_shuffle(u4, None, halves, halves, [0, 1, 0, 1])
            .expect("shuffle")
    });
    refused(&m, "Bitcast");
}

#[test]
fn unsigned_atomics_on_memory_a_signed_one_retypes_are_refused() {
    let m = kernel_with(&[u32s], &[u32s], |b, ctx, v| {
        let p = element(b, ctx, 1);
        let scope = b.constant_bit32(ctx.u32, Scope::Device as u32);
        let semantics = b.constant_bit32(ctx.u32, 0);
        b.atomic_s_max(ctx.u32, None, p, scope, semantics, v[0])
            .expect("smax");
        b.atomic_u_max(ctx.u32, None, p, scope, semantics, v[0])
            .expect("umax");
        vec![]
    });
    let e = refused(&m, "AtomicUMax");
    assert!(e.ends_with("on memory of the other signedness"), "{e}");
}

/// A kernel passing its input through, with `extra` run on the builder
/// first (a declaration the allowlist is to see).
fn declaring(extra: impl FnOnce(&mut Builder, &Ctx, &[u32]) -> Option<u32>) -> Module {
    kernel(&[u32s], u32s, |b, ctx, v| extra(b, ctx, v).unwrap_or(v[0]))
}

#[test]
fn decorations_built_ins_and_extensions_naga_ignores_are_refused() {
    // A rounding mode naga would ignore.
    let m = kernel(&[f32s], f32s, |b, _, v| {
        let f16_t = b.type_float(16, None);
        let narrow = op(b, Op::FConvert, f16_t, v);
        b.decorate(
            narrow,
            Decoration::FPRoundingMode,
            [Operand::FPRoundingMode(FPRoundingMode::RTZ)],
        );
        let ty = f32s(b).0;
        op(b, Op::FConvert, ty, &[narrow])
    });
    let e = refused(&m, "Decorate");
    assert!(e.contains("FPRoundingMode"), "{e}");
    let m = declaring(|b, ctx, _| {
        let u3 = b.type_vector(ctx.u32, 3);
        let ptr = b.type_pointer(None, StorageClass::Input, u3);
        let var = b.id();
        b.module_mut().types_global_values.push(Instruction::new(
            Op::Variable,
            Some(ptr),
            Some(var),
            vec![Operand::StorageClass(StorageClass::Input)],
        ));
        b.decorate(
            var,
            Decoration::BuiltIn,
            [Operand::BuiltIn(BuiltIn::WorkgroupSize)],
        );
        let size = b.load(u3, None, var, None, []).expect("load");
        Some(b.composite_extract(ctx.u32, None, size, [0]).expect("x"))
    });
    let e = refused(&m, "Decorate");
    assert!(e.contains("WorkgroupSize"), "{e}");
    let m = declaring(|b, _, _| {
        b.extension("SPV_KHR_bfloat16");
        None
    });
    let e = refused(&m, "Extension");
    assert!(e.contains("\"SPV_KHR_bfloat16\""), "{e}");
}

#[test]
fn layouts_other_than_wgsl_s_are_refused() {
    // vec3<f32> elements 12 bytes apart: WGSL's stride is 16.
    fn vec3s(b: &mut Builder) -> (u32, u32) {
        let f = b.type_float(32, None);
        (b.type_vector(f, 3), 12)
    }
    let m = kernel(&[vec3s], vec3s, |_, _, v| v[0]);
    let e = for_naga(&m).expect_err("a 12-byte stride of vec3<f32>");
    assert!(
        e.starts_with("unsupported SPIR-V layout: array stride 12"),
        "{e}"
    );
}
