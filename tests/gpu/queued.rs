//! `LaunchMode::Queue` and `compile_queued`.

use crate::common::*;
use compute_runtime::{CubeCount, KernelArguments, LaunchMode, Server, ServerError};
use wgpu_server::{BindingAccess, WgslKernel};

fn queue(s: &mut TestServer, k: WgslKernel, h: &compute_runtime::Handle) {
    let args = KernelArguments::buffers(vec![h.binding()]);
    // SAFETY: the kernels bound-check their accesses.
    unsafe { s.launch(Box::new(k), CubeCount::x(4), args, S0, LaunchMode::Queue) };
}

#[test]
fn queued_launches_compile_in_compile_queued_and_run_in_order() {
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[0; 256]), S0);
    for _ in 0..3 {
        queue(&mut s, inc_kernel(), &h);
    }
    assert_eq!(s.held_launches(), 3);
    assert_eq!(
        s.cached_pipelines(),
        0,
        "nothing compiled inside the launches"
    );
    s.compile_queued();
    assert_eq!(s.held_launches(), 0);
    assert_eq!(s.cached_pipelines(), 1);
    // Once compiled, Queue launches run at once.
    queue(&mut s, inc_kernel(), &h);
    assert_eq!(s.held_launches(), 0);
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("read")),
        vec![4; 256]
    );
}

#[test]
fn any_later_call_encodes_held_launches_first() {
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[10; 256]), S0);
    queue(&mut s, inc_kernel(), &h);
    // A write issued after the queued launch must land after it.
    s.write(
        vec![(h.copy_descriptor(), u32_bytes(&[100; 256]).into())],
        S0,
    );
    assert_eq!(
        bytes_u32(&read(&mut s, &h, S0).expect("read")),
        vec![100; 256]
    );
    queue(&mut s, inc_kernel(), &h);
    // A read on another stream sees the held launch.
    assert_eq!(
        bytes_u32(&read(&mut s, &h, compute_runtime::StreamId(3)).expect("read")),
        vec![101; 256]
    );
}

#[test]
fn a_queued_kernel_that_does_not_compile_poisons_its_writes() {
    let mut s = server();
    let h = upload(&mut s, u32_bytes(&[0; 64]), S0);
    let broken = WgslKernel::new(
        "broken_queued",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
         @compute @workgroup_size(64) fn main() { x[0] = 1.5; }",
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    );
    queue(&mut s, broken, &h);
    s.compile_queued();
    let err = s.flush(S0).expect_err("compile error deferred");
    assert!(
        matches!(err.root_cause(), ServerError::Compilation { .. }),
        "{err}"
    );
    assert!(s.check(vec![h.binding()], S0).is_err());
}
