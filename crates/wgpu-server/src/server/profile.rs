//! The profile calls of `Server`, over [`crate::timing::windows::Profiler`].

use std::sync::Arc;
use std::time::Instant;

use compute_runtime::{
    LogCategory, LogLevel, ProfileDuration, ProfileError, ProfilingToken, ServerError, StreamId,
    TimingMethod,
};
use compute_wgsl::WgpuCompiler;

use crate::device::map::MapRead;
use crate::device::stamps::{self, PAIR_BYTES};
use crate::server::WgpuServer;
use crate::stream::parked::ParkTicket;
use crate::timing::windows::{Measure, Slot};

/// Submits `stream` (and pending host writes) and waits for the queue.
fn drain<C: WgpuCompiler>(s: &mut WgpuServer<C>, stream: StreamId) -> Result<(), ServerError> {
    s.streams.submit(stream);
    let index = s.streams.backend_mut().flush_host_writes();
    let no = s.streams.backend().last_submission().1;
    s.gpu.waiter().wait_blocking(index, no)
}

pub(crate) fn start<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
) -> Result<ProfilingToken, ServerError> {
    let measure = match s.timing.profiler_mut().method {
        TimingMethod::Device => {
            let slot = s.timing.profiler_mut().take_slot(s.gpu.device());
            let device = s.gpu.device().clone();
            let (_, ws) = s.streams.encoder(stream);
            ws.batch().stamp(&device, &slot.query_set, 0);
            s.streams.task_done(stream);
            Measure::Device(slot)
        }
        TimingMethod::System => {
            drain(s, stream)?;
            Measure::System(Instant::now())
        }
    };
    let id = s.timing.profiler_mut().open(stream, measure);
    s.logger.log(LogCategory::Profile, LogLevel::Basic, || {
        format!("profile window {id} opened on {stream}")
    });
    Ok(ProfilingToken { id })
}

pub(crate) fn start_at_launch<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
) -> Result<ProfilingToken, ServerError> {
    if !s
        .gpu
        .caps()
        .features
        .contains(wgpu::Features::TIMESTAMP_QUERY)
    {
        return Err(ServerError::unsupported(
            "start_profile_at_launch",
            "the device has no timestamp queries",
        ));
    }
    if s.timing.profiler_mut().has_armed(stream) {
        return Err(ServerError::ProfileState {
            stream,
            reason: "an at-launch window is already waiting for the next launch".into(),
        });
    }
    let slot = s.timing.profiler_mut().take_slot(s.gpu.device());
    let id = s.timing.profiler_mut().open(
        stream,
        Measure::AtLaunch {
            slot,
            recorded: false,
        },
    );
    Ok(ProfilingToken { id })
}

pub(crate) fn abandon<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
    token: ProfilingToken,
) {
    match s.timing.profiler_mut().close(stream, token.id) {
        Ok(window) => match window.measure {
            Measure::Device(slot) | Measure::AtLaunch { slot, .. } => {
                s.timing.profiler_mut().give_back(slot)
            }
            Measure::System(_) => {}
        },
        Err(e) => s.logger.log(LogCategory::Profile, LogLevel::Basic, || {
            format!("abandon_profile: {e}")
        }),
    }
}

pub(crate) fn end<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
    token: ProfilingToken,
) -> Result<ProfileDuration, ProfileError> {
    let window = s.timing.profiler_mut().close(stream, token.id)?;
    let method = s.timing.profiler_mut().method;
    let give_back = |s: &mut WgpuServer<C>, m: Measure| {
        if let Measure::Device(slot) | Measure::AtLaunch { slot, .. } = m {
            s.timing.profiler_mut().give_back(slot);
        }
    };
    if let Err(e) = s.enter() {
        give_back(s, window.measure);
        return Err(e.into());
    }
    if let Some(cause) = window.invalid {
        give_back(s, window.measure);
        return Err(ProfileError::Invalidated { cause });
    }
    match window.measure {
        Measure::System(started) => {
            drain(s, stream)?;
            Ok(ProfileDuration::ready(method, started.elapsed()))
        }
        Measure::AtLaunch {
            slot,
            recorded: false,
        } => {
            s.timing.profiler_mut().give_back(slot);
            Err(ProfileError::Server(ServerError::ProfileState {
                stream,
                reason: "the at-launch window ended before any launch".into(),
            }))
        }
        Measure::Device(slot) => {
            let device = s.gpu.device().clone();
            let (_, ws) = s.streams.encoder(stream);
            ws.batch().stamp(&device, &slot.query_set, 1);
            resolve(s, stream, slot)
        }
        Measure::AtLaunch { slot, .. } => resolve(s, stream, slot),
    }
}

/// Resolves a window's two timestamps and returns the future of their
/// difference, without a submit of its own: the batch that holds the
/// resolve is parked (`stream/parked.rs`) and goes to the queue with the
/// stream's next submit, or from the future, awaited before that. A batch
/// the task count submitted already needs nothing more; one held back
/// behind a collective is submitted now, as any wait for it would. The
/// slot goes back to the pool at once: any later window writes it in a
/// later position of the queue.
fn resolve<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
    slot: Slot,
) -> Result<ProfileDuration, ProfileError> {
    let device = s.gpu.device().clone();
    let readback = stamps::readback(&device, PAIR_BYTES, "profile readback");
    {
        let (_, ws) = s.streams.encoder(stream);
        slot.copy_to(ws.batch().encoder_for_copy(&device), &readback, 0);
    }
    s.timing.profiler_mut().give_back(slot);
    s.streams.task_done(stream);
    let pending = s.streams.pending_tasks(stream) > 0;
    let parked = if pending {
        let (backend, ws) = s.streams.encoder(stream);
        backend.park(stream, ws)
    } else {
        None
    };
    let submitted = match parked {
        Some(ticket) => Resolved::Parked(ticket),
        None => {
            if pending {
                s.streams.submit(stream);
            }
            let (_, ws) = s.streams.encoder(stream);
            Resolved::Submitted(ws.last_submission())
        }
    };
    let waiter = s.gpu.waiter().clone();
    let faults = Arc::clone(s.gpu.faults());
    let period = s.gpu.queue().get_timestamp_period();
    Ok(ProfileDuration::new(
        TimingMethod::Device,
        Box::pin(async move {
            let (index, no) = match submitted {
                Resolved::Parked(ticket) => {
                    let (index, no) = ticket
                        .submission()
                        .map_err(|e| ProfileError::Server((*e).clone()))?;
                    (Some(index), no)
                }
                Resolved::Submitted(last) => last,
            };
            let Some(index) = index else {
                return Err(ProfileError::Server(ServerError::Mapping {
                    reason: "the timestamps of a profile window were never submitted".into(),
                }));
            };
            // Mapped once submitted (a mapped buffer cannot be), then a
            // poll that follows the request runs its callback.
            let size = readback.size();
            let map = MapRead::start(readback, 0..size);
            waiter.wait_polled(index, no).await?;
            let (view, _) = map.view(&faults, "timestamps").await?;
            stamps::duration(&view, period).ok_or(ProfileError::Server(ServerError::Mapping {
                reason: "timestamp readback too short".into(),
            }))
        }),
    ))
}

/// Where a window's resolve went.
enum Resolved {
    /// Parked with its batch: the future submits it if nothing else has.
    Parked(ParkTicket),
    /// Submitted: the stream's last submission covers it.
    Submitted((Option<wgpu::SubmissionIndex>, u64)),
}
