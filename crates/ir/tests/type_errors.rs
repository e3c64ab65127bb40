//! Ill-typed or ill-formed kernels are refused by `build`, and the message
//! names the operation.

use compute_ir::ir::{KernelDef, Op, Stmt, ValueId};
use compute_ir::{IrError, Kernel, KernelBuilder, Scalar, Type};

fn err(f: impl FnOnce(&KernelBuilder)) -> IrError {
    let b = KernelBuilder::new("bad", [1, 1, 1]);
    f(&b);
    b.build().expect_err("must be refused")
}

fn assert_names(e: &IrError, op: &str) {
    assert_eq!(e.op(), op, "{e}");
    assert!(e.to_string().contains(&format!("`{op}`")), "{e}");
}

#[test]
fn arithmetic_on_mismatched_types_names_add() {
    let e = err(|b| {
        let x = b.u32(1);
        let y = b.f32(1.0);
        b.add(x, y);
    });
    assert_names(&e, "add");
    assert!(
        e.to_string().contains("u32") && e.to_string().contains("f32"),
        "{e}"
    );
}

#[test]
fn float_math_on_integers_names_the_function() {
    let e = err(|b| {
        let x = b.i32(4);
        b.sqrt(x);
    });
    assert_names(&e, "sqrt");
    let e = err(|b| {
        let x = b.u32(4);
        b.neg(x);
    });
    assert_names(&e, "neg");
    let e = err(|b| {
        let x = b.f32(1.0);
        b.bit_not(x);
    });
    assert_names(&e, "bit_not");
}

#[test]
fn shift_amount_must_be_u32() {
    let e = err(|b| {
        let x = b.i32(1);
        let s = b.i32(2);
        b.shl(x, s);
    });
    assert_names(&e, "shl");
}

#[test]
fn select_condition_must_be_bool() {
    let e = err(|b| {
        let c = b.u32(1);
        let x = b.f32(1.0);
        b.select(c, x, x);
    });
    assert_names(&e, "select");
}

#[test]
fn if_condition_must_be_bool() {
    let e = err(|b| {
        let c = b.u32(1);
        b.if_(c, |_| {});
    });
    assert_names(&e, "if");
}

#[test]
fn store_checks_access_and_element_type() {
    let e = err(|b| {
        let input = b.input(Scalar::F32);
        let i = b.u32(0);
        let x = b.f32(1.0);
        b.store(input, i, x);
    });
    assert_names(&e, "store");
    assert!(e.to_string().contains("read-only"), "{e}");
    let e = err(|b| {
        let out = b.output(Scalar::F32);
        let i = b.u32(0);
        let x = b.u32(1);
        b.store(out, i, x);
    });
    assert_names(&e, "store");
    let e = err(|b| {
        let out = b.output(Scalar::F32);
        let i = b.f32(0.0);
        b.load(out, i);
    });
    assert_names(&e, "load");
}

#[test]
fn atomics_need_atomic_integer_buffers() {
    let e = err(|b| {
        let h = b.atomic_buffer(Scalar::U32);
        let i = b.u32(0);
        let x = b.i32(1);
        b.atomic_add(h, i, x);
    });
    assert_names(&e, "atomicAdd");
    let e = err(|b| {
        b.atomic_buffer(Scalar::F32);
    });
    assert_names(&e, "atomic_buffer");
    let e = err(|b| {
        let h = b.atomic_buffer(Scalar::I32);
        let i = b.u32(0);
        b.load(
            compute_ir::Shared {
                index: 9,
                elem: Scalar::I32,
                lanes: 1,
                len: 1,
            },
            i,
        );
        let _ = h;
    });
    assert_names(&e, "load");
}

#[test]
fn scalar_args_are_four_byte_numbers() {
    let e = err(|b| {
        b.scalar_arg(Scalar::Bool);
    });
    assert_names(&e, "scalar_arg");
}

#[test]
fn values_do_not_escape_their_block() {
    let e = err(|b| {
        let c = b.bool(true);
        let mut inner = None;
        b.if_(c, |b| inner = Some(b.u32(3)));
        let x = inner.expect("set");
        let y = b.u32(1);
        b.add(x, y);
    });
    assert_names(&e, "add");
    assert!(e.to_string().contains("outside the block"), "{e}");
}

#[test]
fn break_outside_a_loop_is_refused() {
    let e = err(|b| b.break_());
    assert_names(&e, "break");
}

#[test]
fn set_checks_the_variable_type() {
    let e = err(|b| {
        let x = b.u32(1);
        let v = b.var(x);
        let y = b.f32(1.0);
        b.set(v, y);
    });
    assert_names(&e, "set");
}

#[test]
fn hand_built_ir_goes_through_the_same_checks() {
    let def = KernelDef {
        name: "hand".into(),
        workgroup_size: [1, 1, 1],
        buffers: vec![],
        scalars: vec![],
        shared: vec![],
        locals: vec![],
        matrices: vec![],
        values: vec![Type::U32, Type::F32, Type::U32],
        vars: vec![],
        body: vec![
            Stmt::Let(ValueId(0), Op::Lit(1u32.into())),
            Stmt::Let(ValueId(1), Op::Lit(1.0f32.into())),
            Stmt::Let(
                ValueId(2),
                Op::Binary(compute_ir::BinOp::Mul, ValueId(0), ValueId(1)),
            ),
        ],
    };
    let e = Kernel::new(def).expect_err("ill-typed");
    assert_names(&e, "mul");
}

#[test]
fn vector_buffers_take_2_or_4_lanes_and_their_own_type() {
    // vec3 (padded to 16 bytes in storage) and vec5 are refused.
    for lanes in [0u8, 3, 5] {
        let e = err(|b| {
            b.input_vec(Scalar::F32, lanes);
        });
        assert_names(&e, "buffer");
    }
    // A scalar stored into a buffer of vec4<f32> names the store.
    let e = err(|b| {
        let out = b.output_vec(Scalar::F32, 4);
        let i = b.u32(0);
        let x = b.f32(1.0);
        b.store(out, i, x);
    });
    assert_names(&e, "store");
    assert!(e.to_string().contains("vec4<f32>"), "{e}");
    // A load from one is a vec4<f32>: adding a scalar to it is a type error.
    let e = err(|b| {
        let src = b.input_vec(Scalar::F32, 4);
        let i = b.u32(0);
        let v = b.load(src, i);
        let x = b.f32(1.0);
        b.add(v, x);
    });
    assert_names(&e, "add");
}

#[test]
fn bit_fields_and_dot_refuse_what_wgsl_does_not_define() {
    // Bit fields: 32-bit integers only, u32 offset and count.
    let e = err(|b| {
        let x = b.f32(1.0);
        b.extract_bits(x, 0u32, 4u32);
    });
    assert_names(&e, "extractBits");
    let e = err(|b| {
        let x = b.u32(1);
        let o = b.i32(0);
        b.insert_bits(x, 0u32, o, 4u32);
    });
    assert_names(&e, "insertBits");
    // Dot: two vectors of one type, not scalars, not bool or 64-bit.
    let e = err(|b| {
        let x = b.f32(1.0);
        b.dot(x, x);
    });
    assert_names(&e, "dot");
    let e = err(|b| {
        let one = b.u64(1);
        let x = b.splat(one, 2);
        b.dot(x, x);
    });
    assert_names(&e, "dot");
    let e = err(|b| {
        let x = b.f32(1.0);
        let y = b.u32(1);
        let (x, y) = (b.splat(x, 2), b.splat(y, 2));
        b.dot(x, y);
    });
    assert_names(&e, "dot");
    // atan2: f32 and f16 only.
    let e = err(|b| {
        let x = b.f64(1.0);
        b.atan2(x, x);
    });
    assert_names(&e, "atan2");
}
