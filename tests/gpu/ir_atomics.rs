//! IR atomics on the real adapter: workgroup atomic arrays (a per-workgroup
//! histogram folded into a global one) and compare-exchange on storage and
//! workgroup memory (on an invocation's own element, where the old values
//! are the schedule's to decide nothing about, and under contention, a
//! float sum by retrying exchange), each against the interpreter and the
//! host.

use compute_ir::{AtomicLike, KernelBuilder, Scalar};
use compute_testkit::bytes::{bytes_f32, bytes_u32, f32_bytes, u32_bytes};

use crate::ir::{both, read, run, server, upload};

/// Bins of the histograms.
const BINS: u32 = 16;

/// Each workgroup counts its values into a workgroup histogram (an atomic
/// array, zero at its start), then folds it into the global one: one
/// global atomic per bin and workgroup instead of one per value.
#[test]
fn a_workgroup_histogram_folds_into_the_global_one() {
    let wg = 64u32;
    let k = KernelBuilder::new("wg_hist", [wg, 1, 1]);
    let values = k.input(Scalar::U32);
    let hist = k.atomic_buffer(Scalar::U32);
    let local = k.atomic_shared(Scalar::U32, BINS);
    let gid = k.global_id();
    let v = k.load(values, k.x(gid));
    let bin = k.rem(v, k.u32(BINS));
    k.atomic_add(local, bin, k.u32(1));
    k.barrier();
    let lidx = k.local_index();
    let owns = k.lt(lidx, k.u32(BINS));
    k.if_(owns, |k| {
        let c = k.atomic_load(local, lidx);
        k.atomic_add(hist, lidx, c);
    });
    let kernel = k.build().expect("kernel");

    let groups = 5u32;
    let values: Vec<u32> = (0..wg * groups)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let buffers = vec![u32_bytes(&values), vec![0; BINS as usize * 4]];
    let mut s = server();
    let (got, expected) = both(&mut s, &kernel, [groups, 1, 1], buffers, 32);
    let mut host = vec![0u32; BINS as usize];
    for v in &values {
        host[(v % BINS) as usize] += 1;
    }
    assert_eq!(bytes_u32(&expected[1]), host, "the interpreter");
    assert_eq!(bytes_u32(&got[1]), host, "the device");
}

/// Compare-exchange on an invocation's own element, of a storage buffer
/// (`u32`) and of a workgroup array (`i32`): every old value and whether
/// each exchange happened are the same on the device as in the interpreter.
/// Even invocations compare against the value there (the exchange happens),
/// odd ones against something else (it does not); then a second exchange
/// on the same element sees the first's outcome.
#[test]
fn compare_exchange_on_own_elements_matches_the_interpreter() {
    let wg = 32u32;
    let k = KernelBuilder::new("cas_own", [wg, 1, 1]);
    let cells = k.atomic_buffer(Scalar::U32);
    let out = k.output(Scalar::U32);
    let shared = k.atomic_shared(Scalar::I32, wg);
    let gid = k.global_id();
    let i = k.x(gid);
    let lidx = k.local_index();
    let even = k.eq(k.and(i, k.u32(1)), k.u32(0));
    // Storage: compare with the current value (even) or its complement.
    let cur = k.atomic_load(cells, i);
    let cmp = k.select(even, cur, k.xor(cur, k.u32(u32::MAX)));
    let r1 = k.compare_exchange(cells, i, cmp, k.add(i, k.u32(1000)));
    let r2 = k.compare_exchange(cells, i, k.add(i, k.u32(1000)), k.u32(7));
    // Workgroup memory starts at 0: even lanes compare with 0.
    let zero = k.i32(0);
    let scmp = k.select(even, zero, k.i32(-5));
    let sval = k.sub(zero, k.bitcast(i, Scalar::I32));
    let r3 = k.compare_exchange(shared, lidx, scmp, sval);
    let r4 = k.compare_exchange(shared, lidx, sval, k.i32(-1));
    let base = k.mul(i, k.u32(8));
    let results = [
        r1,
        r2,
        k.bitcast(r3, Scalar::U32),
        k.bitcast(r4, Scalar::U32),
    ];
    for (n, r) in results.into_iter().enumerate() {
        k.store(out, k.add(base, k.u32(2 * n as u32)), k.x(r));
        k.store(out, k.add(base, k.u32(2 * n as u32 + 1)), k.y(r));
    }
    let kernel = k.build().expect("kernel");

    let groups = 3u32;
    let n = (wg * groups) as usize;
    let start: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
    let buffers = vec![u32_bytes(&start), vec![0; n * 8 * 4]];
    let mut s = server();
    let (got, expected) = both(&mut s, &kernel, [groups, 1, 1], buffers, 32);
    assert_eq!(bytes_u32(&got[0]), bytes_u32(&expected[0]), "the cells");
    let (got, expected) = (bytes_u32(&got[1]), bytes_u32(&expected[1]));
    for inv in 0..n {
        let (g, e) = (&got[inv * 8..inv * 8 + 8], &expected[inv * 8..inv * 8 + 8]);
        assert_eq!(g, e, "invocation {inv}: (old, exchanged) x 4");
        // The host's reading of the storage half.
        let (even, mine) = (inv % 2 == 0, inv as u32 + 1000);
        let after_first = if even { mine } else { start[inv] };
        let host = [
            start[inv],
            u32::from(even),
            after_first,
            u32::from(after_first == mine),
        ];
        assert_eq!(e[..4], host, "invocation {inv}: the interpreter");
    }
}

/// A float sum by retrying compare-exchange on the bits of one storage word
/// and of one workgroup word: every invocation adds its value, in whatever
/// order the device grants them (the values are exact in any order).
#[test]
fn a_float_sum_by_compare_exchange_is_exact_on_the_device() {
    let wg = 64u32;
    let k = KernelBuilder::new("cas_fsum", [wg, 1, 1]);
    let xs = k.input(Scalar::F32);
    let total = k.atomic_buffer(Scalar::U32);
    let partial = k.atomic_shared(Scalar::U32, 1);
    let gid = k.global_id();
    let x = k.load(xs, k.x(gid));
    fn add_f32(k: &KernelBuilder, array: impl AtomicLike, x: compute_ir::Val) {
        k.loop_(|k| {
            let old = k.atomic_load(array, k.u32(0));
            let new = k.add(k.bitcast(old, Scalar::F32), x);
            let r = k.compare_exchange(array, k.u32(0), old, k.bitcast(new, Scalar::U32));
            k.if_(k.eq(k.y(r), k.u32(1)), |k| k.break_());
        });
    }
    add_f32(&k, partial, x);
    k.barrier();
    let first = k.eq(k.local_index(), k.u32(0));
    k.if_(first, |k| {
        let sum = k.bitcast(k.atomic_load(partial, k.u32(0)), Scalar::F32);
        add_f32(k, total, sum);
    });
    let kernel = k.build().expect("kernel");

    let groups = 4u32;
    // Multiples of 1/8 below 64: every partial sum is exact in f32.
    let xs: Vec<f32> = (0..wg * groups).map(|i| (i % 512) as f32 / 8.0).collect();
    let want: f32 = xs.iter().sum();
    let mut s = server();
    let hx = upload(&mut s, f32_bytes(&xs));
    let ht = upload(&mut s, vec![0; 4]);
    run(
        &mut s,
        &kernel,
        [groups, 1, 1],
        &[hx, ht.clone()],
        Vec::new(),
    );
    assert_eq!(bytes_f32(&read(&mut s, &ht)), [want]);
}
