//! The IR backend on the real adapter: the builder's kernels against host
//! computations, and random programs against the CPU interpreter.

use compute_ir::{Kernel, Lit, Scalar, interp};
use compute_runtime::{
    CubeCount, DeviceId, Handle, KernelArguments, LaunchMode, Server, ServerError, StreamId,
};
use compute_testkit::bytes::{bytes_f32, bytes_u32, f32_bytes, f64_bytes, u32_bytes, u64_bytes};
use compute_testkit::random_ir::{self, Config, FloatOps};
use compute_testkit::{Rng, kernels};
use wgpu_server::{IrCompiler, WgpuServer};

use crate::common;

pub(crate) type IrServer = WgpuServer<IrCompiler>;
const S: StreamId = StreamId(0);

pub(crate) fn server() -> IrServer {
    IrServer::try_init(DeviceId(0)).expect("adapter")
}

/// Non-zero floats in [-4, 4).
fn f32_data(r: &mut Rng) -> f32 {
    4.0 * r.f32_signed()
}

/// Uploads `data`, padded to one word (the server refuses empty buffers).
pub(crate) fn upload(s: &mut IrServer, mut data: Vec<u8>) -> Handle {
    data.resize(data.len().max(4), 0);
    common::upload(s, data, S)
}

pub(crate) fn run(
    s: &mut IrServer,
    kernel: &Kernel,
    wg: [u32; 3],
    bufs: &[Handle],
    scalars: Vec<u8>,
) {
    let mut args = KernelArguments::buffers(bufs.iter().map(Handle::binding).collect());
    if !scalars.is_empty() {
        args = args.with_scalars(scalars);
    }
    // SAFETY: IR kernels compile with checked bounds (the default options).
    unsafe {
        s.launch(
            Box::new(kernel.clone()),
            CubeCount::Static(wg[0], wg[1], wg[2]),
            args,
            S,
            LaunchMode::Execute,
        )
    };
}

pub(crate) fn read(s: &mut IrServer, h: &Handle) -> Vec<u8> {
    common::read(s, h, S).expect("read").to_vec()
}

#[test]
fn elementwise_add_matches_the_host() {
    let mut s = server();
    let k = kernels::elementwise_add(Scalar::F32, 64).expect("kernel");
    let n = 10_000u32;
    let mut r = Rng::new(7);
    let a: Vec<f32> = (0..n).map(|_| f32_data(&mut r)).collect();
    let b: Vec<f32> = (0..n).map(|_| f32_data(&mut r)).collect();
    let (ha, hb) = (upload(&mut s, f32_bytes(&a)), upload(&mut s, f32_bytes(&b)));
    let hc = upload(&mut s, vec![0; n as usize * 4]);
    let scalars = k.pack_scalars(&[Lit::U32(n)]).expect("scalars");
    run(
        &mut s,
        &k,
        [n.div_ceil(64), 1, 1],
        &[ha, hb, hc.clone()],
        scalars,
    );
    let c = bytes_f32(&read(&mut s, &hc));
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(c, expected);
}

/// Buffers of `vec4<f32>`: the device moves 16 bytes per load and store and
/// adds lane by lane, exactly as the host does; a binding of fewer bytes
/// than one vector is refused before anything runs.
#[test]
fn vec4_buffers_add_lane_by_lane_on_the_device() {
    let mut s = server();
    let k = kernels::elementwise_add_vec(Scalar::F32, 4, 64).expect("kernel");
    let vectors = 2_500u32;
    let n = vectors * 4;
    let mut r = Rng::new(11);
    let a: Vec<f32> = (0..n).map(|_| f32_data(&mut r)).collect();
    let b: Vec<f32> = (0..n).map(|_| f32_data(&mut r)).collect();
    let (ha, hb) = (upload(&mut s, f32_bytes(&a)), upload(&mut s, f32_bytes(&b)));
    let hc = upload(&mut s, vec![0; n as usize * 4]);
    let scalars = k.pack_scalars(&[Lit::U32(vectors)]).expect("scalars");
    run(
        &mut s,
        &k,
        [vectors.div_ceil(64), 1, 1],
        &[ha, hb, hc.clone()],
        scalars,
    );
    let c = bytes_f32(&read(&mut s, &hc));
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(c, expected);

    // 8 bytes bound where one element is 16: refused at the launch, and
    // the output it would have written is poisoned, not half-written.
    let small = upload(&mut s, vec![0; 8]);
    let out = upload(&mut s, vec![0; 16]);
    let scalars = k.pack_scalars(&[Lit::U32(1)]).expect("scalars");
    run(
        &mut s,
        &k,
        [1, 1, 1],
        &[small.clone(), small, out.clone()],
        scalars,
    );
    let err = common::sync(&mut s, S).expect_err("an 8-byte binding of vec4<f32> is refused");
    assert!(
        matches!(err.root_cause(), ServerError::BindingTooSmall { .. }),
        "{err}"
    );
    assert!(
        common::read(&mut s, &out, S).is_err(),
        "the refused launch's output reads as poisoned"
    );
}

#[test]
fn workgroup_reduction_with_shared_memory_matches_the_host() {
    let mut s = server();
    let size = 256u32;
    let k = kernels::workgroup_sum(Scalar::U32, size).expect("kernel");
    let n = 5000u32;
    let mut r = Rng::new(11);
    let a: Vec<u32> = (0..n).map(|_| (r.next_u64() % 1000 + 1) as u32).collect();
    let groups = n.div_ceil(size);
    let ha = upload(&mut s, u32_bytes(&a));
    let hout = upload(&mut s, vec![0; groups as usize * 4]);
    let scalars = k.pack_scalars(&[Lit::U32(n)]).expect("scalars");
    run(&mut s, &k, [groups, 1, 1], &[ha, hout.clone()], scalars);
    let got = bytes_u32(&read(&mut s, &hout));
    let expected: Vec<u32> = a.chunks(size as usize).map(|c| c.iter().sum()).collect();
    assert_eq!(got, expected);
}

#[test]
fn atomic_histogram_matches_the_host() {
    let mut s = server();
    let k = kernels::histogram(64).expect("kernel");
    let (n, bins) = (20_000u32, 37u32);
    let mut r = Rng::new(13);
    let values: Vec<u32> = (0..n)
        .map(|_| (r.next_u64() % 100_000 + 1) as u32)
        .collect();
    let hv = upload(&mut s, u32_bytes(&values));
    let hh = upload(&mut s, vec![0; bins as usize * 4]);
    let scalars = k
        .pack_scalars(&[Lit::U32(n), Lit::U32(bins)])
        .expect("scalars");
    run(
        &mut s,
        &k,
        [n.div_ceil(64), 1, 1],
        &[hv, hh.clone()],
        scalars,
    );
    let mut expected = vec![0u32; bins as usize];
    for v in &values {
        expected[(v % bins) as usize] += 1;
    }
    assert_eq!(bytes_u32(&read(&mut s, &hh)), expected);
}

#[test]
fn tiled_matmul_matches_the_host() {
    let mut s = server();
    let k = kernels::tiled_matmul().expect("kernel");
    let (m, n, kk) = (67u32, 45u32, 83u32);
    let mut r = Rng::new(17);
    let a: Vec<f32> = (0..m * kk).map(|_| f32_data(&mut r)).collect();
    let b: Vec<f32> = (0..kk * n).map(|_| f32_data(&mut r)).collect();
    let (ha, hb) = (upload(&mut s, f32_bytes(&a)), upload(&mut s, f32_bytes(&b)));
    let hc = upload(&mut s, vec![0; (m * n) as usize * 4]);
    let scalars = k
        .pack_scalars(&[Lit::U32(m), Lit::U32(n), Lit::U32(kk)])
        .expect("scalars");
    run(
        &mut s,
        &k,
        [n.div_ceil(16), m.div_ceil(16), 1],
        &[ha, hb, hc.clone()],
        scalars,
    );
    let c = bytes_f32(&read(&mut s, &hc));
    for i in 0..m as usize {
        for j in 0..n as usize {
            let mut acc = 0.0f64;
            let mut mag = 0.0f64;
            for p in 0..kk as usize {
                let t = f64::from(a[i * kk as usize + p]) * f64::from(b[p * n as usize + j]);
                acc += t;
                mag += t.abs();
            }
            let got = f64::from(c[i * n as usize + j]);
            // f32 accumulation over k terms: k * eps * sum|terms|.
            let tol = f64::from(kk) * f64::from(f32::EPSILON) * mag + 1e-6;
            assert!((got - acc).abs() <= tol, "c[{i}][{j}] = {got}, host {acc}");
        }
    }
}

/// The f32 buffers of a random program (`compute_testkit::random_ir`: input 2,
/// output 5).
const FLOAT_BUFFERS: [usize; 2] = [2, 5];

/// Floats agree within 4 ULP. A driver may contract `a * b + c` into one
/// fused multiply-add (WGSL allows it; NVIDIA does: 1 ULP on seed 24 on the
/// H200, while lavapipe agrees bit for bit), so the bound is stated rather
/// than 0. The two zeros are equal: without the `SignedZeroInfNanPreserve`
/// execution mode (naga does not ask for it) Vulkan does not preserve the
/// sign of zero, and lavapipe does not (`0 - (-0 * x)` came back as -0 on
/// seed 62 of 1,500).
fn assert_floats_close(got: &[u8], expected: &[u8], seed: u64, buffer: usize) {
    for (k, (g, e)) in got
        .chunks_exact(4)
        .zip(expected.chunks_exact(4))
        .enumerate()
    {
        let g = f32::from_le_bytes([g[0], g[1], g[2], g[3]]);
        let e = f32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        if g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()) || (g == 0.0 && e == 0.0) {
            continue;
        }
        let ulps = (g.to_bits() as i64 - e.to_bits() as i64).unsigned_abs();
        assert!(
            g.is_sign_positive() == e.is_sign_positive() && ulps <= 4,
            "seed {seed}, buffer {buffer}, element {k}: device {g} vs interpreter {e} ({ulps} ULP)"
        );
    }
}

/// Random well-typed programs (integers, bools and correctly rounded float
/// ops; loops, branches, shared memory with barriers, atomics) give the same
/// results on the device and in the interpreter: integers exactly, floats
/// within 4 ULP (see `assert_floats_close`).
#[test]
fn random_programs_match_the_interpreter() {
    random_programs_on(server(), 48);
}

/// The same programs compiled with reported bounds checks: the
/// instrumentation changes no result, and since every access of a random
/// program is in bounds (the interpreter refuses any other), none is
/// reported (`random_programs_on` syncs and expects no failure).
#[test]
fn random_programs_with_reported_bounds_match_the_interpreter_and_report_nothing() {
    let s = wgpu_server::WgpuServerOptions::new()
        .bounds_checks(wgpu_server::BoundsChecks::Reported)
        .open()
        .expect("adapter");
    random_programs_on(s, 24);
}

fn random_programs_on(mut s: IrServer, default_cases: u64) {
    let cfg = Config {
        statements: 16,
        depth: 3,
        floats: FloatOps::Exact,
        vectors: true,
        barriers: true,
        atomics: true,
    };
    // More with `RANDOM_IR_CASES=n` (a soak after adding operations).
    let cases = std::env::var("RANDOM_IR_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    for seed in 1..=cases {
        let p = random_ir::program(seed, &cfg);
        let mut expected = p.buffers.clone();
        interp::run(&p.kernel, p.workgroups, &mut expected, &p.scalars).expect("interpreter");
        let handles: Vec<Handle> = p
            .buffers
            .iter()
            .map(|b| upload(&mut s, b.clone()))
            .collect();
        run(&mut s, &p.kernel, p.workgroups, &handles, p.scalars.clone());
        for (i, h) in handles.iter().enumerate() {
            let mut got = read(&mut s, h);
            got.truncate(expected[i].len());
            if FLOAT_BUFFERS.contains(&i) {
                assert_floats_close(&got, &expected[i], seed, i);
            } else {
                assert_eq!(got, expected[i], "seed {seed}, buffer {i}");
            }
        }
    }
    futures::executor::block_on(s.sync(vec![], S)).expect("no deferred failure");
}

/// Runs `kernel` on the device and in the interpreter over the same inputs
/// and returns both sets of buffers.
pub(crate) fn both(
    s: &mut IrServer,
    kernel: &Kernel,
    wg: [u32; 3],
    buffers: Vec<Vec<u8>>,
    subgroup_size: u32,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut expected = buffers.clone();
    interp::run_with_subgroup(kernel, wg, &mut expected, &[], subgroup_size).expect("interpreter");
    let handles: Vec<Handle> = buffers.into_iter().map(|b| upload(s, b)).collect();
    run(s, kernel, wg, &handles, Vec::new());
    let got = handles
        .iter()
        .zip(&expected)
        .map(|(h, e)| {
            let mut g = read(s, h);
            g.truncate(e.len());
            g
        })
        .collect();
    (got, expected)
}

#[test]
fn wide_integers_and_doubles_match_the_interpreter() {
    let mut s = server();
    let features = s.device().features();
    let n = 256u32;
    let mut r = Rng::new(23);
    if features.contains(wgpu::Features::SHADER_INT64) {
        // c = a * b + (a >> 7) ^ b, wrapping, in u64 and i64.
        for elem in [Scalar::U64, Scalar::I64] {
            let k = compute_ir::KernelBuilder::new("wide", [64, 1, 1]);
            let (a, b, c) = (k.input(elem), k.input(elem), k.output(elem));
            let gid = k.global_id();
            let i = k.x(gid);
            let x = k.load(a, i);
            let y = k.load(b, i);
            let p = k.mul(x, y);
            let seven = k.u32(7);
            let sh = k.shr(x, seven);
            let q = k.xor(sh, y);
            let v = k.add(p, q);
            k.store(c, i, v);
            let kernel = k.build().expect("kernel");
            let words: Vec<u64> = (0..2 * n).map(|_| r.next_u64()).collect();
            let a_bytes = u64_bytes(&words[..n as usize]);
            let b_bytes = u64_bytes(&words[n as usize..]);
            let (got, expected) = both(
                &mut s,
                &kernel,
                [n / 64, 1, 1],
                vec![a_bytes, b_bytes, vec![0; n as usize * 8]],
                32,
            );
            assert_eq!(got[2], expected[2], "{elem:?}");
        }
    } else {
        eprintln!("no SHADER_INT64: 64-bit integers not run on the device");
    }
    if features.contains(wgpu::Features::SHADER_F64) {
        // Correctly rounded ops only: c = a * b, d = a + b (no contraction).
        let k = compute_ir::KernelBuilder::new("double", [64, 1, 1]);
        let (a, b) = (k.input(Scalar::F64), k.input(Scalar::F64));
        let (c, d) = (k.output(Scalar::F64), k.output(Scalar::F64));
        let gid = k.global_id();
        let i = k.x(gid);
        let x = k.load(a, i);
        let y = k.load(b, i);
        let p = k.mul(x, y);
        k.store(c, i, p);
        let q = k.add(x, y);
        k.store(d, i, q);
        let kernel = k.build().expect("kernel");
        let vals: Vec<f64> = (0..2 * n)
            .map(|_| f64::from(f32_data(&mut r)) / 3.0)
            .collect();
        let (got, expected) = both(
            &mut s,
            &kernel,
            [n / 64, 1, 1],
            vec![
                f64_bytes(&vals[..n as usize]),
                f64_bytes(&vals[n as usize..]),
                vec![0; n as usize * 8],
                vec![0; n as usize * 8],
            ],
            32,
        );
        assert_eq!(got[2], expected[2], "f64 mul");
        assert_eq!(got[3], expected[3], "f64 add");
    } else {
        eprintln!("no SHADER_F64: doubles not run on the device");
    }
}

#[test]
fn subgroup_operations_match_the_interpreter_at_the_device_subgroup_size() {
    let mut s = server();
    if !common::has_feature(s.device(), wgpu::Features::SUBGROUP, "subgroup operations") {
        return;
    }
    let k = compute_ir::KernelBuilder::new("subgroups", [64, 1, 1]);
    let input = k.input(Scalar::U32);
    let (sums, maxes, firsts, sizes) = (
        k.output(Scalar::U32),
        k.output(Scalar::U32),
        k.output(Scalar::U32),
        k.output(Scalar::U32),
    );
    let gid = k.global_id();
    let i = k.x(gid);
    let x = k.load(input, i);
    let sum = k.subgroup_add(x);
    k.store(sums, i, sum);
    let max = k.subgroup_max(x);
    k.store(maxes, i, max);
    let first = k.subgroup_broadcast_first(x);
    k.store(firsts, i, first);
    let size = k.subgroup_size();
    k.store(sizes, i, size);
    let kernel = k.build().expect("kernel");
    let n = 256usize;
    let mut r = Rng::new(29);
    let values: Vec<u32> = (0..n).map(|_| (r.next_u64() % 1000) as u32 + 1).collect();
    let inputs = vec![
        u32_bytes(&values),
        vec![0; n * 4],
        vec![0; n * 4],
        vec![0; n * 4],
        vec![0; n * 4],
    ];
    // The device's subgroup size, as the kernel itself reports it.
    let probe: Vec<Handle> = inputs.iter().map(|b| upload(&mut s, b.clone())).collect();
    run(&mut s, &kernel, [4, 1, 1], &probe, Vec::new());
    let size = bytes_u32(&read(&mut s, &probe[4]))[0];
    assert!(
        size.is_power_of_two() && size <= 128,
        "subgroup size {size}"
    );
    let (got, expected) = both(&mut s, &kernel, [4, 1, 1], inputs, size);
    for b in 1..5 {
        assert_eq!(got[b], expected[b], "buffer {b} at subgroup size {size}");
    }
}
