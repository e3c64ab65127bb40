//! Barriers only where every invocation of a workgroup reaches them: the
//! builder refuses the rest (`uniformity.rs`), and what it accepts runs
//! through the interpreter, whose run-time rule is the same, without its
//! `NonUniformBarrier`.

use compute_ir::{IrError, Kernel, KernelBuilder, Lit, Scalar, interp};

/// Builds a kernel of workgroup `size` whose body is `body`.
fn build(size: [u32; 3], body: impl FnOnce(&KernelBuilder)) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("uniformity", size);
    body(&k);
    k.build()
}

fn refused(size: [u32; 3], why: &str, body: impl FnOnce(&KernelBuilder)) {
    let e = build(size, body).expect_err("a barrier some invocations skip");
    let text = e.to_string();
    assert!(text.contains(why), "`{why}` not in: {text}");
    assert!(text.contains("every invocation of a workgroup"), "{text}");
}

/// Accepted, and the interpreter runs it over two workgroups without a
/// non-uniform barrier (each buffer 64 zero u32s, the scalars from
/// `[4, 3]`).
fn accepted(size: [u32; 3], body: impl FnOnce(&KernelBuilder)) {
    let k = build(size, body).expect("uniform barriers");
    let mut bufs = vec![vec![0u8; 4 * 64]; k.def().buffers.len()];
    let all = [Lit::U32(4), Lit::U32(3)];
    let scalars = k
        .pack_scalars(&all[..k.def().scalars.len()])
        .expect("u32 scalars");
    interp::run(&k, [2, 1, 1], &mut bufs, &scalars).expect("runs");
}

#[test]
fn a_barrier_under_a_thread_dependent_condition_is_refused() {
    refused([4, 1, 1], "inside an `if`", |k| {
        k.if_(k.lt(k.local_index(), 2u32), |k| k.barrier());
    });
    refused([4, 1, 1], "inside an `if`", |k| {
        let sh = k.shared(Scalar::U32, 1);
        k.if_(k.eq(k.x(k.global_id()), 0u32), |k| {
            let v = k.uniform_load(sh, 0u32);
            k.store(sh, 0u32, v);
        });
    });
}

#[test]
fn a_barrier_under_a_uniform_condition_is_accepted() {
    accepted([4, 1, 1], |k| {
        let out = k.output(Scalar::U32);
        let [n, _] = [0; 2].map(|_| k.scalar_arg(Scalar::U32));
        k.if_(k.lt(k.x(k.workgroup_id()), n), |k| {
            k.barrier();
            k.store(out, k.x(k.global_id()), 1u32);
        });
    });
}

#[test]
fn loops_with_thread_dependent_bounds_or_early_exits_are_refused() {
    refused([4, 1, 1], "loop whose bounds differ", |k| {
        k.for_range(0u32, k.local_index(), |k, _| k.barrier());
    });
    refused([4, 1, 1], "leave early", |k| {
        let l = k.local_index();
        k.for_range(0u32, 8u32, |k, i| {
            k.barrier();
            k.if_(k.eq(i, l), |k| k.break_());
        });
    });
    refused([4, 1, 1], "leave early", |k| {
        k.loop_(|k| {
            k.if_(k.gt(k.local_index(), 1u32), |k| k.continue_());
            k.barrier();
            k.break_();
        });
    });
}

#[test]
fn loops_with_uniform_bounds_are_accepted() {
    accepted([4, 1, 1], |k| {
        let out = k.output(Scalar::U32);
        let [n, m] = [0; 2].map(|_| k.scalar_arg(Scalar::U32));
        let acc = k.var(0u32);
        k.for_range(0u32, k.mul(n, m), |k, i| {
            k.barrier();
            // A break every invocation takes together.
            k.if_(k.eq(i, n), |k| k.break_());
            k.set(acc, k.add(k.get(acc), i));
        });
        k.store(out, k.x(k.global_id()), k.get(acc));
    });
}

#[test]
fn a_barrier_after_a_thread_dependent_return_is_refused() {
    refused([4, 1, 1], "after a `return`", |k| {
        k.if_(k.eq(k.local_index(), 3u32), |k| k.ret());
        k.barrier();
    });
}

#[test]
fn variables_carry_uniformity_to_the_fixed_point() {
    // Set under a thread-dependent condition: varying.
    refused([4, 1, 1], "inside an `if`", |k| {
        let v = k.var(0u32);
        k.if_(k.eq(k.local_index(), 0u32), |k| k.set(v, 1u32));
        k.if_(k.eq(k.get(v), 1u32), |k| k.barrier());
    });
    // Read before the loop-carried assignment that makes it varying.
    refused([4, 1, 1], "inside an `if`", |k| {
        let v = k.var(0u32);
        k.for_range(0u32, 4u32, |k, _| {
            k.if_(k.eq(k.get(v), 0u32), |k| k.barrier());
            k.set(v, k.local_index());
        });
    });
    // Only uniform values, in uniform control flow: uniform.
    accepted([4, 1, 1], |k| {
        let n = k.scalar_arg(Scalar::U32);
        let v = k.var(0u32);
        k.for_range(0u32, 4u32, |k, i| {
            k.if_(k.lt(k.get(v), n), |k| k.barrier());
            k.set(v, k.add(k.get(v), i));
        });
    });
}

#[test]
fn a_dimension_of_size_one_is_uniform() {
    // One workgroup row per y: global_id.y is the workgroup's.
    accepted([4, 1, 1], |k| {
        let rows = k.scalar_arg(Scalar::U32);
        k.if_(k.lt(k.y(k.global_id()), rows), |k| k.barrier());
    });
    refused([2, 2, 1], "inside an `if`", |k| {
        let rows = k.scalar_arg(Scalar::U32);
        k.if_(k.lt(k.y(k.global_id()), rows), |k| k.barrier());
    });
}

#[test]
fn loads_are_uniform_only_from_read_only_buffers_at_uniform_indices() {
    accepted([4, 1, 1], |k| {
        let input = k.input(Scalar::U32);
        k.if_(k.eq(k.load(input, 0u32), 0u32), |k| k.barrier());
    });
    refused([4, 1, 1], "inside an `if`", |k| {
        let input = k.input(Scalar::U32);
        k.if_(k.eq(k.load(input, k.local_index()), 0u32), |k| k.barrier());
    });
    refused([4, 1, 1], "inside an `if`", |k| {
        let out = k.output(Scalar::U32);
        k.if_(k.eq(k.load(out, 0u32), 0u32), |k| k.barrier());
    });
}
