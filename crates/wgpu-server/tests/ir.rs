//! The IR backend on the real adapter: the builder's kernels against host
//! computations, and random programs against the CPU interpreter.

use compute_ir::random::{Config, FloatOps};
use compute_ir::{Kernel, Lit, Scalar, interp, kernels, random};
use compute_runtime::{
    Bytes, CubeCount, DeviceId, Handle, KernelArguments, LaunchMode, ManagedMemoryHandle, Server,
    StreamId,
};
use wgpu_server::{IrCompiler, WgpuServer};

type IrServer = WgpuServer<IrCompiler>;
const S: StreamId = StreamId(0);

fn server() -> IrServer {
    IrServer::try_init(DeviceId(0)).expect("adapter")
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Non-zero floats in [-4, 4).
    fn f32(&mut self) -> f32 {
        let v = (self.next() % 8000) as f32 / 1000.0 - 4.0;
        if v == 0.0 { 0.5 } else { v }
    }
}

fn upload(s: &mut IrServer, data: Vec<u8>) -> Handle {
    let size = data.len().max(4) as u64;
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), size, S).expect("alloc");
    let h = Handle::new(m, size);
    let mut data = data;
    data.resize(size as usize, 0);
    s.write(vec![(h.copy_descriptor(), Bytes::from(data))], S);
    h
}

fn run(s: &mut IrServer, kernel: &Kernel, wg: [u32; 3], bufs: &[Handle], scalars: Vec<u8>) {
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

fn read(s: &mut IrServer, h: &Handle) -> Vec<u8> {
    let mut out = futures::executor::block_on(s.read(vec![h.copy_descriptor()], S)).expect("read");
    out.remove(0).to_vec()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn to_f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn to_u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn elementwise_add_matches_the_host() {
    let mut s = server();
    let k = kernels::elementwise_add(Scalar::F32, 64).expect("kernel");
    let n = 10_000u32;
    let mut r = Rng(7);
    let a: Vec<f32> = (0..n).map(|_| r.f32()).collect();
    let b: Vec<f32> = (0..n).map(|_| r.f32()).collect();
    let (ha, hb) = (upload(&mut s, f32s(&a)), upload(&mut s, f32s(&b)));
    let hc = upload(&mut s, vec![0; n as usize * 4]);
    let scalars = k.pack_scalars(&[Lit::U32(n)]).expect("scalars");
    run(
        &mut s,
        &k,
        [n.div_ceil(64), 1, 1],
        &[ha, hb, hc.clone()],
        scalars,
    );
    let c = to_f32s(&read(&mut s, &hc));
    let expected: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(c, expected);
}

#[test]
fn workgroup_reduction_with_shared_memory_matches_the_host() {
    let mut s = server();
    let size = 256u32;
    let k = kernels::workgroup_sum(Scalar::U32, size).expect("kernel");
    let n = 5000u32;
    let mut r = Rng(11);
    let a: Vec<u32> = (0..n).map(|_| (r.next() % 1000 + 1) as u32).collect();
    let groups = n.div_ceil(size);
    let ha = upload(&mut s, u32s(&a));
    let hout = upload(&mut s, vec![0; groups as usize * 4]);
    let scalars = k.pack_scalars(&[Lit::U32(n)]).expect("scalars");
    run(&mut s, &k, [groups, 1, 1], &[ha, hout.clone()], scalars);
    let got = to_u32s(&read(&mut s, &hout));
    let expected: Vec<u32> = a.chunks(size as usize).map(|c| c.iter().sum()).collect();
    assert_eq!(got, expected);
}

#[test]
fn atomic_histogram_matches_the_host() {
    let mut s = server();
    let k = kernels::histogram(64).expect("kernel");
    let (n, bins) = (20_000u32, 37u32);
    let mut r = Rng(13);
    let values: Vec<u32> = (0..n).map(|_| (r.next() % 100_000 + 1) as u32).collect();
    let hv = upload(&mut s, u32s(&values));
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
    assert_eq!(to_u32s(&read(&mut s, &hh)), expected);
}

#[test]
fn tiled_matmul_matches_the_host() {
    let mut s = server();
    let k = kernels::tiled_matmul().expect("kernel");
    let (m, n, kk) = (67u32, 45u32, 83u32);
    let mut r = Rng(17);
    let a: Vec<f32> = (0..m * kk).map(|_| r.f32()).collect();
    let b: Vec<f32> = (0..kk * n).map(|_| r.f32()).collect();
    let (ha, hb) = (upload(&mut s, f32s(&a)), upload(&mut s, f32s(&b)));
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
    let c = to_f32s(&read(&mut s, &hc));
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

/// Random well-typed programs (integers, bools and correctly rounded float
/// ops; loops, branches, shared memory with barriers, atomics) give the same
/// bytes on the device and in the interpreter: exact, 0 ULP.
#[test]
fn random_programs_match_the_interpreter_bit_for_bit() {
    let mut s = server();
    let cfg = Config {
        statements: 16,
        depth: 3,
        floats: FloatOps::Exact,
        vectors: true,
        barriers: true,
        atomics: true,
    };
    let cases = 48u64;
    for seed in 1..=cases {
        let p = random::program(seed, &cfg);
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
            assert_eq!(got, expected[i], "seed {seed}, buffer {i}");
        }
    }
    futures::executor::block_on(s.sync(vec![], S)).expect("no deferred failure");
}
