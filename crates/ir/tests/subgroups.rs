//! Subgroup builtins and collectives in the interpreter: evaluated in
//! lockstep over the live invocations of each subgroup.

use compute_ir::interp;
use compute_ir::{KernelBuilder, RunError, Scalar};
use compute_testkit::bytes;

/// out[lidx * 8 + k]: sgid, sgsize, add, min, max, broadcast_first, ballot.x, ballot.y
fn collectives(workgroup: u32) -> compute_ir::Kernel {
    let b = KernelBuilder::new("collectives", [workgroup, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.local_index();
    let sgid = b.subgroup_invocation_id();
    let size = b.subgroup_size();
    let hundred = b.u32(100);
    let x = b.add(i, hundred); // distinct per invocation
    let sum = b.subgroup_add(x);
    let lo = b.subgroup_min(x);
    let hi = b.subgroup_max(x);
    let first = b.subgroup_broadcast_first(x);
    let three = b.u32(3);
    let zero = b.u32(0);
    let m = b.rem(i, three);
    let pred = b.eq(m, zero);
    let ballot = b.subgroup_ballot(pred);
    let bx = b.x(ballot);
    let by = b.y(ballot);
    let eight = b.u32(8);
    let base = b.mul(i, eight);
    for (k, v) in [sgid, size, sum, lo, hi, first, bx, by]
        .into_iter()
        .enumerate()
    {
        let off = b.u32(k as u32);
        let idx = b.add(base, off);
        b.store(out, idx, v);
    }
    b.build().expect("builds")
}

fn run(k: &compute_ir::Kernel, n: u32, size: u32) -> Vec<u32> {
    let mut bufs = vec![vec![0; 4 * 8 * n as usize]];
    interp::run_with_subgroup(k, [1, 1, 1], &mut bufs, &[], size).expect("runs");
    bytes::bytes_u32(&bufs[0])
}

fn expected(n: u32, size: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for i in 0..n {
        let g = i / size;
        let members: Vec<u32> = (g * size..((g + 1) * size).min(n)).collect();
        let xs: Vec<u32> = members.iter().map(|j| j + 100).collect();
        let mut ballot = [0u32; 4];
        for (lane, j) in members.iter().enumerate() {
            if j % 3 == 0 {
                ballot[lane / 32] |= 1 << (lane % 32);
            }
        }
        out.extend([
            i % size,
            size,
            xs.iter().sum(),
            xs[0],
            *xs.last().expect("non-empty"),
            xs[0],
            ballot[0],
            ballot[1],
        ]);
    }
    out
}

#[test]
fn collectives_cover_each_subgroup() {
    let k = collectives(64);
    for size in [4, 8, 16, 32, 64] {
        assert_eq!(run(&k, 64, size), expected(64, size), "size {size}");
    }
    // A partial last subgroup: 48 invocations in subgroups of 32.
    let k = collectives(48);
    assert_eq!(run(&k, 48, 32), expected(48, 32));
    // `run` uses DEFAULT_SUBGROUP_SIZE.
    let mut bufs = vec![vec![0; 4 * 8 * 48]];
    interp::run(&k, [1, 1, 1], &mut bufs, &[]).expect("runs");
    assert_eq!(
        bytes::bytes_u32(&bufs[0]),
        expected(48, interp::DEFAULT_SUBGROUP_SIZE)
    );
}

#[test]
fn ballot_uses_the_high_words_for_large_subgroups() {
    let k = collectives(128);
    assert_eq!(run(&k, 128, 64), expected(128, 64));
    assert_eq!(run(&k, 128, 128), expected(128, 128));
}

#[test]
fn float_and_signed_collectives() {
    let b = KernelBuilder::new("fsum", [8, 1, 1]);
    let out = b.output(Scalar::F32);
    let outi = b.output(Scalar::I32);
    let i = b.local_index();
    let f = b.cast(i, Scalar::F32);
    let half = b.f32(0.5);
    let f = b.mul(f, half);
    let s = b.subgroup_add(f);
    b.store(out, i, s);
    let si = b.cast(i, Scalar::I32);
    let four = b.i32(4);
    let d = b.sub(si, four);
    let v = b.vec(&[d, si]);
    let m = b.subgroup_min(v);
    let m = b.x(m);
    b.store(outi, i, m);
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 32], vec![0; 32]];
    interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], 4).expect("runs");
    assert_eq!(
        bytes::bytes_f32(&bufs[0]),
        vec![3.0, 3.0, 3.0, 3.0, 11.0, 11.0, 11.0, 11.0]
    );
    assert_eq!(bytes::bytes_i32(&bufs[1]), vec![-4, -4, -4, -4, 0, 0, 0, 0]);
}

#[test]
fn ended_invocations_do_not_take_part() {
    // Invocations 0..3 return early; the rest of subgroup 0 still adds.
    let b = KernelBuilder::new("partial", [8, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.local_index();
    let three = b.u32(3);
    let early = b.lt(i, three);
    b.if_(early, |b| b.ret());
    let one = b.u32(1);
    let n = b.subgroup_add(one);
    let first = b.subgroup_broadcast_first(i);
    let ten = b.u32(10);
    let t = b.mul(first, ten);
    let r = b.add(n, t);
    b.store(out, i, r);
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 32]];
    interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], 4).expect("runs");
    assert_eq!(
        bytes::bytes_u32(&bufs[0]),
        vec![0, 0, 0, 31, 44, 44, 44, 44]
    );
}

#[test]
fn non_uniform_subgroup_operations_are_errors() {
    // Half of each subgroup takes the branch with the collective.
    let b = KernelBuilder::new("divergent", [8, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.local_index();
    let two = b.u32(2);
    let zero = b.u32(0);
    let m = b.rem(i, two);
    let even = b.eq(m, zero);
    b.if_else(
        even,
        |b| {
            let s = b.subgroup_add(i);
            b.store(out, i, s);
        },
        |b| {
            let s = b.subgroup_max(i);
            b.store(out, i, s);
        },
    );
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 32]];
    let err = interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], 4).expect_err("diverges");
    assert!(
        matches!(err, RunError::NonUniformSubgroup { subgroup: 0, .. }),
        "{err}"
    );
    // Uniform within each subgroup (the branch depends on the subgroup only):
    // fine, although subgroups take different branches.
    let b = KernelBuilder::new("per_subgroup", [8, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.local_index();
    let four = b.u32(4);
    let low = b.lt(i, four);
    b.if_else(
        low,
        |b| {
            let s = b.subgroup_add(i);
            b.store(out, i, s);
        },
        |b| {
            let s = b.subgroup_max(i);
            b.store(out, i, s);
        },
    );
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 32]];
    interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], 4).expect("uniform per subgroup");
    assert_eq!(bytes::bytes_u32(&bufs[0]), vec![6, 6, 6, 6, 7, 7, 7, 7]);
}

#[test]
fn subgroups_and_barriers_interleave() {
    // A collective, a workgroup barrier, a collective over shared memory.
    let b = KernelBuilder::new("mixed", [16, 1, 1]);
    let out = b.output(Scalar::U32);
    let sh = b.shared(Scalar::U32, 16);
    let i = b.local_index();
    let s = b.subgroup_add(i);
    b.store(sh, i, s);
    b.barrier();
    let fifteen = b.u32(15);
    let j = b.sub(fifteen, i);
    let y = b.load(sh, j);
    let m = b.subgroup_max(y);
    b.store(out, i, m);
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 64]];
    interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], 8).expect("runs");
    // Subgroup sums: 0..8 -> 28, 8..16 -> 92; after the reversal each
    // subgroup reads the other's sum.
    let got = bytes::bytes_u32(&bufs[0]);
    assert_eq!(got, [vec![92; 8], vec![28; 8]].concat());
}

#[test]
fn subgroup_size_must_be_a_power_of_two() {
    let k = collectives(8);
    let mut bufs = vec![vec![0; 4 * 64]];
    for bad in [0, 3, 256] {
        assert!(matches!(
            interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], bad),
            Err(RunError::Interface(_))
        ));
    }
}

#[test]
fn subgroup_operand_types_are_checked() {
    let b = KernelBuilder::new("bad", [1, 1, 1]);
    let x = b.bool(true);
    let _ = b.subgroup_add(x);
    assert_eq!(b.build().expect_err("bool sum").op(), "subgroupAdd");
    let b = KernelBuilder::new("bad", [1, 1, 1]);
    let x = b.u32(1);
    let _ = b.subgroup_ballot(x);
    assert_eq!(b.build().expect_err("u32 ballot").op(), "subgroupBallot");
}

/// The rest of the collectives, `PER` results per invocation: scans,
/// `Mul`/`And`/`Or`/`Xor`, `All`/`Any`, a broadcast of lane 3, shuffles
/// reversed by id and by xor 5; with `up_down`, shuffles down and up by one
/// too (whose edge lanes read past the subgroup's end).
fn more(wg: u32, size: u32, up_down: bool) -> compute_ir::Kernel {
    use compute_ir::{ShuffleOp, SubgroupOp};
    let b = KernelBuilder::new("more", [wg, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.local_index();
    let sgid = b.subgroup_invocation_id();
    let x = b.add(b.mul(i, b.u32(3)), b.u32(1)); // 1, 4, 7, ...
    let small = b.add(b.rem(i, b.u32(3)), b.u32(1)); // 1, 2, 3, 1, ...
    let odd = b.eq(b.and(x, b.u32(1)), b.u32(1));
    let mut results = vec![
        b.subgroup_inclusive_add(x),
        b.subgroup_exclusive_add(x),
        b.subgroup(SubgroupOp::InclusiveMul, small),
        b.subgroup(SubgroupOp::ExclusiveMul, small),
        b.subgroup(SubgroupOp::Mul, small),
        b.subgroup(SubgroupOp::And, x),
        b.subgroup(SubgroupOp::Or, x),
        b.subgroup(SubgroupOp::Xor, x),
        b.select(b.subgroup_all(odd), b.u32(1), b.u32(0)),
        b.select(b.subgroup_any(odd), b.u32(1), b.u32(0)),
        b.subgroup_broadcast(x, 3),
        b.subgroup_shuffle(x, b.sub(b.u32(size - 1), sgid)),
        b.subgroup_shuffle_xor(x, b.u32(5)),
    ];
    if up_down {
        results.push(b.subgroup_shuffle_op(ShuffleOp::Down, x, b.u32(1)));
        results.push(b.subgroup_shuffle_op(ShuffleOp::Up, x, b.u32(1)));
    }
    let per = b.u32(results.len() as u32);
    for (k, v) in results.into_iter().enumerate() {
        b.store(out, b.add(b.mul(i, per), b.u32(k as u32)), v);
    }
    b.build().expect("builds")
}

/// Results per invocation of [`more`] without the up and down shuffles.
const PER: u32 = 13;

/// [`more`] against the host's own reading of each operation.
#[test]
fn scans_reductions_votes_and_shuffles_match_the_host() {
    let (wg, size) = (16u32, 8u32);
    let per = PER as usize + 2;
    let mut bufs = vec![vec![0; 4 * per * wg as usize]];
    interp::run_with_subgroup(&more(wg, size, true), [1, 1, 1], &mut bufs, &[], size)
        .expect("runs");
    let got = bytes::bytes_u32(&bufs[0]);
    let size = size as usize;
    let xs: Vec<u32> = (0..wg).map(|i| i * 3 + 1).collect();
    let smalls: Vec<u32> = (0..wg).map(|i| i % 3 + 1).collect();
    for inv in 0..wg as usize {
        let (g, lane) = (inv / size, inv % size);
        let sg = &xs[g * size..(g + 1) * size];
        let sm = &smalls[g * size..(g + 1) * size];
        let want = [
            sg[..=lane].iter().sum::<u32>(),
            sg[..lane].iter().sum(),
            sm[..=lane].iter().product(),
            sm[..lane].iter().product(),
            sm.iter().product(),
            sg.iter().fold(u32::MAX, |a, b| a & b),
            sg.iter().fold(0, |a, b| a | b),
            sg.iter().fold(0, |a, b| a ^ b),
            u32::from(sg.iter().all(|v| v % 2 == 1)),
            u32::from(sg.iter().any(|v| v % 2 == 1)),
            sg[3],
            sg[size - 1 - lane],
            sg[lane ^ 5],
            // Past the ends, the interpreter reads the invocation's own.
            sg[if lane + 1 < size { lane + 1 } else { lane }],
            sg[lane.saturating_sub(1)],
        ];
        assert_eq!(&got[inv * per..(inv + 1) * per], &want, "invocation {inv}");
    }
}

/// A shuffle's xor mask must be the same on every invocation.
#[test]
fn a_shuffle_mask_that_differs_between_invocations_is_refused() {
    let b = KernelBuilder::new("mask", [8, 1, 1]);
    let out = b.output(Scalar::U32);
    let i = b.local_index();
    let mask = b.and(i, b.u32(1));
    let y = b.subgroup_shuffle_xor(i, mask);
    b.store(out, i, y);
    let k = b.build().expect("builds");
    let mut bufs = vec![vec![0; 32]];
    let e = interp::run_with_subgroup(&k, [1, 1, 1], &mut bufs, &[], 8).expect_err("refused");
    assert!(matches!(e, RunError::SubgroupLane { .. }), "{e}");
}
