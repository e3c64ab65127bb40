//! The reference kernels in the interpreter against plain host Rust, on
//! random non-zero data.

use compute_ir::interp;
use compute_ir::{Lit, Scalar};
use compute_testkit::bytes;
use compute_testkit::{Rng, kernels};

#[test]
fn elementwise_add_matches_host() {
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let k = kernels::elementwise_add(Scalar::F32, 64).expect("builds");
    for n in [1usize, 63, 64, 65, 1000] {
        let a: Vec<f32> = (0..n).map(|_| rng.f32_signed()).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.f32_signed()).collect();
        let mut bufs = vec![bytes::f32_bytes(&a), bytes::f32_bytes(&b), vec![0; 4 * n]];
        let scalars = k.pack_scalars(&[Lit::U32(n as u32)]).expect("types");
        interp::run(&k, [n.div_ceil(64) as u32, 1, 1], &mut bufs, &scalars).expect("runs");
        let c = bytes::bytes_f32(&bufs[2]);
        for i in 0..n {
            assert_eq!(c[i].to_bits(), (a[i] + b[i]).to_bits(), "n={n} i={i}");
        }
    }
}

/// Vector buffers: one element is `lanes` consecutive scalars, checked
/// against plain host Rust lane by lane.
#[test]
fn vector_buffers_add_lane_by_lane() {
    let mut rng = Rng::new(0x5eed_0004);
    for lanes in [2u8, 4] {
        let k = kernels::elementwise_add_vec(Scalar::F32, lanes, 64).expect("builds");
        for vectors in [1usize, 63, 65, 300] {
            let n = vectors * usize::from(lanes);
            let a: Vec<f32> = (0..n).map(|_| rng.f32_signed()).collect();
            let b: Vec<f32> = (0..n).map(|_| rng.f32_signed()).collect();
            let mut bufs = vec![bytes::f32_bytes(&a), bytes::f32_bytes(&b), vec![0; 4 * n]];
            let scalars = k.pack_scalars(&[Lit::U32(vectors as u32)]).expect("types");
            let groups = vectors.div_ceil(64) as u32;
            interp::run(&k, [groups, 1, 1], &mut bufs, &scalars).expect("runs");
            let c = bytes::bytes_f32(&bufs[2]);
            for i in 0..n {
                assert_eq!(
                    c[i].to_bits(),
                    (a[i] + b[i]).to_bits(),
                    "lanes={lanes} i={i}"
                );
            }
        }
    }
    // u32 lanes wrap like scalars.
    let k = kernels::elementwise_add_vec(Scalar::U32, 2, 4).expect("builds");
    let mut bufs = vec![
        bytes::u32_bytes(&[u32::MAX, 1, 2, 3]),
        bytes::u32_bytes(&[1, 1, 1, 1]),
        vec![0; 16],
    ];
    let scalars = k.pack_scalars(&[Lit::U32(2)]).expect("types");
    interp::run(&k, [1, 1, 1], &mut bufs, &scalars).expect("runs");
    assert_eq!(bytes::bytes_u32(&bufs[2]), [0, 2, 3, 4]);
}

#[test]
fn elementwise_add_wraps_integers() {
    let k = kernels::elementwise_add(Scalar::I32, 4).expect("builds");
    let a = [i32::MAX, -1, 5, i32::MIN];
    let b = [1, -1, -7, -1];
    let mut bufs = vec![bytes::i32_bytes(&a), bytes::i32_bytes(&b), vec![0; 16]];
    interp::run(
        &k,
        [1, 1, 1],
        &mut bufs,
        &k.pack_scalars(&[Lit::U32(4)]).expect("types"),
    )
    .expect("runs");
    let want: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
    assert_eq!(bytes::bytes_i32(&bufs[2]), want);
}

#[test]
fn workgroup_sum_matches_host() {
    let mut rng = Rng::new(7);
    let size = 256u32;
    // u32: exact.
    let k = kernels::workgroup_sum(Scalar::U32, size).expect("builds");
    let n = 1000usize;
    let a: Vec<u32> = (0..n).map(|_| rng.u32() % 1000 + 1).collect();
    let groups = n.div_ceil(size as usize);
    let mut bufs = vec![bytes::u32_bytes(&a), vec![0; 4 * groups]];
    interp::run(
        &k,
        [groups as u32, 1, 1],
        &mut bufs,
        &k.pack_scalars(&[Lit::U32(n as u32)]).expect("types"),
    )
    .expect("runs");
    let got = bytes::bytes_u32(&bufs[1]);
    for (g, chunk) in a.chunks(size as usize).enumerate() {
        assert_eq!(got[g], chunk.iter().sum::<u32>(), "group {g}");
    }
    // f32: a tree sums in another order than the host loop; bound the error.
    let k = kernels::workgroup_sum(Scalar::F32, size).expect("builds");
    let a: Vec<f32> = (0..n).map(|_| rng.f32_signed()).collect();
    let mut bufs = vec![bytes::f32_bytes(&a), vec![0; 4 * groups]];
    interp::run(
        &k,
        [groups as u32, 1, 1],
        &mut bufs,
        &k.pack_scalars(&[Lit::U32(n as u32)]).expect("types"),
    )
    .expect("runs");
    let got = bytes::bytes_f32(&bufs[1]);
    for (g, chunk) in a.chunks(size as usize).enumerate() {
        let want: f64 = chunk.iter().map(|x| f64::from(*x)).sum();
        let scale: f64 = chunk.iter().map(|x| f64::from(x.abs())).sum();
        let err = (f64::from(got[g]) - want).abs();
        assert!(
            err <= scale * 8.0 * f64::from(f32::EPSILON),
            "group {g}: {} vs {want}",
            got[g]
        );
    }
}

#[test]
fn atomic_histogram_matches_host() {
    let mut rng = Rng::new(42);
    let k = kernels::histogram(64).expect("builds");
    let (n, bins) = (5000usize, 37u32);
    let values: Vec<u32> = (0..n).map(|_| rng.u32() | 1).collect();
    let mut bufs = vec![bytes::u32_bytes(&values), vec![0; 4 * bins as usize]];
    let scalars = k
        .pack_scalars(&[Lit::U32(n as u32), Lit::U32(bins)])
        .expect("types");
    interp::run(&k, [n.div_ceil(64) as u32, 1, 1], &mut bufs, &scalars).expect("runs");
    let mut want = vec![0u32; bins as usize];
    for v in &values {
        want[(v % bins) as usize] += 1;
    }
    assert_eq!(bytes::bytes_u32(&bufs[1]), want);
}

/// A loop with a barrier inside, ended by a uniform load of what one
/// invocation wrote: every invocation counts every round, none leaves
/// early (the interpreter would report a barrier not all of them met).
#[test]
fn uniform_loads_end_a_loop_with_a_barrier_together() {
    let k = kernels::uniform_rounds().expect("builds");
    for rounds in [0u32, 1, 5] {
        let wg = kernels::UNIFORM_ROUNDS_WORKGROUP as usize;
        let mut bufs = vec![vec![0; 4 * 2 * wg]];
        let scalars = k.pack_scalars(&[Lit::U32(rounds)]).expect("types");
        interp::run(&k, [2, 1, 1], &mut bufs, &scalars).expect("runs");
        assert_eq!(
            bytes::bytes_u32(&bufs[0]),
            vec![rounds; 2 * wg],
            "{rounds} rounds"
        );
    }
}

/// A uniform load is a barrier: one that only some invocations reach is
/// refused when the kernel is built, as a barrier is.
#[test]
fn a_uniform_load_out_of_uniform_control_flow_is_an_error() {
    use compute_ir::KernelBuilder;
    let k = KernelBuilder::new("half_uniform", [4, 1, 1]);
    let out = k.output(Scalar::U32);
    let sh = k.shared(Scalar::U32, 1);
    k.if_(k.eq(k.local_index(), 0u32), |k| {
        let v = k.uniform_load(sh, 0u32);
        k.store(out, 0u32, v);
    });
    let err = k.build().expect_err("a lone invocation's load");
    assert_eq!(err.op(), "uniform_load", "{err}");
}

#[test]
fn tiled_matmul_matches_host() {
    let mut rng = Rng::new(1234);
    let k = kernels::tiled_matmul().expect("builds");
    for (m, n, kk) in [(16usize, 16usize, 16usize), (33, 17, 40), (5, 40, 3)] {
        let a: Vec<f32> = (0..m * kk).map(|_| rng.f32_signed()).collect();
        let b: Vec<f32> = (0..kk * n).map(|_| rng.f32_signed()).collect();
        let mut bufs = vec![
            bytes::f32_bytes(&a),
            bytes::f32_bytes(&b),
            vec![0; 4 * m * n],
        ];
        let scalars = k
            .pack_scalars(&[Lit::U32(m as u32), Lit::U32(n as u32), Lit::U32(kk as u32)])
            .expect("types");
        interp::run(
            &k,
            [n.div_ceil(16) as u32, m.div_ceil(16) as u32, 1],
            &mut bufs,
            &scalars,
        )
        .expect("runs");
        let c = bytes::bytes_f32(&bufs[2]);
        for i in 0..m {
            for j in 0..n {
                // Same order and the same fused multiply-add: bit-exact.
                let mut acc = 0.0f32;
                for p in 0..kk {
                    acc = a[i * kk + p].mul_add(b[p * n + j], acc);
                }
                assert_eq!(
                    c[i * n + j].to_bits(),
                    acc.to_bits(),
                    "{m}x{n}x{kk} at ({i},{j})"
                );
            }
        }
    }
}

#[test]
fn kernel_ids_hash_the_ir_and_workgroup_size() {
    use compute_runtime::CubeKernel;
    let a = kernels::elementwise_add(Scalar::F32, 64).expect("builds");
    let b = kernels::elementwise_add(Scalar::F32, 64).expect("builds");
    let c = kernels::elementwise_add(Scalar::F32, 128).expect("builds");
    let d = kernels::elementwise_add(Scalar::U32, 64).expect("builds");
    assert_eq!(a.id(), b.id());
    assert_ne!(a.id(), c.id());
    assert_ne!(a.id(), d.id());
    assert_eq!(a.name(), "add_f32");
    let info = kernels::histogram(64).expect("builds").info();
    assert_eq!(
        info.buffers,
        vec![compute_ir::Access::Read, compute_ir::Access::ReadWrite]
    );
    assert!(info.scalars);
    assert_eq!(info.workgroup_size, [64, 1, 1]);
}

/// f16 bits of values an f16 holds exactly (multiples of 1/8 in [-4, 4)).
fn halves(rng: &mut Rng, n: usize) -> (Vec<f32>, Vec<u8>) {
    let v: Vec<f32> = (0..n)
        .map(|_| (rng.below(64) as f32 - 32.0) / 8.0)
        .collect();
    let b = v
        .iter()
        .flat_map(|&x| interp::f16::from_f32(x).to_le_bytes())
        .collect();
    (v, b)
}

/// The cooperative-matrix matmul in the interpreter, at the subgroup size
/// it was built for and at another (every element NaN: never a wrong
/// product passing for a right one).
#[test]
fn coop_matmul_matches_host_and_poisons_a_foreign_subgroup_size() {
    let mut rng = Rng::new(0x5eed_c00b);
    let (m, n, kk) = (128usize, 256usize, 64usize);
    let (a, ab) = halves(&mut rng, m * kk);
    let (b, bb) = halves(&mut rng, kk * n);
    let scalars =
        compute_ir::pack_scalars(&[Lit::U32(m as u32), Lit::U32(n as u32), Lit::U32(kk as u32)]);
    let groups = [(n / 128) as u32, (m / 128) as u32, 1];
    for size in [32u32, 16] {
        let k = kernels::coop_matmul(size).expect("builds");
        let mut bufs = vec![ab.clone(), bb.clone(), vec![0; 4 * m * n]];
        interp::run_with_subgroup(&k, groups, &mut bufs, &scalars, size).expect("runs");
        let c = bytes::bytes_f32(&bufs[2]);
        for i in 0..m {
            for j in 0..n {
                // Sums of products of multiples of 1/8: exact in f32.
                let want: f32 = (0..kk).map(|p| a[i * kk + p] * b[p * n + j]).sum();
                assert_eq!(c[i * n + j], want, "subgroup {size}: c[{i}][{j}]");
            }
        }
        let mut bufs = vec![ab.clone(), bb.clone(), vec![0; 4 * m * n]];
        interp::run_with_subgroup(&k, groups, &mut bufs, &scalars, size * 2).expect("runs");
        assert!(
            bytes::bytes_f32(&bufs[2]).iter().all(|x| x.is_nan()),
            "subgroup {size} run at {}",
            size * 2
        );
    }
}

fn host_exclusive(x: &[u32]) -> Vec<u32> {
    x.iter()
        .scan(0u32, |run, &v| {
            let before = *run;
            *run = run.wrapping_add(v);
            Some(before)
        })
        .collect()
}

/// `x` scanned by `scan_single_pass(per, limit)` over `state`, in the
/// interpreter at subgroups of `subgroup`.
fn single_pass(x: &[u32], per: u32, limit: u32, state: &mut Vec<u8>, subgroup: u32) -> Vec<u32> {
    let k = kernels::scan_single_pass(per, limit).expect("builds");
    let tiles = (x.len() as u32).div_ceil(kernels::scan_single_tile(per));
    let mut bufs = vec![
        bytes::u32_bytes(x),
        std::mem::take(state),
        vec![0; x.len() * 4],
    ];
    let scalars = k
        .pack_scalars(&[Lit::U32(x.len() as u32 / 4), Lit::U32(tiles)])
        .expect("types");
    interp::run_with_subgroup(&k, [tiles, 1, 1], &mut bufs, &scalars, subgroup).expect("runs");
    *state = std::mem::take(&mut bufs[1]);
    bytes::bytes_u32(&bufs[2])
}

/// The single pass, launch after launch over one state never cleared
/// (three launches per size, sizes of more and fewer tiles in turn), at
/// two subgroup sizes, with sums that wrap.
#[test]
fn single_pass_scans_match_the_host_launch_after_launch() {
    let mut r = Rng::spread(41);
    for (per, subgroup) in [(4u32, 32u32), (8, 16), (16, 4)] {
        let tile = kernels::scan_single_tile(per) as usize;
        let mut state = vec![0u8; 4 * kernels::scan_single_state_words(5) as usize];
        for n in [5 * tile, 4, 2 * tile + 4 * 37, 5 * tile - 8] {
            let x: Vec<u32> = (0..n).map(|_| r.u32()).collect();
            for launch in 0..3 {
                let got = single_pass(&x, per, 64, &mut state, subgroup);
                assert_eq!(got, host_exclusive(&x), "per {per}, n {n}, launch {launch}");
            }
        }
        // Every launch reset the counters and moved the generation on.
        let head = bytes::bytes_u32(&state[..12]);
        assert_eq!(head, vec![0, 0, 12], "per {per}");
    }
}

/// A tile whose workgroup never publishes (here: never runs, its ticket
/// taken before the launch) is reduced by its successor from the input:
/// every later tile is still right.
#[test]
fn a_tile_that_never_publishes_is_reduced_by_its_successor() {
    let per = 4;
    let tile = kernels::scan_single_tile(per) as usize;
    let mut r = Rng::spread(42);
    let x: Vec<u32> = (0..3 * tile).map(|_| r.u32()).collect();
    let k = kernels::scan_single_pass(per, 3).expect("builds");
    let mut state = vec![0u8; 4 * kernels::scan_single_state_words(3) as usize];
    state[..4].copy_from_slice(&1u32.to_le_bytes());
    let mut bufs = vec![bytes::u32_bytes(&x), state, vec![0; x.len() * 4]];
    let scalars = k
        .pack_scalars(&[Lit::U32(x.len() as u32 / 4), Lit::U32(3)])
        .expect("types");
    interp::run(&k, [2, 1, 1], &mut bufs, &scalars).expect("runs");
    let got = bytes::bytes_u32(&bufs[2]);
    assert!(got[..tile].iter().all(|&v| v == 0), "tile 0 never ran");
    assert_eq!(got[tile..], host_exclusive(&x)[tile..]);
}

/// When the generations a tag holds wrap, the last workgroup clears every
/// tile word (also those of tiles this launch does not have), so no word
/// of 16,384 launches ago reads as current; the next launch is right.
#[test]
fn single_pass_state_is_cleared_when_generations_wrap() {
    let tile = kernels::scan_single_tile(4) as usize;
    let mut r = Rng::spread(43);
    let x: Vec<u32> = (0..2 * tile).map(|_| r.u32()).collect();
    let words = kernels::scan_single_state_words(4) as usize;
    let mut state = vec![0u8; 4 * words];
    state[8..12].copy_from_slice(&0x3fffu32.to_le_bytes());
    // Tile 3's words as a stale inclusive sum of generation 0.
    for w in [9, 10] {
        state[4 * w..4 * w + 4].copy_from_slice(&(2u32 << 16 | 0x1234).to_le_bytes());
    }
    assert_eq!(single_pass(&x, 4, 64, &mut state, 32), host_exclusive(&x));
    let after = bytes::bytes_u32(&state);
    assert_eq!(after[..3], [0, 0, 0x4000]);
    assert!(after[3..].iter().all(|&w| w == 0), "{after:x?}");
    assert_eq!(single_pass(&x, 4, 64, &mut state, 32), host_exclusive(&x));
}

/// Look-back windows deeper than one subgroup, with a hole: tiles 1..=9
/// never run (their tickets taken before the launch); 1..=8 and 10.. of
/// them left their own sums published this generation and tile 0 its
/// inclusive one, tile 5 nothing. Tile 10 walks back windows of 4 lanes
/// over own sums, polls tile 5 until its limit, reduces it from the input
/// and goes on to tile 0: the tiles that run are right.
#[test]
fn look_back_windows_count_own_sums_and_reduce_a_hole() {
    let per = 4;
    let tile = kernels::scan_single_tile(per) as usize;
    let tiles = 12u32;
    let mut r = Rng::spread(44);
    let x: Vec<u32> = (0..tiles as usize * tile).map(|_| r.u32()).collect();
    let k = kernels::scan_single_pass(per, 3).expect("builds");
    let mut state = vec![0u32; kernels::scan_single_state_words(tiles) as usize];
    state[0] = 10;
    let sums: Vec<u32> = x
        .chunks(tile)
        .map(|c| c.iter().fold(0u32, |a, v| a.wrapping_add(*v)))
        .collect();
    // Generation 0: tags are the flag alone.
    for t in (0..10).filter(|t| *t != 5) {
        let flag = if t == 0 { 2u32 } else { 1 };
        state[3 + 2 * t] = flag << 16 | (sums[t] & 0xffff);
        state[4 + 2 * t] = flag << 16 | (sums[t] >> 16);
    }
    let mut bufs = vec![
        bytes::u32_bytes(&x),
        bytes::u32_bytes(&state),
        vec![0; x.len() * 4],
    ];
    let scalars = k
        .pack_scalars(&[Lit::U32(x.len() as u32 / 4), Lit::U32(tiles)])
        .expect("types");
    interp::run_with_subgroup(&k, [2, 1, 1], &mut bufs, &scalars, 4).expect("runs");
    let got = bytes::bytes_u32(&bufs[2]);
    assert_eq!(got[10 * tile..], host_exclusive(&x)[10 * tile..]);
}

/// Rows are scanned four at a time: any other count is refused, not built
/// into a kernel that would drop rows.
#[test]
fn single_pass_rows_not_a_multiple_of_four_are_refused() {
    for per in [0u32, 2, 6] {
        let e = kernels::scan_single_pass(per, 256).expect_err("refused");
        assert!(
            matches!(
                e,
                compute_ir::IrError::Structure {
                    op: "scan_single_pass",
                    ..
                }
            ),
            "{e}"
        );
    }
}
