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

use compute_runtime::StreamId;

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
