//! A timeline of kernels: per-launch GPU timestamps, exported as a Chrome
//! trace (the JSON that Perfetto and `chrome://tracing` open).
//!
//! While recording, every launch gets a pass of its own whose timestamp
//! writes bracket it (the same mechanism as `start_profile_at_launch`), so
//! recording costs a pass per launch and is meant for inspection, not for
//! production loops. One track per stream, one slice per launch, the kernel's
//! name and workgroup count in the slice's args.
//!
//! A timeline is bounded: it records at most its capacity of launches
//! ([`DEFAULT_TIMELINE_CAPACITY`] unless
//! [`WgpuServer::start_timeline_with_capacity`] says otherwise); launches
//! after that run unstamped and are counted in [`Timeline::dropped`]. What
//! it keeps per launch is small (see `recording.rs`).

use std::fmt::Write as _;

use compute_runtime::{DynFut, ServerError, StreamId};
use compute_wgsl::WgpuCompiler;
use futures::channel::oneshot;

use crate::WgpuServer;
use crate::timing::recording::Recording;
use crate::timing::stamps::{self, PAIR_BYTES};

/// Launches a timeline records unless told otherwise: about 3 MiB of host
/// memory and 1 MiB of device memory when full.
pub const DEFAULT_TIMELINE_CAPACITY: usize = 65_536;

/// One launch on the timeline.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineEvent {
    /// The stream it ran on.
    pub stream: StreamId,
    /// The kernel's name.
    pub kernel: String,
    /// The dispatch size, as given.
    pub workgroups: String,
    /// Start, in ns from the first event's start.
    pub start_ns: f64,
    /// GPU duration in ns.
    pub duration_ns: f64,
}

/// Recorded launches, in recording order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The events: the first launches, up to the timeline's capacity.
    pub events: Vec<TimelineEvent>,
    /// Launches after the capacity was reached: they ran, unstamped, and
    /// are not in `events`.
    pub dropped: u64,
}

fn json_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o
}

impl Timeline {
    /// The Chrome trace JSON: one `"X"` slice per launch (microseconds),
    /// one thread-name record per stream.
    pub fn to_chrome_trace(&self) -> String {
        let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
        let mut streams: Vec<StreamId> = self.events.iter().map(|e| e.stream).collect();
        streams.sort();
        streams.dedup();
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !first {
                out.push(',');
            }
            first = false;
        };
        for s in &streams {
            sep(&mut out);
            let _ = write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":{},\"args\":{{\"name\":\"stream {}\"}}}}",
                s.0, s.0
            );
        }
        for e in &self.events {
            sep(&mut out);
            let _ = write!(
                out,
                "{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"{}\",\"pid\":0,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{\"workgroups\":\"{}\",\"duration_ns\":{:.0}}}}}",
                json_escape(&e.kernel),
                e.stream.0,
                e.start_ns / 1e3,
                e.duration_ns / 1e3,
                json_escape(&e.workgroups),
                e.duration_ns
            );
        }
        out.push_str("]}\n");
        out
    }
}

/// Starts recording at most `capacity` launches (see the module doc).
/// Needs timestamp queries.
pub(crate) fn start<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    capacity: usize,
) -> Result<(), ServerError> {
    if !s
        .gpu
        .caps
        .features
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        return Err(ServerError::unsupported(
            "timeline",
            "the device has no timestamp queries",
        ));
    }
    s.timing
        .profiler
        .timeline
        .get_or_insert_with(|| Recording::new(capacity));
    Ok(())
}

/// Stops recording, submits everything, and resolves the recorded stamps.
pub(crate) fn finish<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
) -> DynFut<Result<Timeline, ServerError>> {
    let recording = s.timing.profiler.timeline.take();
    if let Err(e) = s.enter() {
        return Box::pin(async move { Err(e) });
    }
    let Some(recording) = recording.filter(|r| r.len() > 0) else {
        return Box::pin(async { Ok(Timeline::default()) });
    };
    s.streams.submit_all();
    s.streams.backend_mut().flush_host_writes();
    let device = s.gpu.device.clone();
    let readback = stamps::readback(
        &device,
        PAIR_BYTES * recording.len() as u64,
        "timeline readback",
    );
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("timeline"),
    });
    let (recorded, dropped) = recording.resolve_into(&mut encoder, &readback);
    let (index, no) = s.streams.backend_mut().submit_outside(encoder.finish());
    let (tx, rx) = oneshot::channel();
    readback.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    let done = s.gpu.waiter.clone().wait(Some(index), no);
    let period = s.gpu.queue.get_timestamp_period();
    let faults = std::sync::Arc::clone(&s.gpu.faults);
    Box::pin(async move {
        done.await?;
        match rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(faults.lost_during("mapping the timeline", e)),
            Err(e) => return Err(faults.lost_during("mapping the timeline", e)),
        }
        let view = readback
            .slice(..)
            .get_mapped_range()
            .map_err(|e| faults.lost_during("viewing the timeline", e))?;
        let raw: Vec<(u64, u64)> = (0..recorded.len())
            .map(|i| stamps::pair_at(&view, PAIR_BYTES as usize * i).unwrap_or((0, 0)))
            .collect();
        let origin = raw.iter().map(|r| r.0).min().unwrap_or(0);
        let events = recorded
            .into_iter()
            .zip(raw)
            .map(|(r, (t0, t1))| TimelineEvent {
                stream: r.stream,
                kernel: r.kernel.to_string(),
                workgroups: r.count.to_string(),
                start_ns: stamps::ticks_to_ns(origin, t0, period),
                duration_ns: stamps::ticks_to_ns(t0, t1, period),
            })
            .collect();
        Ok(Timeline { events, dropped })
    })
}
