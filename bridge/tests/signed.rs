//! Signed integer arithmetic through the bridge's SPIR-V path, on the
//! device, with exact expected values: the operations naga's SPIR-V front
//! end reads by type rather than by opcode (`bridge/src/spirv/`), at the
//! operands where a misreading shows (negative values, `i32::MIN`).

use cubecl_bridge::BridgeRuntime;
use cubecl_core as cubecl;
use cubecl_core::prelude::*;
use cubecl_runtime::runtime::Runtime;

#[cube(launch)]
fn signed_arithmetic<N: Size>(
    a: &[Vector<i32, N>],
    b: &[Vector<i32, N>],
    remainder: &mut [Vector<i32, N>],
    modulo: &mut [Vector<i32, N>],
    high: &mut [Vector<i32, N>],
) {
    if ABSOLUTE_POS < a.len() {
        remainder[ABSOLUTE_POS] = a[ABSOLUTE_POS] % b[ABSOLUTE_POS];
        modulo[ABSOLUTE_POS] = Vector::mod_floor(a[ABSOLUTE_POS], b[ABSOLUTE_POS]);
        high[ABSOLUTE_POS] = a[ABSOLUTE_POS].mul_hi(b[ABSOLUTE_POS]);
    }
}

/// (dividend, divisor), none dividing by zero.
const CASES: [(i32, i32); 24] = [
    (-7, 3),
    (7, -3),
    (-7, -3),
    (7, 3),
    (6, -3),
    (-6, 3),
    (0, -5),
    (-1, 1),
    (i32::MIN, 3),
    (i32::MIN, -3),
    (i32::MIN, 2),
    (i32::MIN, -1),
    (i32::MIN, i32::MIN),
    (i32::MIN, i32::MAX),
    (i32::MAX, i32::MIN),
    (-1, i32::MIN),
    (1, i32::MIN),
    (7, i32::MIN),
    (-7, i32::MIN),
    (i32::MAX, -2),
    (i32::MIN + 1, -1),
    (123_456_789, -10_000),
    (-123_456_789, 10_000),
    (-2_147_483_647, 65_536),
];

/// Rust's truncated remainder (the dividend's sign); `MIN % -1` is 0, the
/// remainder of the exact quotient (WGSL's, where Rust's `%` panics).
fn remainder(a: i32, b: i32) -> i32 {
    a.wrapping_rem(b)
}

/// The floored remainder (the divisor's sign), in 64 bits.
fn modulo(a: i32, b: i32) -> i32 {
    let (a, b) = (i64::from(a), i64::from(b));
    (((a % b) + b) % b) as i32
}

/// The high word of the 64-bit signed product.
fn high(a: i32, b: i32) -> i32 {
    ((i64::from(a) * i64::from(b)) >> 32) as i32
}

#[test]
fn signed_remainder_modulo_and_high_product_of_negative_operands() {
    let client = BridgeRuntime::client(&Default::default());
    let a: Vec<i32> = CASES.iter().map(|c| c.0).collect();
    let b: Vec<i32> = CASES.iter().map(|c| c.1).collect();
    let want = |f: fn(i32, i32) -> i32| -> Vec<i32> { CASES.iter().map(|c| f(c.0, c.1)).collect() };
    // Spot checks of the references themselves.
    assert_eq!((remainder(-7, 3), modulo(-7, 3)), (-1, 2));
    assert_eq!((remainder(i32::MIN, 3), modulo(i32::MIN, 3)), (-2, 1));
    assert_eq!(
        (remainder(7, i32::MIN), modulo(7, i32::MIN)),
        (7, -2_147_483_641)
    );
    assert_eq!(high(i32::MIN, i32::MIN), 1 << 30);
    for vector_size in [1, 4] {
        let n = CASES.len();
        let [lhs, rhs] = [&a, &b].map(|v| client.create_from_slice(i32::as_bytes(v)));
        let outputs = [(); 3].map(|_| client.empty(n * 4));
        signed_arithmetic::launch(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d((n / vector_size) as u32),
            vector_size,
            unsafe { BufferArg::from_raw_parts(lhs, n) },
            unsafe { BufferArg::from_raw_parts(rhs, n) },
            unsafe { BufferArg::from_raw_parts(outputs[0].clone(), n) },
            unsafe { BufferArg::from_raw_parts(outputs[1].clone(), n) },
            unsafe { BufferArg::from_raw_parts(outputs[2].clone(), n) },
        );
        let read = |h: &cubecl_runtime::server::Handle| {
            i32::from_bytes(&client.read_one(h.clone()).expect("the launch ran")).to_vec()
        };
        let cases = format!("(vector size {vector_size}; cases {CASES:?})");
        assert_eq!(read(&outputs[0]), want(remainder), "a % b {cases}");
        assert_eq!(read(&outputs[1]), want(modulo), "a.mod_floor(b) {cases}");
        assert_eq!(read(&outputs[2]), want(high), "a.mul_hi(b) {cases}");
    }
}

#[cube(launch)]
fn float_to_signed(input: &[f32], output: &mut [i32]) {
    if ABSOLUTE_POS < input.len() {
        output[ABSOLUTE_POS] = i32::cast_from(input[ABSOLUTE_POS]);
    }
}

#[test]
fn negative_floats_convert_to_negative_integers() {
    let client = BridgeRuntime::client(&Default::default());
    let input = [-1.5f32, -7.9, 2.5, -0.0, -2_147_483_648.0, -16_777_216.0];
    let want = [-1i32, -7, 2, 0, i32::MIN, -16_777_216];
    let output = client.empty(input.len() * 4);
    float_to_signed::launch(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(input.len() as u32),
        unsafe { BufferArg::from_raw_parts(client.create_from_slice(f32::as_bytes(&input)), 6) },
        unsafe { BufferArg::from_raw_parts(output.clone(), 6) },
    );
    let got = client.read_one(output).expect("the launch ran");
    assert_eq!(i32::from_bytes(&got), want);
}

#[cube(launch)]
fn signed_extrema(values: &[i32], cells: &mut [Atomic<i32>]) {
    if ABSOLUTE_POS < values.len() {
        cells[0].fetch_max(values[ABSOLUTE_POS]);
        cells[1].fetch_min(values[ABSOLUTE_POS]);
    }
}

#[test]
fn atomic_maximum_and_minimum_compare_signed_values() {
    // Compared unsigned, the maximum would be -1 (0xffffffff) and the
    // minimum 2.
    let client = BridgeRuntime::client(&Default::default());
    let values = [-5i32, 3, -1, 2, -100, 0, 1];
    let cells = client.create_from_slice(i32::as_bytes(&[i32::MIN, i32::MAX]));
    signed_extrema::launch(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(values.len() as u32),
        unsafe { BufferArg::from_raw_parts(client.create_from_slice(i32::as_bytes(&values)), 7) },
        unsafe { BufferArg::from_raw_parts(cells.clone(), 2) },
    );
    let got = client.read_one(cells).expect("the launch ran");
    assert_eq!(i32::from_bytes(&got), [3, -100]);
}

#[cube(launch)]
fn elected(output: &mut [u32]) {
    if plane_elect() {
        output[0] = 1;
    }
}

#[test]
fn an_instruction_off_the_allowlist_fails_the_launch_naming_it() {
    // naga's SPIR-V front end lacks OpGroupNonUniformElect: the kernel
    // does not compile, and the buffer it would have written says why.
    let client = BridgeRuntime::client(&Default::default());
    let output = client.create_from_slice(u32::as_bytes(&[0]));
    elected::launch(
        &client,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(1),
        unsafe { BufferArg::from_raw_parts(output.clone(), 1) },
    );
    let error = client.read_one(output).expect_err("the launch failed");
    let text = format!("{error:?}");
    assert!(
        text.contains(
            "unsupported SPIR-V instruction OpGroupNonUniformElect (naga's SPIR-V front end \
             misreads or lacks it)"
        ),
        "{text}"
    );
}
