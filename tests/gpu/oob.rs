//! Reported bounds checks (`BoundsChecks::Reported`): an access outside its
//! array is an error of the launch, naming the kernel, the array and the
//! index, and poisons what the launch wrote (the default in a debug build);
//! under `Checked` (a release build's default) the same access is clamped
//! silently (wgpu's robust access), which is why the option exists.

use compute_runtime::LaunchValidation;
use wgpu_server::prelude::*;

fn reporting() -> DefaultClient {
    WgpuServerOptions::new()
        .bounds_checks(BoundsChecks::Reported)
        .client()
        .expect("adapter")
}

/// `y[i] = x[i] + 1` for `i < n`: `n` is the caller's claim.
fn inc_n() -> Kernel {
    let k = KernelBuilder::new("inc_n", [64, 1, 1]);
    let (x, y) = (k.input(Scalar::U32), k.output(Scalar::U32));
    let n = k.scalar_arg(Scalar::U32);
    let i = k.x(k.global_id());
    k.if_(k.lt(i, n), |k| k.store(y, i, k.add(k.load(x, i), 1u32)));
    k.build().expect("kernel")
}

fn launch_inc(c: &DefaultClient, x: &Handle, y: &Handle, n: u32) {
    let k = inc_n();
    let args = KernelArguments::handles([x, y])
        .with_scalars(k.pack_scalars(&[Lit::U32(n)]).expect("scalars"));
    c.launch(k, CubeCount::x(n.div_ceil(64)), args)
        .expect("launch");
}

fn out_of_bounds(e: &ServerError) -> (KernelArray, u32, u32, u32) {
    match e.root_cause() {
        ServerError::OutOfBoundsAccess {
            kernel,
            array,
            index,
            len,
            count,
        } => {
            assert_eq!(kernel, "inc_n", "{e}");
            (*array, *index, *len, *count)
        }
        other => panic!("expected OutOfBoundsAccess, got {other}"),
    }
}

#[test]
fn an_in_bounds_launch_runs_as_under_the_default_policy() {
    let c = reporting();
    let x = c.create_from_slice(&[1u32, 2, 3, 4]).expect("x");
    let y = c.empty(16).expect("y");
    launch_inc(&c, &x, &y, 4);
    assert_eq!(c.read_vec::<u32>(&y).expect("read"), [2, 3, 4, 5]);
    c.check(&[&y]).expect("trusted");
    c.sync().expect("sync");
}

/// A short output: the stores past its end are an error naming binding 1.
#[test]
fn a_short_output_buffer_is_an_error_not_dropped_writes() {
    let c = reporting();
    let x = c.create_from_slice(&[7u32; 8]).expect("x");
    let y = c.empty(16).expect("y (4 elements)");
    launch_inc(&c, &x, &y, 8);
    let e = c.read_vec::<u32>(&y).expect_err("poisoned");
    let (array, index, len, count) = out_of_bounds(&e);
    assert_eq!(array, KernelArray::Binding(1));
    assert_eq!(len, 4);
    assert!((4..8).contains(&index), "{e}");
    assert_eq!(count, 4, "{e}");
    assert!(c.check(&[&y]).is_err());
    assert!(c.sync().is_err(), "sync reports the launch's failure");
}

/// A short input: the loads past its end (zeros, or a clamped element) are
/// an error naming binding 0.
#[test]
fn a_short_input_buffer_is_an_error_not_zeros() {
    let c = reporting();
    let x = c.create_from_slice(&[1u32, 2]).expect("x (2 elements)");
    let y = c.empty(32).expect("y");
    launch_inc(&c, &x, &y, 8);
    let e = c.read_vec::<u32>(&y).expect_err("poisoned");
    let (array, _, len, count) = out_of_bounds(&e);
    assert_eq!((array, len, count), (KernelArray::Binding(0), 2, 6), "{e}");
}

/// The same short input under `Checked` (a release build's default): the
/// read is Ok, with bytes no input held. What `Reported` turns into an
/// error.
#[test]
fn the_checked_policy_clamps_silently() {
    let c = WgpuServerOptions::new()
        .bounds_checks(BoundsChecks::Checked)
        .client()
        .expect("adapter");
    let x = c.create_from_slice(&[1u32, 2]).expect("x");
    let y = c.empty(32).expect("y");
    launch_inc(&c, &x, &y, 8);
    let got = c.read_vec::<u32>(&y).expect("Ok: the clamp is silent");
    assert_eq!(&got[..2], [2, 3]);
}

/// A debug build reports by default (this suite runs as one in CI; its
/// release build checks, as `the_checked_policy_clamps_silently`).
#[test]
fn the_default_policy_reports_in_a_debug_build() {
    let c = WgpuServerOptions::new().client().expect("adapter");
    let x = c.create_from_slice(&[1u32, 2]).expect("x");
    let y = c.empty(32).expect("y");
    launch_inc(&c, &x, &y, 8);
    let read = c.read_vec::<u32>(&y);
    if cfg!(debug_assertions) {
        out_of_bounds(&read.expect_err("reported"));
    } else {
        assert_eq!(&read.expect("clamped")[..2], [2, 3]);
    }
}

/// Poison follows data: a launch reading the poisoned output is refused
/// with the out-of-bounds launch as its cause.
#[test]
fn work_reading_an_out_of_bounds_launchs_output_is_poisoned_too() {
    let c = reporting();
    let x = c.create_from_slice(&[1u32; 8]).expect("x");
    let y = c.empty(16).expect("y");
    let z = c.empty(16).expect("z");
    launch_inc(&c, &x, &y, 8);
    launch_inc(&c, &y, &z, 4);
    let e = c.read_vec::<u32>(&z).expect_err("poisoned");
    out_of_bounds(&e);
    // A full host write restores y.
    c.write_from_slice(&y, &[0u32; 4]).expect("write");
    assert_eq!(c.read_vec::<u32>(&y).expect("trusted again"), [0; 4]);
}

/// Workgroup-shared arrays are reported by their index.
#[test]
fn a_shared_array_access_out_of_bounds_names_the_shared_array() {
    let c = reporting();
    let k = KernelBuilder::new("inc_n", [8, 1, 1]);
    let y = k.output(Scalar::U32);
    let tile = k.shared(Scalar::U32, 4);
    let i = k.x(k.local_id());
    k.store(tile, i, i);
    k.store(y, i, 1u32);
    let kernel = k.build().expect("kernel");
    let y = c.empty(32).expect("y");
    c.launch(kernel, CubeCount::x(1), KernelArguments::handles([&y]))
        .expect("launch");
    let e = c.read_vec::<u32>(&y).expect_err("poisoned");
    let (array, index, len, count) = out_of_bounds(&e);
    assert_eq!((array, len, count), (KernelArray::Shared(0), 4, 4), "{e}");
    assert!((4..8).contains(&index));
}

/// Atomics on a workgroup array are checked and reported like its loads
/// and stores: the compare-exchange past its end names the array.
#[test]
fn an_atomic_shared_array_access_out_of_bounds_names_the_shared_array() {
    let c = reporting();
    let k = KernelBuilder::new("inc_n", [8, 1, 1]);
    let y = k.output(Scalar::U32);
    let plain = k.shared(Scalar::U32, 8);
    let counts = k.atomic_shared(Scalar::U32, 2);
    let i = k.x(k.local_id());
    k.store(plain, i, i);
    k.atomic_add(counts, 0u32, 1u32);
    let r = k.compare_exchange(counts, i, 0u32, 1u32);
    k.store(y, i, k.y(r));
    let kernel = k.build().expect("kernel");
    let y = c.empty(32).expect("y");
    c.launch(kernel, CubeCount::x(1), KernelArguments::handles([&y]))
        .expect("launch");
    let e = c.read_vec::<u32>(&y).expect_err("poisoned");
    let (array, index, len, count) = out_of_bounds(&e);
    assert_eq!((array, len, count), (KernelArray::Shared(1), 2, 6), "{e}");
    assert!((2..8).contains(&index));
}

/// Each launch has a slot of its own: a bad launch between good ones
/// poisons only its own writes.
#[test]
fn only_the_launch_that_went_out_of_bounds_fails() {
    let c = reporting();
    let x = c.create_from_slice(&[5u32; 8]).expect("x");
    let (a, bad, b) = (
        c.empty(32).expect("a"),
        c.empty(16).expect("bad"),
        c.empty(32).expect("b"),
    );
    launch_inc(&c, &x, &a, 8);
    launch_inc(&c, &x, &bad, 8);
    launch_inc(&c, &x, &b, 8);
    assert_eq!(c.read_vec::<u32>(&a).expect("a"), [6; 8]);
    assert_eq!(c.read_vec::<u32>(&b).expect("b"), [6; 8]);
    out_of_bounds(&c.read_vec::<u32>(&bad).expect_err("bad"));
}

/// A WGSL kernel cannot be instrumented: under the option it runs checked
/// (clamped, not reported) unless it declares its own policy.
#[test]
fn a_wgsl_kernel_without_its_own_policy_runs_checked_under_the_option() {
    let c = reporting();
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
               @compute @workgroup_size(4) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
                   x[id.x] = 1u;
               }";
    let k = WgslKernel::new(
        "one",
        src,
        "main",
        [4, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    let x = c.empty(16).expect("x");
    let args = KernelArguments::handles([&x]);
    let checks = c
        .server()
        .validate_launch(&k, &CubeCount::x(1), &args, c.stream());
    assert_eq!(checks.expect("valid"), AccessChecks::Checked);
    c.launch(k.clone(), CubeCount::x(1), args)
        .expect("runs checked");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), [1; 4]);
    c.launch(
        k.with_bounds_checks(BoundsChecks::Checked),
        CubeCount::x(1),
        KernelArguments::handles([&x]),
    )
    .expect("its own policy");
    assert_eq!(c.read_vec::<u32>(&x).expect("read"), [1; 4]);
}

/// A WGSL kernel that declares the report slot itself reports through it.
#[test]
fn a_wgsl_kernel_declaring_the_report_slot_reports() {
    let c = reporting();
    let src = "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
               @group(1) @binding(0) var<storage, read_write> r: array<atomic<u32>, 4>;
               @compute @workgroup_size(8) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
                   if id.x >= arrayLength(&x) {
                       if atomicAdd(&r[0], 1u) == 0u {
                           atomicStore(&r[1], 0u | (1u << 30u));
                           atomicStore(&r[2], id.x);
                           atomicStore(&r[3], arrayLength(&x));
                       }
                       return;
                   }
                   x[id.x] = 1u;
               }";
    let k = WgslKernel::new(
        "inc_n",
        src,
        "main",
        [8, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_bounds_checks(BoundsChecks::Reported);
    let x = c.empty(16).expect("x");
    c.launch(k, CubeCount::x(1), KernelArguments::handles([&x]))
        .expect("launch");
    let (array, _, len, count) = out_of_bounds(&c.read_vec::<u32>(&x).expect_err("reported"));
    assert_eq!((array, len, count), (KernelArray::Binding(0), 4, 4));
}

/// A captured reporting launch is judged again at every replay (a slot of
/// its own each time): after a full host write restores the output, the
/// next replay's out-of-bounds stores poison it again.
#[test]
fn each_replay_of_a_captured_launch_is_judged_on_its_own() {
    let c = reporting();
    let x = c.create_from_slice(&[1u32; 8]).expect("x");
    let y = c.empty(16).expect("y (4 elements, the launch stores 8)");
    let run = |c: &DefaultClient| launch_inc(c, &x, &y, 8);
    c.graph_prepare().expect("prepare");
    run(&c);
    out_of_bounds(&c.sync().expect_err("the warm-up went out of bounds"));
    let graph = c
        .capture(|| {
            run(&c);
            Ok(())
        })
        .expect("capture");
    for replay in 0..2 {
        c.write_from_slice(&y, &[0u32; 4]).expect("full write");
        assert_eq!(c.read_vec::<u32>(&y).expect("trusted again"), [0; 4]);
        c.replay(graph).expect("replay");
        let e = c
            .read_vec::<u32>(&y)
            .expect_err("the replay went out of bounds");
        assert_eq!(
            out_of_bounds(&e).0,
            KernelArray::Binding(1),
            "replay {replay}: {e}"
        );
    }
}

/// Reporting and non-reporting kernels alternate in one batch (one compute
/// pass): the report slot bound for one launch is no trouble for the next,
/// whose pipeline has no group 1, and the next reporting launch binds its
/// own.
#[test]
fn reporting_and_plain_kernels_share_a_pass() {
    let c = reporting();
    let plain = WgslKernel::new(
        "plain",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;
         @compute @workgroup_size(4) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
             x[id.x] = x[id.x] + 10u;
         }",
        "main",
        [4, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
    .with_bounds_checks(BoundsChecks::Checked);
    let x = c.create_from_slice(&[1u32; 4]).expect("x");
    let y = c.empty(16).expect("y");
    let short = c.empty(8).expect("short");
    launch_inc(&c, &x, &y, 4);
    c.launch(
        plain.clone(),
        CubeCount::x(1),
        KernelArguments::handles([&x]),
    )
    .expect("plain");
    launch_inc(&c, &x, &short, 4);
    c.launch(plain, CubeCount::x(1), KernelArguments::handles([&y]))
        .expect("plain again");
    assert_eq!(c.read_vec::<u32>(&x).expect("x"), [11; 4]);
    assert_eq!(c.read_vec::<u32>(&y).expect("y"), [12; 4]);
    out_of_bounds(&c.read_vec::<u32>(&short).expect_err("short"));
    c.sync().expect_err("the short launch is reported");
}

/// The other ways a launch is encoded: inside a profile window (a timed
/// pass of its own) and with an indirect count. Each still binds its slot.
#[test]
fn profiled_and_indirect_launches_report_too() {
    let c = reporting();
    let x = c.create_from_slice(&[1u32; 8]).expect("x");
    let short = c.empty(8).expect("short");
    c.profile(|| launch_inc(&c, &x, &short, 8))
        .expect("profile window");
    out_of_bounds(&c.read_vec::<u32>(&short).expect_err("profiled launch"));

    let short2 = c.empty(8).expect("short2");
    let count = c.create_from_slice(&[1u32, 1, 1]).expect("count");
    let k = inc_n();
    let args = k.args([&x, &short2], &[Lit::U32(8)]).expect("args");
    c.launch(k, CubeCount::Dynamic(count.binding()), args)
        .expect("indirect launch");
    out_of_bounds(&c.read_vec::<u32>(&short2).expect_err("indirect launch"));
}
