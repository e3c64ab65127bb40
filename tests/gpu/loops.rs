//! wgpu's loop counter and index clamps: on every checked module with
//! `LoopBounding::Every`, and by default (`Unproven`) only where the server cannot
//! prove every loop ends (`launch/termination.rs`) and every index outside
//! a buffer is in range (`launch/indices.rs`, on a device whose driver
//! bounds buffer accesses); the same bytes either way.

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
/// counter; with `Every` both do. Same bytes either way.
#[test]
fn a_counted_loop_runs_without_the_counter_only_where_asked() {
    for bounding in [LoopBounding::Every, LoopBounding::Unproven] {
        let mut s: TestServer = WgpuServerOptions::new()
            .loop_bounding(bounding)
            .open()
            .expect("adapter");
        let counted_keeps = keeps(&s, bounding);
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

/// Whether a module both proofs accept keeps the checks on `s`.
fn keeps(s: &TestServer, bounding: LoopBounding) -> usize {
    usize::from(bounding == LoopBounding::Every || !s.driver_bounds_buffers())
}

/// A register tile indexed by two counted loops (`t[i * 4 + j]`) is proven
/// in range and loses the clamps; the same tile indexed by data keeps them,
/// and an index past the end still reads the last element (wgpu's clamp),
/// not whatever lies beyond.
#[test]
fn a_tile_indexed_by_counted_loops_drops_the_clamps_and_one_indexed_by_data_keeps_them() {
    for bounding in [LoopBounding::Every, LoopBounding::Unproven] {
        let mut s: TestServer = WgpuServerOptions::new()
            .loop_bounding(bounding)
            .open()
            .expect("adapter");
        let proven_keeps = keeps(&s, bounding);
        let words = 64u32;
        let tile = kernel(
            "tile_counted",
            "var t: array<u32, 16>;\n\
             for (var i = 0u; i < 4u; i++) { for (var j = 0u; j < 4u; j++) { t[i * 4u + j] = i * 4u + j + id.x; } }\n\
             var sum = 0u; for (var k = 0u; k < 16u; k++) { sum += t[k]; } x[id.x] = sum;",
        );
        let on_data = kernel(
            "tile_on_data",
            "var t: array<u32, 16>;\n\
             for (var k = 0u; k < 16u; k++) { t[k] = k + 100u; }\n\
             x[id.x] = t[x[id.x]];",
        );
        let h = upload(&mut s, vec![0u8; 4 * words as usize], S0);
        launch(&mut s, tile, CubeCount::x(1), &[&h], S0);
        let got = read(&mut s, &h, S0).expect("read");
        let expected: Vec<u32> = (0..words).map(|i| 120 + 16 * i).collect();
        assert_eq!(bytes_u32(&got), expected, "{bounding:?}");
        assert_eq!(
            s.pipelines_with_bounded_loops(),
            proven_keeps,
            "{bounding:?}"
        );

        // Indices 0..63 into 16 elements: 16 and above clamp to the last.
        let indices: Vec<u8> = (0..words).flat_map(|i| i.to_le_bytes()).collect();
        let h = upload(&mut s, indices, S0);
        launch(&mut s, on_data, CubeCount::x(1), &[&h], S0);
        let got = read(&mut s, &h, S0).expect("read");
        let expected: Vec<u32> = (0..words).map(|i| 100 + i.min(15)).collect();
        assert_eq!(bytes_u32(&got), expected, "{bounding:?}");
        assert_eq!(
            s.pipelines_with_bounded_loops(),
            proven_keeps + 1,
            "{bounding:?}"
        );
    }
}
