//! `kernel.*` of the kernel suite (`compute_testkit::kernels`): softmax,
//! layernorm, scan, byte histogram, radix sort and the register-tiled
//! matmul, each written with the IR and launched through the server,
//! against the same design handwritten in WGSL on raw wgpu
//! (`suite_wgsl.rs`), both checked against the host before they are timed.

mod coop;
mod job;
mod jobs;
mod probe;
mod scan;

use std::cell::RefCell;
use std::time::{Duration, Instant};

use compute_runtime::{DeviceId, ServerError};

use crate::harness::{Options, interleaved};
use crate::report::Figure;
use job::{Ir, Job, Ours, Raw};

/// A check of a job's results, given a reader of its buffers (by index):
/// what is wrong, if anything.
pub type Check = Box<dyn Fn(&dyn Fn(usize) -> Vec<u8>) -> Result<(), String>>;

/// A figure's job, its size in the figure's unit per run, and the check of
/// its results (given a reader of the job's buffers).
pub struct Measured {
    pub name: &'static str,
    pub unit: String,
    pub baseline: &'static str,
    pub job: Job,
    /// Work per run, in the unit's numerator (bytes, keys, flops) over
    /// `scale` (1e9 for GB/s, 1e6 for Mkeys/s, 1e12 for TFLOP/s).
    pub work: f64,
    pub scale: f64,
    pub reps: u32,
    pub check: Check,
    /// The raw side's own check, when it computes something else than the
    /// IR kernel (a probe of one step of it); `None`: `check`.
    pub raw_check: Option<Check>,
}

pub fn figures(o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let mut s = Ir::try_init(DeviceId(0))?;
    let cpu = compute_runtime::Server::utilities(&s).adapter.device_type == "Cpu";
    let features = s.device().features();
    let subgroups = features.contains(wgpu::Features::SUBGROUP);
    let matrices = features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
    let invalid = |e: compute_ir::IrError| ServerError::InvalidArgument {
        reason: e.to_string(),
    };
    // Probes only when asked: they explain figures, they are not ones.
    if o.asks_for("probe") {
        let wants = |name: &str| o.wants(name);
        for m in probe::all(cpu, subgroups, matrices, &wants).map_err(invalid)? {
            {
                let f = measure(&mut s, o, m)?;
                out.push(Figure::new(
                    f.name,
                    f.baseline_value,
                    f.unit,
                    "the IR kernel of the figure, same run",
                    f.value,
                ));
            }
        }
        return Ok(());
    }
    for m in jobs::all(cpu, subgroups, matrices).map_err(invalid)? {
        if o.wants(m.name) {
            out.push(measure(&mut s, o, m)?);
        }
    }
    Ok(())
}

/// One run of each side, both checked; then interleaved timed rounds. A
/// side whose results are wrong reports NaN (and says why on stderr).
fn measure(s: &mut Ir, o: &Options, m: Measured) -> Result<Figure, ServerError> {
    let ours = Ours::new(s, &m.job)?;
    let raw = Raw::new(&s.device().clone(), &s.queue().clone(), &m.job);
    ours.run(s, 1)?;
    raw.run(1);
    let cell = RefCell::new(&mut *s);
    let ours_ok = report(
        m.name,
        "server",
        (m.check)(&|i| ours.read(&mut cell.borrow_mut(), i).unwrap_or_default()),
    );
    let raw_check = m.raw_check.as_ref().unwrap_or(&m.check);
    let raw_ok = report(m.name, "raw", raw_check(&|i| raw.read(i)));
    let reps = warm_reps(&raw, m.reps);
    let rate = |t: Instant| m.work * f64::from(reps) / t.elapsed().as_secs_f64() / m.scale;
    let (v, b) = interleaved(
        o.rounds(3, 7),
        || {
            let t = Instant::now();
            match ours.run(&mut cell.borrow_mut(), reps) {
                Ok(()) => rate(t),
                Err(_) => f64::NAN,
            }
        },
        || {
            let t = Instant::now();
            raw.run(reps);
            rate(t)
        },
    );
    Ok(Figure::new(
        m.name,
        if ours_ok { v } else { f64::NAN },
        m.unit,
        m.baseline,
        if raw_ok { b } else { f64::NAN },
    ))
}

/// The device warmed up (the raw job run for at least [`WARM_UP`]), and
/// the repetitions that make a timed round last at least [`ROUND`]. On the
/// H200 a round of 7 ms after an idle spell measured the same unchanged
/// histogram at 863 GB/s in one run and 2,024 in the next: its clocks had
/// not come up yet.
fn warm_reps(raw: &Raw, reps: u32) -> u32 {
    let start = Instant::now();
    let mut one = Duration::MAX;
    while start.elapsed() < WARM_UP {
        let t = Instant::now();
        raw.run(reps);
        one = one.min(t.elapsed());
    }
    let scale = ROUND.as_secs_f64() / one.as_secs_f64().max(1e-9);
    (f64::from(reps) * scale.max(1.0))
        .ceil()
        .min(f64::from(u32::MAX)) as u32
}

/// How long the device runs a job before its timing.
const WARM_UP: Duration = Duration::from_millis(300);
/// The shortest timed round.
const ROUND: Duration = Duration::from_millis(50);

fn report(name: &str, side: &str, r: Result<(), String>) -> bool {
    match r {
        Ok(()) => true,
        Err(why) => {
            eprintln!("bench: {name} ({side}) computed the wrong result: {why}");
            false
        }
    }
}
