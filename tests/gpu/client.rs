//! The typed client over the default server: typed buffers, labels in
//! errors, launches checked at the call, IR and WGSL kernels on one server,
//! profiling and graphs through the client.

use compute_runtime::ManagedMemoryHandle;
use compute_testkit::kernels;
use wgpu_server::prelude::*;

use crate::common::{ADD_WGSL, add_kernel, inc_kernel};

fn client() -> DefaultClient {
    WgpuServerOptions::new().client().expect("adapter")
}

/// `x[i] += 1` for `i < n` (IR, checked bounds by default).
fn inc_ir() -> Kernel {
    let k = KernelBuilder::new("inc_ir", [64, 1, 1]);
    let x = k.output(Scalar::U32);
    let n = k.scalar_arg(Scalar::U32);
    let gid = k.global_id();
    let i = k.x(gid);
    let inside = k.lt(i, n);
    k.if_(inside, |k| {
        let v = k.load(x, i);
        let one = k.u32(1);
        let v = k.add(v, one);
        k.store(x, i, v);
    });
    k.build().expect("kernel")
}

fn scalars(k: &Kernel, args: &[Lit]) -> Vec<u8> {
    k.pack_scalars(args).expect("scalars")
}

#[test]
fn every_pod_type_round_trips() {
    let c = client();
    macro_rules! round_trip {
        ($($t:ty => $v:expr),* $(,)?) => {$(
            let values: Vec<$t> = $v;
            let h = c.create_from_slice(&values).expect("create");
            assert_eq!(h.size as usize, values.len() * std::mem::size_of::<$t>());
            assert_eq!(c.read_vec::<$t>(&h).expect("read"), values, stringify!($t));
        )*};
    }
    round_trip! {
        f32 => vec![0.0, -0.0, 1.5, f32::MAX, f32::MIN_POSITIVE],
        f64 => vec![1e300, -2.5, 0.1],
        i32 => vec![i32::MIN, -1, 0, i32::MAX],
        u32 => vec![0, 1, u32::MAX],
        i64 => vec![i64::MIN, -1, i64::MAX],
        u64 => vec![u64::MAX, 3],
        u8 => vec![1, 2, 3, 4, 5, 6, 7, 8],
        u16 => vec![0x3c00, 0xbc00], // f16 1.0, -1.0 as bits
    }
    // NaN payloads survive the trip bit for bit.
    let nan = f32::from_bits(0x7fc0_1234);
    let h = c.create_from_slice(&[nan]).expect("create");
    assert_eq!(
        c.read_vec::<f32>(&h).expect("read")[0].to_bits(),
        0x7fc0_1234
    );
    // A read as a type whose size does not divide the bytes is an error.
    let odd = c.create_from_slice(&[1u8, 2, 3, 4, 5, 6]).expect("create");
    assert!(c.read_vec::<u32>(&odd).is_err());
}

#[test]
fn ir_and_wgsl_kernels_run_on_one_default_server() {
    let c = client();
    let n = 1000u32;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
    let ha = c.create_from_slice(&a).expect("a");
    let hb = c.create_from_slice(&b).expect("b");
    let ir_out = c.empty(u64::from(n) * 4).expect("ir out");
    let wgsl_out = c.empty(u64::from(n) * 4).expect("wgsl out");
    let ir_add = kernels::elementwise_add(Scalar::F32, 64).expect("ir add");
    let args = KernelArguments::handles([&ha, &hb, &ir_out])
        .with_scalars(scalars(&ir_add, &[Lit::U32(n)]));
    c.launch(ir_add, CubeCount::x(n.div_ceil(64)), args)
        .expect("ir launch");
    c.launch(
        add_kernel(),
        CubeCount::x(n.div_ceil(64)),
        KernelArguments::handles([&ha, &hb, &wgsl_out]),
    )
    .expect("wgsl launch");
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(c.read_vec::<f32>(&ir_out).expect("read"), want);
    assert_eq!(c.read_vec::<f32>(&wgsl_out).expect("read"), want);
    assert!(ADD_WGSL.contains("a[i] + b[i]"));
    // A boxed kernel is seen through.
    let boxed: Box<dyn CubeKernel> = Box::new(inc_kernel());
    let x = c.create_from_slice(&[1u32; 64]).expect("x");
    c.launch(boxed, CubeCount::x(1), KernelArguments::handles([&x]))
        .expect("boxed");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![2; 64]);
}

/// Each mismatch is refused at the call with `Launch { kernel, .. }`, and
/// nothing was enqueued: no output is poisoned and no error waits for the
/// next sync.
#[test]
fn mismatched_launches_are_errors_at_the_call_naming_the_kernel() {
    let c = client();
    let k = inc_ir();
    let x = c.create_from_slice(&[0u32; 64]).expect("x").with_label("x");
    let ok_scalars = scalars(&k, &[Lit::U32(64)]);
    let small = c.create_from_slice(&[0u8; 4]).expect("small");
    let stranger = Handle::new(ManagedMemoryHandle::new(), 16).with_label("stranger");
    let mut past_end = x.clone();
    past_end.size = 1024;
    let cases: Vec<(&str, CubeCount, KernelArguments, &str)> = vec![
        (
            "two buffers for one",
            CubeCount::x(1),
            KernelArguments::handles([&x, &x]).with_scalars(ok_scalars.clone()),
            "declares 1 buffers, the launch passes 2",
        ),
        (
            "no scalars",
            CubeCount::x(1),
            KernelArguments::handles([&x]),
            "takes scalars",
        ),
        (
            "a handle no server knows",
            CubeCount::x(1),
            KernelArguments::handles([&stranger]).with_scalars(ok_scalars.clone()),
            "`stranger`",
        ),
        (
            "a binding past the end of its slice",
            CubeCount::x(1),
            KernelArguments::handles([&past_end]).with_scalars(ok_scalars.clone()),
            "out of bounds",
        ),
        (
            "too many workgroups",
            CubeCount::x(u32::MAX),
            KernelArguments::handles([&x]).with_scalars(ok_scalars.clone()),
            "max_compute_workgroups_per_dimension",
        ),
    ];
    for (what, count, args, expected) in cases {
        let err = c.launch(k.clone(), count, args).expect_err(what);
        assert!(
            matches!(&err, ServerError::Launch { kernel, .. } if kernel == "inc_ir"),
            "{what}: {err:?}"
        );
        let text = err.to_string();
        assert!(text.starts_with("launch of `inc_ir`: "), "{what}: {text}");
        assert!(text.contains(expected), "{what}: {text}");
    }
    // A binding smaller than the module needs (WGSL declaring a fixed
    // array of 4 words).
    let fixed = WgslKernel::new(
        "fixed",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32, 4>;
         @compute @workgroup_size(1) fn main() { x[3] = 1u; }",
        "main",
        [1, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let err = c
        .launch(fixed, CubeCount::x(1), KernelArguments::handles([&small]))
        .expect_err("too small");
    assert!(
        matches!(
            err.root_cause(),
            ServerError::BindingTooSmall { min: 16, .. }
        ),
        "{err}"
    );
    // A kernel that does not compile: the compiler's diagnostic, at the call.
    let broken = WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
         @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
        "main",
        [1, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let err = c
        .launch(broken, CubeCount::x(1), KernelArguments::handles([&x]))
        .expect_err("does not compile");
    assert!(
        matches!(err.root_cause(), ServerError::Compilation { kernel, .. } if kernel == "broken"),
        "{err}"
    );
    // Nothing ran, nothing is poisoned, nothing is owed to the stream.
    c.check(&[&x]).expect("x untouched");
    c.sync().expect("no deferred error");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![0; 64]);
    // And the same kernel with fitting arguments runs.
    c.launch(
        k,
        CubeCount::x(1),
        KernelArguments::handles([&x]).with_scalars(ok_scalars),
    )
    .expect("fits");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![1; 64]);
}

#[test]
fn only_bounds_checked_kernels_launch_safely() {
    let c = client();
    let x = c.create_from_slice(&[0u32; 64]).expect("x");
    let unchecked = inc_kernel().with_bounds_checks(BoundsChecks::Unchecked);
    let err = c
        .launch(
            unchecked.clone(),
            CubeCount::x(1),
            KernelArguments::handles([&x]),
        )
        .expect_err("unchecked refused");
    assert!(err.to_string().contains("launch_unchecked"), "{err}");
    // SAFETY: `inc` checks `id.x < arrayLength(&x)` itself.
    unsafe { c.launch_unchecked(unchecked, CubeCount::x(1), KernelArguments::handles([&x])) }
        .expect("unsafe launch");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![1; 64]);

    // A server compiling everything unchecked has no safe launches.
    let unchecked_server = WgpuServerOptions::new()
        .compilation(WgpuCompilationOptions {
            bounds_checks: BoundsChecks::Unchecked,
            ..Default::default()
        })
        .client()
        .expect("adapter");
    let y = unchecked_server.create_from_slice(&[0u32; 64]).expect("y");
    let args = KernelArguments::handles([&y]).with_scalars(scalars(&inc_ir(), &[Lit::U32(64)]));
    assert!(
        unchecked_server
            .launch(inc_ir(), CubeCount::x(1), args)
            .is_err()
    );
}

#[test]
fn errors_about_labelled_buffers_name_the_label() {
    let c = client();
    let weights = c
        .create_from_slice(&[1u32; 64])
        .expect("w")
        .with_label("weights");
    let id = weights.memory.id();
    // Poison it with a launch that fails inside the server (a kernel that
    // does not compile, through the raw server so it is enqueued).
    let broken = WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
         @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
        "main",
        [1, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    // SAFETY: it does not compile, so nothing runs.
    unsafe {
        c.server().launch(
            Box::new(broken),
            CubeCount::x(1),
            KernelArguments::handles([&weights]),
            c.stream(),
            LaunchMode::Execute,
        );
    }
    for err in [
        c.check(&[&weights]).expect_err("check"),
        c.read_vec::<u32>(&weights).expect_err("read"),
    ] {
        let text = err.to_string();
        assert!(
            text.contains(&format!("`weights` (MemoryId({}))", id.0)),
            "{text}"
        );
    }
    // A write past the end names it too, and is refused before it is
    // enqueued.
    let err = c
        .write_from_slice(&weights, &[0u32; 65])
        .expect_err("too long");
    assert!(err.to_string().contains("`weights`"), "{err}");
    // A full write trusts it again, and the label outlives the handle, for
    // errors returned after it dropped.
    c.write_from_slice(&weights, &[2u32; 64]).expect("rewrite");
    assert_eq!(c.read_vec::<u32>(&weights).expect("read"), vec![2; 64]);
    let _ = c.sync();
    drop(weights);
    assert_eq!(id.label().as_deref(), Some("weights"));
}

#[test]
fn profile_and_graph_through_the_client() {
    let c = client();
    let k = inc_ir();
    let x = c.create_from_slice(&[0u32; 256]).expect("x");
    let args = || KernelArguments::handles([&x]).with_scalars(scalars(&k, &[Lit::U32(256)]));
    let (launched, took) = c
        .profile(|| c.launch(k.clone(), CubeCount::x(4), args()))
        .expect("profile");
    launched.expect("launch");
    assert!(took > std::time::Duration::ZERO);

    c.graph_prepare().expect("prepare");
    c.launch(k.clone(), CubeCount::x(4), args())
        .expect("warm-up");
    let graph = c
        .capture(|| c.launch(k.clone(), CubeCount::x(4), args()))
        .expect("capture");
    // Captured, not run: 2 so far.
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![2; 256]);
    // New inputs, then replay against them.
    c.write_from_slice(&x, &[10u32; 256]).expect("new input");
    c.replay(graph).expect("replay");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), vec![11; 256]);
    // A capture whose work fails is dropped and its error returned.
    let err = c
        .capture(|| c.launch(k.clone(), CubeCount::x(4), KernelArguments::handles([&x])))
        .expect_err("bad capture");
    assert!(matches!(err, ServerError::Launch { .. }), "{err}");
    c.graph_destroy(graph);
    c.sync().expect("sync");
    assert!(c.memory_report().bytes_in_use() >= 256 * 4);
}

/// A device that cannot be opened is an error from `load`, not a panic,
/// and registers nothing: the next `load` of a real device still works.
#[test]
fn loading_a_device_that_does_not_exist_is_an_error() {
    let err = ComputeClient::<DefaultServer>::load(DeviceId(99)).expect_err("no device 99");
    assert!(matches!(err, ServerError::DeviceLost { .. }), "{err}");
    let err = ComputeClient::<DefaultServer>::load(DeviceId(99)).expect_err("still none");
    assert!(matches!(err, ServerError::DeviceLost { .. }), "{err}");
    let client = ComputeClient::<DefaultServer>::load(DeviceId(0)).expect("device 0");
    let x = client.create_from_slice(&[3u32]).expect("buffer");
    assert_eq!(client.read_vec::<u32>(&x).expect("read"), [3]);
}

/// A write the server refuses at the call comes back from the client's
/// `write` itself, and, having touched nothing, leaves the handle's bytes
/// and trust as they were, with nothing left to report later.
#[test]
fn a_write_refused_at_the_call_is_returned_and_leaves_the_handle_as_it_was() {
    let client = client();
    let x = client.create_from_slice(&[1u32, 2]).expect("x");
    // Three bytes of an eight-byte slice end off a word boundary.
    let err = client.write(&x, vec![9u8; 3]).expect_err("misaligned");
    assert!(matches!(err, ServerError::InvalidArgument { .. }), "{err}");
    assert_eq!(client.read_vec::<u32>(&x).expect("untouched"), [1, 2]);
    client.sync().expect("nothing deferred");
}
