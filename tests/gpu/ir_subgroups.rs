//! The subgroup operations past add, min, max, broadcast-first and ballot,
//! on the device against the interpreter at the device's own subgroup
//! size: scans, `mul`/`and`/`or`/`xor`, `all`/`any`, a broadcast from a
//! lane, and every shuffle (the up and down ones with their edge lanes
//! discarded, as a kernel must: WGSL leaves them indeterminate).

use compute_ir::{KernelBuilder, Scalar, ShuffleOp, SubgroupOp};
use compute_testkit::bytes::{bytes_u32, u32_bytes};

use crate::ir::{both, read, run, server, upload};

/// The kernel for subgroups of `size`: `PER` results per invocation.
fn kernel(size: u32) -> compute_ir::Kernel {
    let k = KernelBuilder::new("subgroups_more", [64, 1, 1]);
    let xs = k.input(Scalar::U32);
    let out = k.output(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let lane = k.subgroup_invocation_id();
    let x = k.load(xs, i);
    let small = k.add(k.rem(x, k.u32(3)), k.u32(1));
    let odd = k.eq(k.and(x, k.u32(1)), k.u32(1));
    let f = k.cast(k.rem(x, k.u32(100)), Scalar::F32);
    let flag = |b| k.select(b, k.u32(1), k.u32(0));
    let down = k.subgroup_shuffle_op(ShuffleOp::Down, x, k.u32(1));
    let up = k.subgroup_shuffle_op(ShuffleOp::Up, x, k.u32(1));
    let results = [
        k.subgroup_inclusive_add(x),
        k.subgroup_exclusive_add(x),
        k.subgroup(SubgroupOp::InclusiveMul, small),
        k.subgroup(SubgroupOp::ExclusiveMul, small),
        k.subgroup(SubgroupOp::Mul, small),
        k.subgroup(SubgroupOp::And, x),
        k.subgroup(SubgroupOp::Or, x),
        k.subgroup(SubgroupOp::Xor, x),
        flag(k.subgroup_all(odd)),
        flag(k.subgroup_any(odd)),
        k.subgroup_broadcast(x, size - 1),
        k.subgroup_shuffle(x, k.sub(k.u32(size - 1), lane)),
        k.subgroup_shuffle_xor(x, k.u32((size / 2).max(1))),
        k.select(k.lt(k.add(lane, k.u32(1)), k.u32(size)), down, x),
        k.select(k.ge(lane, k.u32(1)), up, x),
        // Sums of small whole numbers: exact in f32 in any order.
        k.bitcast(k.subgroup_add(f), Scalar::U32),
        k.bitcast(k.subgroup_inclusive_add(f), Scalar::U32),
    ];
    let per = k.u32(results.len() as u32);
    for (n, v) in results.into_iter().enumerate() {
        k.store(out, k.add(k.mul(i, per), k.u32(n as u32)), v);
    }
    k.build().expect("kernel")
}

/// Results per invocation of [`kernel`].
const PER: usize = 17;

/// The device's subgroup size, as a kernel reports it; `None` (with a
/// message) without `SUBGROUP`.
fn device_subgroup_size(s: &mut crate::ir::IrServer) -> Option<u32> {
    if !crate::common::has_feature(s.device(), wgpu::Features::SUBGROUP, "subgroup operations") {
        return None;
    }
    let probe = KernelBuilder::new("size", [64, 1, 1]);
    let sizes = probe.output(Scalar::U32);
    probe.store(sizes, probe.x(probe.global_id()), probe.subgroup_size());
    let probe = probe.build().expect("probe");
    let h = upload(s, vec![0; 64 * 4]);
    run(s, &probe, [1, 1, 1], std::slice::from_ref(&h), Vec::new());
    let size = bytes_u32(&read(s, &h))[0];
    assert!(
        size.is_power_of_two() && size <= 128,
        "subgroup size {size}"
    );
    Some(size)
}

#[test]
fn scans_votes_broadcasts_and_shuffles_match_the_interpreter() {
    let mut s = server();
    let Some(size) = device_subgroup_size(&mut s) else {
        return;
    };
    let groups = 4u32;
    let n = 64 * groups as usize;
    let xs: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_246_822_519) >> 9)
        .collect();
    let buffers = vec![u32_bytes(&xs), vec![0; n * PER * 4]];
    let (got, expected) = both(&mut s, &kernel(size), [groups, 1, 1], buffers, size);
    let (got, expected) = (bytes_u32(&got[1]), bytes_u32(&expected[1]));
    for inv in 0..n {
        let r = inv * PER..(inv + 1) * PER;
        assert_eq!(
            got[r.clone()],
            expected[r],
            "invocation {inv} at subgroup size {size}"
        );
    }
}

/// `subgroup_id` and `num_subgroups`: which invocations share a subgroup is
/// the device's choice, so the check is of what holds on any layout: every
/// lane of a subgroup sees the same id, ids are below the count, and each
/// id has `size` lanes.
#[test]
fn subgroup_ids_partition_the_workgroup() {
    let mut s = server();
    let Some(size) = device_subgroup_size(&mut s) else {
        return;
    };
    let k = KernelBuilder::new("subgroup_ids", [64, 1, 1]);
    let out = k.output(Scalar::U32);
    let i = k.x(k.global_id());
    let id = k.subgroup_id();
    let same = k.eq(k.subgroup_broadcast_first(id), id);
    let agreed = k.subgroup_all(same);
    let at = k.mul(i, k.u32(3));
    k.store(out, at, id);
    k.store(out, k.add(at, k.u32(1)), k.num_subgroups());
    k.store(
        out,
        k.add(at, k.u32(2)),
        k.select(agreed, k.u32(1), k.u32(0)),
    );
    let k = k.build().expect("kernel");
    let groups = 2usize;
    let h = upload(&mut s, vec![0; 64 * groups * 3 * 4]);
    run(
        &mut s,
        &k,
        [groups as u32, 1, 1],
        std::slice::from_ref(&h),
        Vec::new(),
    );
    let got = bytes_u32(&read(&mut s, &h));
    let count = 64 / size;
    for g in 0..groups {
        let mut lanes = vec![0u32; count as usize];
        for l in 0..64 {
            let r = &got[(g * 64 + l) * 3..][..3];
            assert_eq!(r[1], count, "num_subgroups, invocation {l}");
            assert_eq!(r[2], 1, "lanes of subgroup {} disagree", r[0]);
            assert!(r[0] < count, "subgroup_id {} of {count}", r[0]);
            lanes[r[0] as usize] += 1;
        }
        assert!(lanes.iter().all(|&n| n == size), "{lanes:?} at size {size}");
    }
    // And the interpreter's layout: consecutive local indices.
    let mut expected = vec![vec![0; 64 * 3 * 4]];
    compute_ir::interp::run_with_subgroup(&k, [1, 1, 1], &mut expected, &[], size)
        .expect("interpreter");
    let e = bytes_u32(&expected[0]);
    for l in 0..64 {
        assert_eq!(&e[l * 3..][..3], &[l as u32 / size, count, 1]);
    }
}
