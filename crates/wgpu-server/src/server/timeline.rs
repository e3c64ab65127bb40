//! Recording a timeline on the server (`start_timeline`,
//! `finish_timeline`); what it records is `timing::recording`, what it
//! resolves to is [`Timeline`](crate::Timeline).

use compute_runtime::{DynFut, ServerError};
use compute_wgsl::WgpuCompiler;

use crate::device::map::MapRead;
use crate::device::stamps::{self, PAIR_BYTES};
use crate::server::WgpuServer;
use crate::timing::recording::Recording;
use crate::timing::timeline::{Timeline, TimelineEvent};

/// Starts recording at most `capacity` launches (see the module doc).
/// Needs timestamp queries.
pub(crate) fn start<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    capacity: usize,
) -> Result<(), ServerError> {
    if !s
        .gpu
        .caps()
        .features
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        return Err(ServerError::unsupported(
            "timeline",
            "the device has no timestamp queries",
        ));
    }
    s.timing
        .profiler_mut()
        .timeline
        .get_or_insert_with(|| Recording::new(capacity));
    Ok(())
}

/// Stops recording, submits everything, and resolves the recorded stamps.
pub(crate) fn finish<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
) -> DynFut<Result<Timeline, ServerError>> {
    let recording = s.timing.profiler_mut().timeline.take();
    if let Err(e) = s.enter() {
        return Box::pin(async move { Err(e) });
    }
    let Some(recording) = recording.filter(|r| r.len() > 0) else {
        return Box::pin(async { Ok(Timeline::default()) });
    };
    s.streams.submit_all();
    s.streams.backend_mut().flush_host_writes();
    let device = s.gpu.device().clone();
    let readback = stamps::readback(
        &device,
        PAIR_BYTES * recording.len() as u64,
        "timeline readback",
    );
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("timeline"),
    });
    let (recorded, dropped) = recording.resolve_into(&mut encoder, &readback);
    let (index, no) = match s.streams.backend_mut().submit_outside(encoder.finish()) {
        Ok(submitted) => submitted,
        Err(e) => return Box::pin(async move { Err(e) }),
    };
    let size = readback.size();
    let map = MapRead::start(readback, 0..size);
    let done = s.gpu.waiter().clone().wait(Some(index), no);
    let period = s.gpu.queue().get_timestamp_period();
    let faults = std::sync::Arc::clone(s.gpu.faults());
    Box::pin(async move {
        done.await?;
        let (view, _) = map.view(&faults, "the timeline").await?;
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
