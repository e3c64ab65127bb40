//! IR operations one at a time on the real adapter, at their edges:
//! `atan2` around the circle against the host, `extractBits` /
//! `insertBits` at every clamping edge and integer `dot` against the
//! interpreter, workgroup arrays of vectors against the interpreter, a
//! loop of a constant step (its trips counted) against the interpreter.
//! (Random programs cover them in combination, `ir.rs`.)

use compute_ir::Scalar;
use compute_testkit::bytes::{bytes_f32, bytes_u32, f32_bytes, u32_bytes};

use crate::ir::{both, read, run, server, upload};

/// `atan2(y, x)` on the device against the host's, around the circle
/// (both axes included, the origin left out: WGSL leaves it undefined),
/// within WGSL's bound for f32 `atan2` (4096 ULP of the result; at least
/// 1e-6, for the result 0, whose ULP is a subnormal's).
#[test]
fn atan2_matches_the_host_in_every_quadrant() {
    let k = compute_ir::KernelBuilder::new("atan2", [64, 1, 1]);
    let ys = k.input(Scalar::F32);
    let xs = k.input(Scalar::F32);
    let out = k.output(Scalar::F32);
    let gid = k.global_id();
    let i = k.x(gid);
    let y = k.load(ys, i);
    let x = k.load(xs, i);
    let a = k.atan2(y, x);
    k.store(out, i, a);
    let kernel = k.build().expect("kernel");

    let n = 64;
    let turn = |i: usize| std::f32::consts::TAU * i as f32 / n as f32;
    let radius = |i: usize| 0.5 + (i % 5) as f32;
    let y: Vec<f32> = (0..n).map(|i| radius(i) * turn(i).sin()).collect();
    let x: Vec<f32> = (0..n).map(|i| radius(i) * turn(i).cos()).collect();
    let mut s = server();
    let (hy, hx) = (upload(&mut s, f32_bytes(&y)), upload(&mut s, f32_bytes(&x)));
    let ho = upload(&mut s, vec![0; n * 4]);
    run(
        &mut s,
        &kernel,
        [1, 1, 1],
        &[hy, hx, ho.clone()],
        Vec::new(),
    );
    let got = bytes_f32(&read(&mut s, &ho));
    for (i, g) in got.iter().enumerate() {
        let want = y[i].atan2(x[i]);
        let ulp = f32::from_bits(want.abs().to_bits() + 1) - want.abs();
        assert!(
            (g - want).abs() <= (4096.0 * ulp).max(1e-6),
            "atan2({}, {}) = {g}, host {want}",
            y[i],
            x[i]
        );
    }
}

/// `extractBits` (i32 and u32) and `insertBits` at every edge of the
/// clamping (offsets and counts at, around and far past 32), and integer
/// `dot` wrapping, on the device against the interpreter: invocation `i`
/// takes offset `i % 9` of the list and count `i / 9`.
#[test]
fn bit_fields_and_integer_dot_match_the_interpreter_at_the_edges() {
    const EDGES: [u32; 9] = [0, 1, 15, 31, 32, 33, 63, 1000, u32::MAX];
    let k = compute_ir::KernelBuilder::new("bit_fields", [81, 1, 1]);
    let offsets = k.input(Scalar::U32);
    let counts = k.input(Scalar::U32);
    let out = k.output(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let o = k.load(offsets, i);
    let c = k.load(counts, i);
    let e = k.u32(0xDEAD_BEEF);
    let unsigned = k.extract_bits(e, o, c);
    let signed_in = k.i32(0x8765_4321_u32 as i32);
    let signed = k.extract_bits(signed_in, o, c);
    let signed = k.bitcast(signed, Scalar::U32);
    let inserted = k.insert_bits(e, 0x1234_5678u32, o, c);
    let a = k.vec(&[e, unsigned, inserted]);
    let b = k.vec(&[inserted, e, unsigned]);
    let d = k.dot(a, b);
    let at = k.mul(i, 4u32);
    k.store(out, at, unsigned);
    let at1 = k.add(at, 1u32);
    k.store(out, at1, signed);
    let at2 = k.add(at, 2u32);
    k.store(out, at2, inserted);
    let at3 = k.add(at, 3u32);
    k.store(out, at3, d);
    let kernel = k.build().expect("kernel");

    let offsets: Vec<u32> = (0..81).map(|i| EDGES[i % 9]).collect();
    let counts: Vec<u32> = (0..81).map(|i| EDGES[i / 9]).collect();
    let buffers = vec![u32_bytes(&offsets), u32_bytes(&counts), vec![0; 81 * 16]];
    let mut s = server();
    let (got, expected) = both(&mut s, &kernel, [1, 1, 1], buffers, 32);
    let (got, expected) = (bytes_u32(&got[2]), bytes_u32(&expected[2]));
    for (n, (g, e)) in got.iter().zip(&expected).enumerate() {
        let (inv, which) = (n / 4, n % 4);
        assert_eq!(
            g,
            e,
            "offset {} count {}: {}",
            offsets[inv],
            counts[inv],
            ["extractBits u32", "extractBits i32", "insertBits", "dot"][which]
        );
    }
}

/// Workgroup arrays of `vec2<u32>` and `vec4<f32>`: each invocation stages
/// one vector of each, and after a barrier reads its mirror's (invocation
/// `63 - i`), with a lane swizzle; on the device against the interpreter.
#[test]
fn vector_workgroup_arrays_match_the_interpreter() {
    let k = compute_ir::KernelBuilder::new("staged", [64, 1, 1]);
    let (x, y) = (k.input_vec(Scalar::U32, 2), k.input_vec(Scalar::F32, 4));
    let (ox, oy) = (k.output_vec(Scalar::U32, 2), k.output_vec(Scalar::F32, 4));
    let (sx, sy) = (
        k.shared_vec(Scalar::U32, 2, 64),
        k.shared_vec(Scalar::F32, 4, 64),
    );
    let i = k.local_index();
    k.store(sx, i, k.load(x, i));
    k.store(sy, i, k.load(y, i));
    k.barrier();
    let mirror = k.sub(63u32, i);
    let v = k.load(sx, mirror);
    k.store(ox, i, k.vec(&[k.extract(v, 1), k.extract(v, 0)]));
    k.store(oy, i, k.load(sy, mirror));
    let kernel = k.build().expect("kernel");

    let xs: Vec<u32> = (0..128u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let ys: Vec<f32> = (0..256).map(|i| i as f32 / 8.0 - 3.0).collect();
    let buffers = vec![
        u32_bytes(&xs),
        f32_bytes(&ys),
        vec![0; 64 * 8],
        vec![0; 64 * 16],
    ];
    let mut s = server();
    let (got, expected) = both(&mut s, &kernel, [1, 1, 1], buffers, 32);
    assert_eq!(bytes_u32(&got[2]), bytes_u32(&expected[2]), "vec2<u32>");
    assert_eq!(bytes_f32(&got[3]), bytes_f32(&expected[3]), "vec4<f32>");
    assert_eq!(bytes_u32(&expected[2])[..2], [xs[127], xs[126]]);
}

/// A `u32` loop of a constant step (emitted as a count of its trips) on
/// the device against the interpreter: empty ranges, a last pass short of
/// the end, and an index that would wrap past `u32::MAX`, where the loop
/// ends (the IR's rule).
#[test]
fn a_loop_of_a_constant_step_runs_the_interpreters_passes() {
    let k = compute_ir::KernelBuilder::new("stepped", [64, 1, 1]);
    let starts = k.input(Scalar::U32);
    let ends = k.input(Scalar::U32);
    let passes = k.output(Scalar::U32);
    let last = k.output(Scalar::U32);
    let i = k.x(k.global_id());
    let (start, end) = (k.load(starts, i), k.load(ends, i));
    let count = k.var(k.u32(0));
    let at = k.var(k.u32(0));
    k.for_range_step(start, end, 8u32, |k, j| {
        k.set(count, k.add(k.get(count), 1u32));
        k.set(at, j);
    });
    k.store(passes, i, k.get(count));
    k.store(last, i, k.get(at));
    let kernel = k.build().expect("kernel");

    let max = u32::MAX;
    let mut cases = vec![
        (0, 0),
        (5, 3),
        (0, 64),
        (3, 61),
        (0, 1),
        (7, 8),
        (max - 10, max),
        (max - 8, max),
        (max - 7, max),
        (max - 1, max),
        (max - 20, max - 4),
    ];
    cases.resize(64, (1, 17));
    let (s, e): (Vec<u32>, Vec<u32>) = cases.iter().copied().unzip();
    let mut dev = server();
    let zeros = vec![0u8; 64 * 4];
    let (got, expected) = both(
        &mut dev,
        &kernel,
        [1, 1, 1],
        vec![u32_bytes(&s), u32_bytes(&e), zeros.clone(), zeros],
        32,
    );
    assert_eq!(bytes_u32(&got[2]), bytes_u32(&expected[2]), "passes");
    assert_eq!(bytes_u32(&got[3]), bytes_u32(&expected[3]), "last index");
    // The interpreter's own count, by hand: (max - 10, max) passes at
    // max - 10 and max - 2, and stops where the next index would wrap.
    assert_eq!(bytes_u32(&expected[2])[6], 2);
    assert_eq!(bytes_u32(&expected[3])[6], max - 2);
    assert_eq!(bytes_u32(&expected[2])[3], 8);
}
