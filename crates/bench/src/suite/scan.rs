//! The scan's figure and its probes: the IR single pass against its twin,
//! or against another design or one step of it on the raw side.

use compute_ir::{IrError, Lit};
use compute_testkit::bytes::{bytes_u32, u32_bytes};
use compute_testkit::kernels;

use super::job::{Job, Launch, RawLaunch};
use super::jobs::{launch, words};
use super::{Check, Measured};
use crate::suite_wgsl as wgsl;

/// The three scan launches: `out` = the exclusive scan of `input`'s first
/// `len` words, through `sums` (one per scan block).
pub(super) fn scan_launches(
    input: usize,
    sums: usize,
    out: usize,
    len: u32,
) -> Result<Vec<Launch>, IrError> {
    let blocks = len.div_ceil(kernels::SCAN_BLOCK);
    Ok(vec![
        launch(
            kernels::scan_reduce()?,
            wgsl::scan_reduce(),
            [blocks, 1, 1],
            &[input, sums],
            &[Lit::U32(len / 4)],
        )?,
        launch(
            kernels::scan_spine()?,
            wgsl::scan_spine(),
            [1, 1, 1],
            &[sums],
            &[Lit::U32(blocks)],
        )?,
        launch(
            kernels::scan_down()?,
            wgsl::scan_down(),
            [blocks, 1, 1],
            &[input, sums, out],
            &[Lit::U32(len / 4)],
        )?,
    ])
}

/// The figure's single pass: rows per invocation and polls before a
/// fallback reduction.
pub(super) const SCAN_ROWS: u32 = 16;
pub(super) const SCAN_LIMIT: u32 = 256;

/// The raw side of a scan job: the IR kernel's WGSL twin, another
/// single pass (a probe), the three launches (a probe), or the single
/// pass's loads and stores alone (a copy: a probe of the bound).
#[derive(Clone, Copy)]
pub(super) enum ScanRaw {
    Twin,
    SinglePass {
        per: u32,
        limit: u32,
        walk: crate::probe_scan::LookBack,
    },
    ThreeLaunches,
    Copy,
}

pub(super) fn scan(cpu: bool) -> Result<Measured, IrError> {
    scan_with(cpu, "kernel.scan_gbps", ScanRaw::Twin)
}

/// The scan's job: the IR single pass (`kernels::scan_single_pass`) on
/// buffers `[x, state, y]`, and `raw` on the raw side.
pub(super) fn scan_with(cpu: bool, name: &'static str, raw: ScanRaw) -> Result<Measured, IrError> {
    let n: usize = if cpu { 1 << 20 } else { 1 << 26 };
    let x = words(25, n);
    let per = SCAN_ROWS;
    let tiles = (n as u32).div_ceil(kernels::scan_single_tile(per));
    let scalars = [Lit::U32((n / 4) as u32), Lit::U32(tiles)];
    let l = launch(
        kernels::scan_single_pass(per, SCAN_LIMIT)?,
        crate::probe_scan::single_pass(per, SCAN_LIMIT),
        [tiles, 1, 1],
        &[0, 1, 2],
        &scalars,
    )?;
    let mut buffers = vec![
        u32_bytes(&x),
        vec![0; 4 * kernels::scan_single_state_words(tiles) as usize],
        vec![0; n * 4],
    ];
    let raw_check = scan_raw_check(raw, &x);
    let raw = match raw {
        ScanRaw::Twin => None,
        ScanRaw::SinglePass { per, limit, walk } => {
            let tiles = (n as u32).div_ceil(kernels::scan_single_tile(per));
            let state = 4 * kernels::scan_single_state_words(tiles) as usize;
            buffers.push(vec![0; state]);
            let wgsl = crate::probe_scan::single_pass_with(per, limit, walk);
            Some(vec![tiled(wgsl, n, tiles, vec![0, 3, 2])])
        }
        ScanRaw::Copy => Some(vec![tiled(
            crate::probe_scan::copy(per),
            n,
            tiles,
            vec![0, 2],
        )]),
        ScanRaw::ThreeLaunches => {
            buffers.push(vec![
                0;
                4 * (n as u32).div_ceil(kernels::SCAN_BLOCK) as usize
            ]);
            let three = scan_launches(0, 3, 2, n as u32)?;
            Some(three.into_iter().map(|l| l.raw).collect())
        }
    };
    let job = Job {
        buffers,
        launches: vec![l],
        raw,
    };
    let check: Check = Box::new(move |read| scanned(&x, &bytes_u32(&read(2)), x.len()));
    Ok(Measured {
        name,
        unit: format!(
            "GB/s moved, 8 B/element (read, written), exclusive scan of {n} u32 (higher is better)"
        ),
        baseline: "the same single pass handwritten in WGSL (probe_scan::single_pass)",
        job,
        work: 8.0 * n as f64,
        scale: 1e9,
        reps: if cpu { 2 } else { 50 },
        check,
        raw_check,
    })
}

/// A raw launch of `tiles` workgroups over `n` words in the single pass's
/// layout: the scalars its WGSL reads (`n4`, `tiles`, padding).
fn tiled(wgsl: String, n: usize, tiles: u32, bufs: Vec<usize>) -> RawLaunch {
    let scalars = [(n / 4) as u32, tiles, 0, 0];
    RawLaunch {
        wgsl,
        groups: [tiles, 1, 1],
        bufs,
        scalars: scalars.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// `y` is `x`'s exclusive scan restarted every `part` elements.
fn scanned(x: &[u32], y: &[u32], part: usize) -> Result<(), String> {
    for (p, (x, y)) in x.chunks(part).zip(y.chunks(part)).enumerate() {
        let mut run = 0u32;
        for (i, (&v, &got)) in x.iter().zip(y).enumerate() {
            if got != run {
                let i = p * part + i;
                return Err(format!("element {i}: {got}, the host's {run}"));
            }
            run = run.wrapping_add(v);
        }
    }
    Ok(())
}

/// The check of a probe's raw side that computes another thing than the
/// scan: a copy, or each tile's scan alone.
fn scan_raw_check(raw: ScanRaw, x: &[u32]) -> Option<Check> {
    let x = x.to_vec();
    match raw {
        ScanRaw::Copy => Some(Box::new(move |read| {
            match bytes_u32(&read(2)).iter().zip(&x).position(|(a, b)| a != b) {
                None => Ok(()),
                Some(i) => Err(format!("element {i} is not the input's")),
            }
        })),
        ScanRaw::SinglePass {
            per,
            walk: crate::probe_scan::LookBack::Skipped,
            ..
        } => {
            let tile = kernels::scan_single_tile(per) as usize;
            Some(Box::new(move |read| {
                scanned(&x, &bytes_u32(&read(2)), tile)
            }))
        }
        ScanRaw::Twin | ScanRaw::SinglePass { .. } | ScanRaw::ThreeLaunches => None,
    }
}
