//! The single-pass scan under every bounds-check policy and loop bounding:
//! the same bytes each way. One launch sequence per configuration (sizes of
//! more and fewer tiles in turn over one state, never cleared), every
//! configuration run before the test fails, so one failing run on a device
//! says which policies go wrong (an H100 found the `Reported` debug default
//! wrong at a partial tile, at da1d02d).

use compute_runtime::BoundsChecks;
use compute_testkit::{Rng, kernels};
use wgpu_server::{IrCompiler, LoopBounding, WgpuServer, WgpuServerOptions};

use crate::ir::upload;
use crate::ir_kernels::{host_exclusive, single_pass_with};

/// The first wrong output of each launch of the sequence, if any.
fn sequence(s: &mut WgpuServer<IrCompiler>, k: &compute_ir::Kernel, per: u32) -> Vec<String> {
    let tile = kernels::scan_single_tile(per) as usize;
    let state = upload(
        s,
        vec![0; 4 * kernels::scan_single_state_words(300) as usize],
    );
    let mut r = Rng::spread(16);
    let mut wrong = Vec::new();
    for n in [300 * tile, 4, 3 * tile + 4 * 37, 41 * tile - 8] {
        let x: Vec<u32> = (0..n).map(|_| r.u32()).collect();
        let tiles = (n as u32).div_ceil(tile as u32);
        for launch in 0..3 {
            let got = single_pass_with(s, k, &x, &state, tiles);
            let want = host_exclusive(&x);
            if let Some(at) = got.iter().zip(&want).position(|(g, w)| g != w) {
                let bad = got.iter().zip(&want).filter(|(g, w)| g != w).count();
                wrong.push(format!(
                    "n {n}, launch {launch}: first wrong at {at} ({bad} wrong)"
                ));
            }
        }
    }
    wrong
}

#[test]
fn the_single_pass_scan_is_the_same_under_every_check_policy() {
    let mut failures = Vec::new();
    for bounding in [LoopBounding::Unproven, LoopBounding::Every] {
        let mut s: WgpuServer<IrCompiler> = WgpuServerOptions::new()
            .loop_bounding(bounding)
            .open()
            .expect("adapter");
        if !crate::common::has_feature(s.device(), wgpu::Features::SUBGROUP, "the single-pass scan")
        {
            return;
        }
        for checks in [BoundsChecks::Checked, BoundsChecks::Reported] {
            for (per, limit) in [(8u32, 4096u32), (4, 1)] {
                let k = kernels::scan_single_pass(per, limit)
                    .expect("kernel")
                    .with_bounds_checks(checks);
                for w in sequence(&mut s, &k, per) {
                    failures.push(format!(
                        "{bounding:?}, {checks:?}, per {per}, limit {limit}: {w}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
