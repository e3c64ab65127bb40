//! The kernel suite written with the IR (`compute_testkit::kernels`: row
//! softmax and layernorm, scan, byte histogram, radix sort, register-tiled
//! matmul), at small sizes on the device against the host.

use compute_ir::Lit;
use compute_testkit::Rng;
use compute_testkit::bytes::{bytes_f32, bytes_u32, f32_bytes, u32_bytes};
use compute_testkit::kernels;

use compute_runtime::Handle;

use crate::ir::{read, run, server, upload};

fn rows_of(r: &mut Rng, rows: usize, cols: usize, scale: f32) -> Vec<f32> {
    (0..rows * cols).map(|_| scale * r.f32_signed()).collect()
}

/// Each value within `rel` of the host's, or `abs` of it near zero.
fn assert_close(got: &[f32], want: &[f64], (rel, abs): (f64, f64), what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= rel * w.abs() + abs,
            "{what}[{i}]: {g} against {w} (error {err:e})"
        );
    }
}

#[test]
fn softmax_rows_match_the_host() {
    let mut s = server();
    let (rows, cols) = (6usize, 2048usize);
    let x = rows_of(&mut Rng::spread(11), rows, cols, 30.0);
    let k = kernels::softmax(cols as u32).expect("kernel");
    let hx = upload(&mut s, f32_bytes(&x));
    let hy = upload(&mut s, vec![0; rows * cols * 4]);
    run(
        &mut s,
        &k,
        [rows as u32, 1, 1],
        &[hx, hy.clone()],
        Vec::new(),
    );
    let got = bytes_f32(&read(&mut s, &hy));
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let m = row.iter().fold(f64::MIN, |m, &v| m.max(f64::from(v)));
        let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        want.extend(e.iter().map(|v| v / sum));
    }
    // exp on a device is within a few ulp; the sums are of 2048 terms.
    assert_close(&got, &want, (1e-4, 1e-12), "softmax");
}

#[test]
fn layernorm_rows_match_the_host() {
    let mut s = server();
    let (rows, cols) = (5usize, 1024usize);
    let mut r = Rng::spread(12);
    // An offset the naive E[x^2] - mean^2 would lose digits to.
    let x: Vec<f32> = rows_of(&mut r, rows, cols, 2.0)
        .into_iter()
        .map(|v| v + 300.0)
        .collect();
    let gamma = rows_of(&mut r, 1, cols, 1.5);
    let beta = rows_of(&mut r, 1, cols, 0.5);
    let eps = 1e-5f32;
    let k = kernels::layernorm(cols as u32).expect("kernel");
    let handles = [
        upload(&mut s, f32_bytes(&x)),
        upload(&mut s, f32_bytes(&gamma)),
        upload(&mut s, f32_bytes(&beta)),
        upload(&mut s, vec![0; rows * cols * 4]),
    ];
    let scalars = k.pack_scalars(&[Lit::F32(eps)]).expect("scalars");
    run(&mut s, &k, [rows as u32, 1, 1], &handles, scalars);
    let got = bytes_f32(&read(&mut s, &handles[3]));
    let mut want = Vec::with_capacity(rows * cols);
    for row in x.chunks(cols) {
        let n = cols as f64;
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        let rstd = 1.0 / (var + f64::from(eps)).sqrt();
        want.extend(row.iter().enumerate().map(|(c, &v)| {
            (f64::from(v) - mean) * rstd * f64::from(gamma[c]) + f64::from(beta[c])
        }));
    }
    // The mean of values near 300 carries f32's 2^-15 relative rounding
    // into deviations of about 1: 1e-4 of the normalized output.
    assert_close(&got, &want, (2e-4, 2e-4), "layernorm");
}

#[test]
fn row_kernels_refuse_a_row_they_cannot_hold() {
    assert!(kernels::softmax(1000).is_err());
    assert!(kernels::layernorm(0).is_err());
}

/// The exclusive prefix sum of `x`, by the three scan launches.
fn device_scan(s: &mut crate::ir::IrServer, x: &[u32]) -> Vec<u32> {
    assert!(x.len().is_multiple_of(4));
    let hx = upload(s, u32_bytes(x));
    let hy = upload(s, vec![0; x.len() * 4]);
    scan_into(s, &hx, &hy, x.len() as u32);
    let mut got = bytes_u32(&read(s, &hy));
    got.truncate(x.len());
    got
}

pub(crate) fn host_exclusive(x: &[u32]) -> Vec<u32> {
    let mut run = 0u32;
    x.iter()
        .map(|&v| {
            let before = run;
            run = run.wrapping_add(v);
            before
        })
        .collect()
}

#[test]
fn scans_match_the_host_across_blocks_and_a_partial_one() {
    let mut s = server();
    if !crate::common::has_feature(s.device(), wgpu::Features::SUBGROUP, "the scan kernels") {
        return;
    }
    let mut r = Rng::spread(13);
    // One vector; a partial block; more blocks than the spine's workgroup
    // has invocations (runs of two), with sums that wrap.
    for n in [4usize, 3 * 4096 + 4 * 37, 300 * 4096 + 8] {
        let x: Vec<u32> = (0..n)
            .map(|_| if n > 100_000 { r.u32() } else { r.u32() % 1000 })
            .collect();
        assert_eq!(device_scan(&mut s, &x), host_exclusive(&x), "n = {n}");
    }
}

/// `x` scanned by one launch of `scan_single_pass(per, limit)` over
/// `state` (of at least `tiles` tiles, never cleared between launches).
fn device_single_pass(
    s: &mut crate::ir::IrServer,
    x: &[u32],
    (per, limit): (u32, u32),
    state: &Handle,
    tiles: u32,
) -> Vec<u32> {
    let k = kernels::scan_single_pass(per, limit).expect("kernel");
    single_pass_with(s, &k, x, state, tiles)
}

/// `x` scanned by one launch of the single-pass scan kernel `k`.
pub(crate) fn single_pass_with(
    s: &mut crate::ir::IrServer,
    k: &compute_ir::Kernel,
    x: &[u32],
    state: &Handle,
    tiles: u32,
) -> Vec<u32> {
    let hx = upload(s, u32_bytes(x));
    let hy = upload(s, vec![0; x.len() * 4]);
    let scalars = k
        .pack_scalars(&[Lit::U32(x.len() as u32 / 4), Lit::U32(tiles)])
        .expect("scalars");
    run(
        s,
        k,
        [tiles, 1, 1],
        &[hx, state.clone(), hy.clone()],
        scalars,
    );
    let mut got = bytes_u32(&read(s, &hy));
    got.truncate(x.len());
    got
}

/// The single-pass scan on the device, launch after launch over one state
/// (sizes of more and fewer tiles in turn, sums that wrap), with a poll
/// limit its workgroups meet (fallback reductions) and one they rarely do.
#[test]
fn single_pass_scans_match_the_host_launch_after_launch() {
    let mut s = server();
    if !crate::common::has_feature(s.device(), wgpu::Features::SUBGROUP, "the single-pass scan") {
        return;
    }
    let mut r = Rng::spread(16);
    for (per, limit) in [(4u32, 1u32), (8, 4096), (16, 256)] {
        let tile = kernels::scan_single_tile(per) as usize;
        let words = kernels::scan_single_state_words(300) as usize;
        let state = upload(&mut s, vec![0; 4 * words]);
        for n in [300 * tile, 4, 3 * tile + 4 * 37, 41 * tile - 8] {
            let x: Vec<u32> = (0..n).map(|_| r.u32()).collect();
            let tiles = (n as u32).div_ceil(tile as u32);
            for launch in 0..3 {
                let got = device_single_pass(&mut s, &x, (per, limit), &state, tiles);
                assert!(
                    got == host_exclusive(&x),
                    "per {per}, limit {limit}, n {n}, launch {launch}: first wrong at {:?}",
                    got.iter()
                        .zip(host_exclusive(&x))
                        .position(|(g, w)| *g != w)
                );
            }
        }
    }
}

/// A tile whose workgroup never runs (its ticket taken before the launch)
/// is reduced from the input by the next one, after its poll limit: the
/// later tiles are right all the same.
#[test]
fn a_single_pass_tile_that_never_publishes_is_reduced_by_its_successor() {
    let mut s = server();
    if !crate::common::has_feature(s.device(), wgpu::Features::SUBGROUP, "the single-pass scan") {
        return;
    }
    let per = 4;
    let tile = kernels::scan_single_tile(per) as usize;
    let mut r = Rng::spread(17);
    let x: Vec<u32> = (0..5 * tile).map(|_| r.u32()).collect();
    let mut state = vec![0u8; 4 * kernels::scan_single_state_words(5) as usize];
    state[..4].copy_from_slice(&2u32.to_le_bytes());
    let state = upload(&mut s, state);
    let k = kernels::scan_single_pass(per, 16).expect("kernel");
    let hx = upload(&mut s, u32_bytes(&x));
    let hy = upload(&mut s, vec![0; x.len() * 4]);
    let scalars = k
        .pack_scalars(&[Lit::U32(x.len() as u32 / 4), Lit::U32(5)])
        .expect("scalars");
    run(&mut s, &k, [3, 1, 1], &[hx, state, hy.clone()], scalars);
    let got = bytes_u32(&read(&mut s, &hy));
    assert!(
        got[..2 * tile].iter().all(|&v| v == 0),
        "tiles 0 and 1 never ran"
    );
    assert!(got[2 * tile..] == host_exclusive(&x)[2 * tile..]);
}

#[test]
fn byte_histograms_match_the_host() {
    let mut s = server();
    let mut r = Rng::spread(14);
    // Skewed: a third of the bytes are 0 (contended bins), the rest spread.
    let bytes: Vec<u8> = (0..(1 << 20) + 48)
        .map(|_| if r.chance(33) { 0 } else { r.u32() as u8 })
        .collect();
    let mut want = vec![0u32; 256];
    for &b in &bytes {
        want[usize::from(b)] += 1;
    }
    for (what, k) in [
        ("shared bins", kernels::byte_histogram()),
        ("lane copies", kernels::byte_histogram_lanes()),
    ] {
        let k = k.expect("kernel");
        let hx = upload(&mut s, bytes.clone());
        let hist = upload(&mut s, vec![0; 256 * 4]);
        let n4 = (bytes.len() / 16) as u32;
        let scalars = k.pack_scalars(&[Lit::U32(n4)]).expect("n4");
        // Fewer workgroups than vectors per invocation: the grid stride loops.
        run(&mut s, &k, [7, 1, 1], &[hx, hist.clone()], scalars);
        assert_eq!(bytes_u32(&read(&mut s, &hist)), want, "{what}");
    }
}

/// A loop with a barrier inside that ends on a uniform load, on the
/// device: every invocation of every workgroup counts every round.
#[test]
fn uniform_loads_end_a_loop_with_a_barrier_together() {
    let mut s = server();
    let k = kernels::uniform_rounds().expect("kernel");
    let n = 300 * kernels::UNIFORM_ROUNDS_WORKGROUP as usize;
    let out = upload(&mut s, vec![0xff; n * 4]);
    let scalars = k.pack_scalars(&[Lit::U32(7)]).expect("rounds");
    run(&mut s, &k, [300, 1, 1], std::slice::from_ref(&out), scalars);
    assert_eq!(bytes_u32(&read(&mut s, &out)), vec![7; n]);
}

#[test]
fn register_matmul_matches_the_host() {
    let mut s = server();
    let (m, n, kk) = (256usize, 384usize, 72usize);
    let mut r = Rng::spread(15);
    let a = rows_of(&mut r, m, kk, 1.0);
    let b = rows_of(&mut r, kk, n, 1.0);
    let k = kernels::register_matmul().expect("kernel");
    let handles = [
        upload(&mut s, f32_bytes(&a)),
        upload(&mut s, f32_bytes(&b)),
        upload(&mut s, vec![0; m * n * 4]),
    ];
    let scalars = k
        .pack_scalars(&[Lit::U32(m as u32), Lit::U32(n as u32), Lit::U32(kk as u32)])
        .expect("scalars");
    let tile = kernels::REGISTER_MATMUL_TILE as usize;
    let groups = [(n / tile) as u32, (m / tile) as u32, 1];
    run(&mut s, &k, groups, &handles, scalars);
    let got = bytes_f32(&read(&mut s, &handles[2]));
    let mut want = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..kk {
            let x = f64::from(a[i * kk + p]);
            for j in 0..n {
                want[i * n + j] += x * f64::from(b[p * n + j]);
            }
        }
    }
    // 72 products of values in [-1, 1), each fused-rounded in f32.
    assert_close(&got, &want, (1e-5, 1e-5), "matmul");
}

/// The three scan launches: `offsets[..len]` = the exclusive prefix sum of
/// `counts[..len]` (`len` a multiple of 4).
fn scan_into(s: &mut crate::ir::IrServer, counts: &Handle, offsets: &Handle, len: u32) {
    let (reduce, spine, down) = (
        kernels::scan_reduce().expect("reduce"),
        kernels::scan_spine().expect("spine"),
        kernels::scan_down().expect("down"),
    );
    let blocks = len.div_ceil(kernels::SCAN_BLOCK);
    let sums = upload(s, vec![0; blocks as usize * 4]);
    let n = reduce.pack_scalars(&[Lit::U32(len / 4)]).expect("n4");
    run(
        s,
        &reduce,
        [blocks, 1, 1],
        &[counts.clone(), sums.clone()],
        n.clone(),
    );
    let b = spine.pack_scalars(&[Lit::U32(blocks)]).expect("blocks");
    run(s, &spine, [1, 1, 1], std::slice::from_ref(&sums), b);
    run(
        s,
        &down,
        [blocks, 1, 1],
        &[counts.clone(), sums, offsets.clone()],
        n,
    );
}

/// Four passes of the radix sort over `keys`, on the device.
fn device_sort(s: &mut crate::ir::IrServer, keys: &[u32]) -> Vec<u32> {
    let (count, scatter) = (
        kernels::radix_count().expect("count"),
        kernels::radix_scatter().expect("scatter"),
    );
    let n = keys.len() as u32;
    let blocks = n.div_ceil(kernels::RADIX_BLOCK);
    let len = 256 * blocks;
    let mut from = upload(s, u32_bytes(keys));
    let mut to = upload(s, vec![0; keys.len() * 4]);
    let counts = upload(s, vec![0; len as usize * 4]);
    let offsets = upload(s, vec![0; len as usize * 4]);
    for pass in 0..32 / kernels::RADIX_BITS {
        let shift = pass * kernels::RADIX_BITS;
        let scalars = count
            .pack_scalars(&[Lit::U32(n), Lit::U32(shift), Lit::U32(blocks)])
            .expect("scalars");
        run(
            s,
            &count,
            [blocks, 1, 1],
            &[from.clone(), counts.clone()],
            scalars.clone(),
        );
        scan_into(s, &counts, &offsets, len);
        run(
            s,
            &scatter,
            [blocks, 1, 1],
            &[from.clone(), offsets.clone(), to.clone()],
            scalars,
        );
        std::mem::swap(&mut from, &mut to);
    }
    let mut got = bytes_u32(&read(s, &from));
    got.truncate(keys.len());
    got
}

#[test]
fn radix_sort_matches_the_host() {
    let mut s = server();
    if !crate::common::has_feature(s.device(), wgpu::Features::SUBGROUP, "the radix sort") {
        return;
    }
    let mut r = Rng::spread(16);
    // A partial last block; repeated keys (stability shows in the order of
    // equal digits across passes); the extremes.
    for n in [1000usize, 5 * 1024 + 333] {
        let mut keys: Vec<u32> = (0..n)
            .map(|i| match i % 5 {
                0 => r.u32() % 64,
                1 => u32::MAX - r.u32() % 3,
                _ => r.u32(),
            })
            .collect();
        let got = device_sort(&mut s, &keys);
        keys.sort_unstable();
        assert_eq!(got, keys, "n = {n}");
    }
}
