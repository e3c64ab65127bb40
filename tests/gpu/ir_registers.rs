//! Per-invocation arrays and run-time lane indices, on the device against
//! the interpreter: a register window filled and read back in a permuted
//! order, vectors read and written at lanes named at run time; and, under
//! reported bounds checks, an index past a local array or a vector's lanes
//! is an error of the launch naming it.

use compute_ir::{KernelBuilder, Scalar, Type};
use compute_testkit::bytes::{bytes_u32, u32_bytes};
use wgpu_server::prelude::{
    BoundsChecks, CubeCount, KernelArguments, KernelArray, ServerError, WgpuServerOptions,
};

use crate::ir::{both, server};

/// Each invocation keeps 8 `u32` and 2 `vec4<u32>` in registers, written at
/// indices from its input and read back at others.
#[test]
fn local_arrays_and_run_time_lanes_match_the_interpreter() {
    let k = KernelBuilder::new("registers", [32, 1, 1]);
    let xs = k.input(Scalar::U32);
    let out = k.output(Scalar::U32);
    let i = k.x(k.global_id());
    let x = k.load(xs, i);
    let regs = k.local_array(Type::U32, 8);
    let quads = k.local_array(Type::vec(Scalar::U32, 4), 2);
    k.for_range(0u32, 8u32, |k, j| {
        // A permutation of 0..8 that depends on the input.
        let at = k.and(k.add(k.mul(j, 5u32), x), 7u32);
        k.store(regs, at, k.add(k.mul(x, j), 1u32));
    });
    k.for_range(0u32, 2u32, |k, q| {
        let v = k.vec(&[x, k.add(x, q), k.mul(x, 3u32), q]);
        let lane = k.and(k.add(x, q), 3u32);
        let v = k.with_lane(v, lane, k.load(regs, k.add(q, 4u32)));
        k.store(quads, q, v);
    });
    let base = k.mul(i, 10u32);
    k.for_range(0u32, 8u32, |k, j| {
        let r = k.load(regs, k.and(k.add(j, x), 7u32));
        k.store(out, k.add(base, j), r);
    });
    let q = k.load(quads, k.and(x, 1u32));
    let lane = k.and(k.mul(x, 7u32), 3u32);
    k.store(out, k.add(base, 8u32), k.index(q, lane));
    k.store(out, k.add(base, 9u32), k.index(q, k.sub(3u32, lane)));
    let kernel = k.build().expect("kernel");

    let n = 64usize;
    let xs: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9) >> 11)
        .collect();
    let buffers = vec![u32_bytes(&xs), vec![0; n * 10 * 4]];
    let mut s = server();
    let (got, expected) = both(&mut s, &kernel, [2, 1, 1], buffers, 32);
    assert_eq!(bytes_u32(&got[1]), bytes_u32(&expected[1]));
    // The host's reading of the first register read: regs[(0 + x) & 7].
    for (inv, x) in xs.iter().enumerate() {
        let want = (0..8u32)
            .find(|j| (j * 5 + x) & 7 == x & 7)
            .map(|j| x.wrapping_mul(j) + 1);
        assert_eq!(
            Some(bytes_u32(&expected[1])[inv * 10]),
            want,
            "invocation {inv}"
        );
    }
}

/// What an index past a local array, or past a vector's lanes, reports.
fn reported(index_local: bool) -> (KernelArray, u32, u32) {
    let c = WgpuServerOptions::new()
        .bounds_checks(BoundsChecks::Reported)
        .client()
        .expect("adapter");
    let k = KernelBuilder::new("past", [8, 1, 1]);
    let out = k.output(Scalar::U32);
    let i = k.x(k.global_id());
    let regs = k.local_array(Type::U32, 4);
    let v = k.vec(&[i, i, i]);
    let r = if index_local {
        k.store(regs, i, i); // 4..8 past the array
        k.load(regs, 0u32)
    } else {
        k.index(v, i) // 3..8 past the lanes
    };
    k.store(out, i, r);
    let kernel = k.build().expect("kernel");
    let y = c.empty(32).expect("y");
    c.launch(kernel, CubeCount::x(1), KernelArguments::handles([&y]))
        .expect("launch");
    match c.read_vec::<u32>(&y).expect_err("poisoned").root_cause() {
        ServerError::OutOfBoundsAccess {
            array, index, len, ..
        } => (*array, *index, *len),
        other => panic!("expected OutOfBoundsAccess, got {other}"),
    }
}

#[test]
fn an_index_past_a_local_array_or_a_vector_is_reported() {
    let (array, index, len) = reported(true);
    assert_eq!((array, len), (KernelArray::Local(0), 4));
    assert!((4..8).contains(&index), "{index}");
    let (array, index, len) = reported(false);
    assert_eq!((array, len), (KernelArray::Vector, 3));
    assert!((3..8).contains(&index), "{index}");
}
