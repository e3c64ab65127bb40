//! What every figure family shares: options, medians of interleaved
//! rounds, and the few server calls each family makes.

use std::time::Duration;

use compute_runtime::{Handle, ManagedMemoryHandle, Server, ServerError, StreamId};
use compute_wgsl::WgpuCompiler;
use wgpu_server::WgpuServer;

/// The stream every single-stream figure runs on.
pub const STREAM: StreamId = StreamId(0);

/// Command-line options.
#[derive(Debug)]
pub struct Options {
    pub quick: bool,
    pub filter: Option<String>,
    pub out: String,
}

impl Options {
    pub fn from_args() -> Self {
        let mut o = Options {
            quick: false,
            filter: None,
            out: "target/bench/report.json".into(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--quick" => o.quick = true,
                "--filter" => o.filter = args.next(),
                "--out" => {
                    if let Some(p) = args.next() {
                        o.out = p;
                    }
                }
                other => eprintln!("bench: ignoring unknown argument `{other}`"),
            }
        }
        o
    }

    /// Whether the family whose figures start with `prefix` runs.
    pub fn wants(&self, prefix: &str) -> bool {
        self.filter
            .as_deref()
            .is_none_or(|f| prefix.starts_with(f) || f.starts_with(prefix))
    }

    /// Whether the filter names `prefix` itself: for groups that run only
    /// when asked (`steps`, `probe`), never in a full run.
    pub fn asks_for(&self, prefix: &str) -> bool {
        self.filter
            .as_deref()
            .is_some_and(|f| f.starts_with(prefix))
    }

    /// `quick` rounds in a quick run, `full` otherwise.
    pub fn rounds(&self, quick: usize, full: usize) -> usize {
        if self.quick { quick } else { full }
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

/// Runs `ours` and `raw` alternately for `rounds`, returning both medians.
pub fn interleaved(
    rounds: usize,
    mut ours: impl FnMut() -> f64,
    mut raw: impl FnMut() -> f64,
) -> (f64, f64) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        if r % 2 == 0 {
            a.push(ours());
            b.push(raw());
        } else {
            b.push(raw());
            a.push(ours());
        }
    }
    (median(a), median(b))
}

/// A handle of `size` bytes on [`STREAM`].
pub fn alloc<C: WgpuCompiler>(s: &mut WgpuServer<C>, size: u64) -> Result<Handle, ServerError> {
    let m = ManagedMemoryHandle::new();
    s.initialize_memory(m.clone(), size, STREAM)?;
    Ok(Handle::new(m, size))
}

/// `sync` of [`STREAM`], waited on.
pub fn sync<C: WgpuCompiler>(s: &mut WgpuServer<C>) -> Result<(), ServerError> {
    futures::executor::block_on(s.sync(vec![], STREAM))
}

/// Microseconds per item.
pub fn us(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

/// GB/s for `bytes` moved in `d`.
pub fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}
