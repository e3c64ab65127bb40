//! The MPI collective figures: `cargo xtask mpi-bench` runs this under
//! `mpirun -np 3` (feature `mpi`). Every process opens its own server as
//! device `world_rank` (lavapipe on CI) and joins one communicator through
//! MPI.
//!
//! - `collective.mpi_all_reduce_<size>_busbw_gbps`: an f32 sum of `size`
//!   bytes per rank through the servers (`all_reduce` with
//!   `ComputeWait::Wait`, then `sync`: the device-to-host staging, the
//!   descriptor exchange, `MPI_Allreduce`, the upload of the result), as
//!   NCCL's bus bandwidth: `size * 2 (n - 1) / n / time`;
//! - baseline `raw.mpi_allreduce_<size>_busbw_gbps`: the same bytes done by
//!   hand on the same device, in the same steps (the default chunk size):
//!   the raw host-staged loop of `raw_collective.rs` (each step copied down
//!   into mapped staging, a few steps in flight, the result of each step
//!   filled into mapped upload memory and copied up without waiting),
//!   whose combining step is `MPI_Allreduce` of the step's mapped bytes
//!   (rsmpi, `MPI_SUM` on `MPI_FLOAT`).
//!
//! Each round starts at an `MPI_Barrier`; a round's time is the slowest
//! rank's; the figure is the median of 11 interleaved rounds (3 with
//! `--quick`, which also measures only 1 and 64 MiB). Rank 0 prints
//! the table and writes `--out` (default `target/bench/report-mpi.json`),
//! and merges its figures into the report named by `COMPUTE_BENCH_MERGE`
//! when set (replacing figures of the same name).

#[path = "chart.rs"]
#[allow(dead_code)]
mod chart;
#[path = "harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "raw.rs"]
#[allow(dead_code)]
mod raw;
#[path = "raw_collective.rs"]
#[allow(dead_code)]
mod raw_collective;
#[path = "report.rs"]
#[allow(dead_code)]
mod report;
#[path = "shaders.rs"]
#[allow(dead_code)]
mod shaders;
#[path = "workers.rs"]
#[allow(dead_code)]
mod workers;

use std::cell::RefCell;
use std::time::{Duration, Instant};

use compute_collective::mpi as cmpi;
use compute_runtime::{
    ComputeWait, DType, DeviceId, Reduction, Server, ServerCommunication, ServerError,
};
use mpi::collective::SystemOperation;
use mpi::traits::*;
use serde_json::Value;
use wgpu_server::{CollectiveTransport, WgpuServer, WgpuServerOptions, WgslPassthrough};

use harness::{Options, STREAM, alloc, interleaved, sync};
use report::Figure;

type S = WgpuServer<WgslPassthrough>;

const MPI_WAIT: Duration = Duration::from_secs(120);

/// (figure, baseline, bytes per rank)
const SIZES: [(&str, &str, usize); 4] = [
    (
        "collective.mpi_all_reduce_1mib_busbw_gbps",
        "raw.mpi_allreduce_1mib_busbw_gbps",
        1 << 20,
    ),
    (
        "collective.mpi_all_reduce_4mib_busbw_gbps",
        "raw.mpi_allreduce_4mib_busbw_gbps",
        4 << 20,
    ),
    (
        "collective.mpi_all_reduce_16mib_busbw_gbps",
        "raw.mpi_allreduce_16mib_busbw_gbps",
        16 << 20,
    ),
    (
        "collective.mpi_all_reduce_64mib_busbw_gbps",
        "raw.mpi_allreduce_64mib_busbw_gbps",
        64 << 20,
    ),
];

fn invalid(reason: String) -> ServerError {
    ServerError::InvalidArgument { reason }
}

fn main() -> Result<(), ServerError> {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() && std::env::var_os("PMI_SIZE").is_none()
    {
        println!("mpi_bench: not started by mpirun; run `cargo xtask mpi-bench`.");
        return Ok(());
    }
    let mut o = Options::from_args();
    if o.out == "target/bench/report.json" {
        o.out = "target/bench/report-mpi.json".into();
    }
    let info = cmpi::init(MPI_WAIT)?;
    let me = cmpi::local_device(0)?;
    let mut s: S = WgpuServerOptions::new()
        .device_id(me)
        .adapter(0)
        .transport(CollectiveTransport::Mpi)
        .open()?;
    let ids: Vec<DeviceId> = (0..info.size)
        .filter_map(|p| info.layout.device(p, 0))
        .collect();
    s.comm_init(ids.clone())?;
    let a = Server::utilities(&s).adapter.clone();
    if info.rank == 0 {
        println!(
            "adapter: {} ({}, {}, {} {}); {} processes",
            a.name, a.backend, a.device_type, a.driver, a.driver_info, info.size
        );
    }
    let mut figures = Vec::new();
    for (name, baseline, size) in SIZES {
        if !o.wants(name) && !o.wants(baseline) {
            continue;
        }
        if o.quick && size != 64 << 20 && size != 1 << 20 {
            continue;
        }
        let (v, b) = measure(&mut s, &ids, &o, info.size, size)?;
        figures.push(Figure::new(
            name,
            v,
            "GB/s busbw (higher is better)",
            baseline,
            b,
        ));
    }
    if info.rank == 0 {
        report::print_table(&figures);
        let json = report::to_json(&a, o.quick, &figures);
        write_json(&o.out, &json)?;
        println!("\nwrote {}", o.out);
        if let Ok(merge) = std::env::var("COMPUTE_BENCH_MERGE") {
            merge_into(&merge, &json)?;
            println!("merged {} figures into {merge}", figures.len());
        }
    }
    drop(s);
    cmpi::finalize(MPI_WAIT)
}

/// Medians of the server's and the raw loop's bus bandwidth, in GB/s.
fn measure(
    s: &mut S,
    ids: &[DeviceId],
    o: &Options,
    ranks: usize,
    size: usize,
) -> Result<(f64, f64), ServerError> {
    // More rounds than the single-process figures: three processes on
    // shared cores make each round noisier.
    let rounds = o.rounds(3, 11);
    let count = size / 4;
    let data: Vec<f32> = (0..count).map(|i| (i % 251) as f32).collect();
    let bytes = f32s_as_bytes(&data).to_vec();
    let src = alloc(s, size as u64)?;
    s.write(vec![(src.copy_descriptor(), bytes.clone().into())], STREAM);
    let dst = alloc(s, size as u64)?;
    sync(s)?;
    let devices = [(s.device().clone(), s.queue().clone())];
    let chunk = (compute_collective::DEFAULT_CHUNK_BYTES).min(size) as u64;
    let mut raw = raw_collective::RawGroup::new(&devices, size as u64, chunk, |_| bytes.clone());
    // The step's input as f32 (mapped ranges are word-aligned; a copy if not).
    let mut step_in = Vec::<f32>::new();
    let world = mpi::topology::SimpleCommunicator::world();
    let busbw = |secs: f64| size as f64 * 2.0 * (ranks as f64 - 1.0) / ranks as f64 / secs / 1e9;
    let failed = RefCell::new(None::<ServerError>);
    let cell = RefCell::new(&mut *s);
    // Warm-up: one of each.
    let ours = || -> f64 {
        let mut s = cell.borrow_mut();
        let t = slowest(|| {
            s.all_reduce(
                src.binding(),
                dst.binding(),
                Reduction::sum(DType::F32),
                STREAM,
                ids.to_vec(),
                ComputeWait::Wait,
            )?;
            sync(&mut s)
        });
        match t {
            Ok(secs) => busbw(secs),
            Err(e) => {
                failed.borrow_mut().get_or_insert(e);
                f64::NAN
            }
        }
    };
    let mut by_hand = || -> f64 {
        let t = slowest(|| {
            raw.run_with(size as u64, 1, |parts, out| {
                let Some(part) = parts.first() else {
                    return;
                };
                // SAFETY (both casts): every byte pattern is a valid f32;
                // `align_to` gives the aligned middle only.
                let input: &[f32] = match unsafe { part.align_to::<f32>() } {
                    (&[], words, &[]) => words,
                    _ => {
                        step_in.resize(part.len() / 4, 0.0);
                        f32s_as_bytes_mut(&mut step_in).copy_from_slice(part);
                        &step_in
                    }
                };
                if let (&mut [], words, &mut []) = unsafe { out.align_to_mut::<f32>() } {
                    world.all_reduce_into(input, words, SystemOperation::sum());
                }
            });
            Ok(())
        });
        match t {
            Ok(secs) => busbw(secs),
            Err(e) => {
                failed.borrow_mut().get_or_insert(e);
                f64::NAN
            }
        }
    };
    ours();
    by_hand();
    let (v, b) = interleaved(rounds, ours, by_hand);
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    // Both did the sum: spot-check the server's result.
    let got =
        futures::executor::block_on(cell.into_inner().read(vec![dst.copy_descriptor()], STREAM))?;
    let want = (data[count - 1] * ranks as f32).to_le_bytes();
    let last = got
        .first()
        .map(|b| b[size - 4..].to_vec())
        .unwrap_or_default();
    if last != want {
        return Err(invalid(format!(
            "the all-reduce result is wrong: {last:?}, want {want:?}"
        )));
    }
    Ok((v, b))
}

/// Runs `f` between barriers; the slowest rank's seconds.
fn slowest(f: impl FnOnce() -> Result<(), ServerError>) -> Result<f64, ServerError> {
    cmpi::barrier(MPI_WAIT)?;
    let t = Instant::now();
    f()?;
    let mine = t.elapsed().as_secs_f64();
    let all = cmpi::gather(mine.to_le_bytes().to_vec(), MPI_WAIT)?;
    Ok(all
        .iter()
        .filter_map(|b| b.as_slice().try_into().ok().map(f64::from_le_bytes))
        .fold(mine, f64::max))
}

fn f32s_as_bytes(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and every byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn f32s_as_bytes_mut(v: &mut [f32]) -> &mut [u8] {
    // SAFETY: as above; every byte pattern is also a valid f32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

fn write_json(path: &str, json: &Value) -> Result<(), ServerError> {
    let p = std::path::Path::new(path);
    if let Some(dir) = p.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let text = serde_json::to_string_pretty(json)
        .map_err(|e| invalid(format!("serializing the report: {e}")))?;
    std::fs::write(p, text + "\n").map_err(|e| invalid(format!("writing {path}: {e}")))?;
    if let Ok(svg) = chart::svg_of_report(json) {
        let _ = std::fs::write(p.with_extension("svg"), svg);
    }
    Ok(())
}

/// `ours`' figures into the report at `path` (replacing those of the same
/// name; the report is created when there is none).
fn merge_into(path: &str, ours: &Value) -> Result<(), ServerError> {
    let mut report: Value = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| ours.clone());
    let new: Vec<Value> = ours["figures"].as_array().cloned().unwrap_or_default();
    if let Some(figures) = report["figures"].as_array_mut() {
        figures.retain(|f| !new.iter().any(|n| n["name"] == f["name"]));
        figures.extend(new);
    }
    write_json(path, &report)
}
