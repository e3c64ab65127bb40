//! wgpu's loop counter: on every checked module by default, and with
//! `LoopBounding::Unproven` only where the server cannot prove a loop ends
//! (`launch/termination.rs`); the same bytes either way.

use crate::common::*;
use compute_runtime::CubeCount;
use wgpu_server::{BindingAccess, LoopBounding, WgpuServerOptions, WgslKernel};

fn kernel(name: &str, body: &str) -> WgslKernel {
    WgslKernel::new(
        name,
        format!(
            "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
             @compute @workgroup_size(64)\n\
             fn main(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
                 let n = arrayLength(&x);\n\
                 if (id.x >= n) {{ return; }}\n\
                 {body}\n\
             }}"
        ),
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
}

/// Element i becomes 0 + 1 + ... + i, once by a counted loop and once by
/// a loop on data: with `LoopBounding::Unproven` only the second keeps the
/// counter; by default both do. Same bytes either way.
#[test]
fn a_counted_loop_runs_without_the_counter_only_where_asked() {
    for (bounding, counted_keeps) in [(LoopBounding::Every, 1), (LoopBounding::Unproven, 0)] {
        let mut s: TestServer = WgpuServerOptions::new()
            .loop_bounding(bounding)
            .open()
            .expect("adapter");
        let words = 256u32;
        let zeros = vec![0u8; 4 * words as usize];
        let counted = kernel(
            "sum_counted",
            "var t = 0u; for (var i = 0u; i < id.x + 1u; i++) { t += i; } x[id.x] = t;",
        );
        let on_data = kernel(
            "sum_on_data",
            "var t = 0u; var i = 0u; loop { t += i; if (i == id.x) { break; } i += 1u; } x[id.x] = t;",
        );
        let expected: Vec<u32> = (0..words).map(|i| i * (i + 1) / 2).collect();
        for (k, bounded) in [(counted, counted_keeps), (on_data, counted_keeps + 1)] {
            let h = upload(&mut s, zeros.clone(), S0);
            launch(&mut s, k, CubeCount::x(words / 64), &[&h], S0);
            let got = read(&mut s, &h, S0).expect("read");
            assert_eq!(bytes_u32(&got), expected, "{bounding:?}");
            assert_eq!(s.pipelines_with_bounded_loops(), bounded, "{bounding:?}");
        }
    }
}
