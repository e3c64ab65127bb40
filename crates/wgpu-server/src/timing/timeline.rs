//! A timeline of kernels: per-launch GPU timestamps, exported as a Chrome
//! trace (the JSON that Perfetto and `chrome://tracing` open).
//!
//! While recording, every launch gets a pass of its own whose timestamp
//! writes bracket it (the same mechanism as `start_profile_at_launch`), so
//! recording costs a pass per launch and is meant for inspection, not for
//! production loops. One track per stream, one slice per launch, the kernel's
//! name and workgroup count in the slice's args.

use std::fmt::Write as _;

use compute_runtime::{DynFut, ServerError, StreamId};
use compute_wgsl::WgpuCompiler;
use futures::channel::oneshot;

use crate::WgpuServer;
use crate::timing::stamps::{self, PAIR_BYTES};

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
    /// The events.
    pub events: Vec<TimelineEvent>,
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

/// Starts recording (see the module doc). Needs timestamp queries.
pub(crate) fn start<C: WgpuCompiler>(s: &mut WgpuServer<C>) -> Result<(), ServerError> {
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
    s.timing.profiler.timeline.get_or_insert_with(Vec::new);
    Ok(())
}

/// Stops recording, submits everything, and resolves the recorded stamps.
pub(crate) fn finish<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
) -> DynFut<Result<Timeline, ServerError>> {
    let entries = s.timing.profiler.timeline.take().unwrap_or_default();
    if let Err(e) = s.enter() {
        return Box::pin(async move { Err(e) });
    }
    if entries.is_empty() {
        return Box::pin(async { Ok(Timeline::default()) });
    }
    s.streams.submit_all();
    s.streams.backend_mut().flush_host_writes();
    let device = s.gpu.device.clone();
    let readback = stamps::readback(
        &device,
        PAIR_BYTES * entries.len() as u64,
        "timeline readback",
    );
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("timeline"),
    });
    for (i, e) in entries.iter().enumerate() {
        e.slot
            .copy_to(&mut encoder, &readback, PAIR_BYTES * i as u64);
    }
    let (index, no) = s.streams.backend_mut().submit_outside(encoder.finish());
    let meta: Vec<(StreamId, String, String)> = entries
        .into_iter()
        .map(|e| {
            s.timing.profiler.give_back(e.slot);
            (e.stream, e.kernel, e.workgroups)
        })
        .collect();
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
        let raw: Vec<(u64, u64)> = (0..meta.len())
            .map(|i| stamps::pair_at(&view, PAIR_BYTES as usize * i).unwrap_or((0, 0)))
            .collect();
        let origin = raw.iter().map(|r| r.0).min().unwrap_or(0);
        let events = meta
            .into_iter()
            .zip(raw)
            .map(|((stream, kernel, workgroups), (t0, t1))| TimelineEvent {
                stream,
                kernel,
                workgroups,
                start_ns: stamps::ticks_to_ns(origin, t0, period),
                duration_ns: stamps::ticks_to_ns(t0, t1, period),
            })
            .collect();
        Ok(Timeline { events })
    })
}
