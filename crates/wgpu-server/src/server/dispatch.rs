//! Dispatch: what a launch and a replayed launch both do once resolved.
//!
//! Order the launch's byte ranges against other streams (which may submit
//! them, and a submission that fails poisons what its batch wrote), then
//! refuse the launch if any slice it reads is untrusted (poison follows
//! data: its writes are poisoned by the caller's scope with
//! [`ServerError::UntrustedInput`] naming that input and its cause), then
//! encode: the indirect count's audit copy (see `audit.rs`) and its copy to
//! scratch when it has one, the bounds report slot of a reporting kernel
//! (`reports.rs`), the pass, the dispatch. The slices it writes
//! join its batch's record, so a batch that fails to submit poisons exactly
//! them, and, where it read bytes whose verdict is still to come, join that
//! verdict's reach (`compute_stream::LateFaults::depend`).

use std::sync::Arc;

use compute_runtime::{LogCategory, LogLevel, ServerError, StreamId};
use compute_stream::LateFaults;
use compute_wgsl::WgpuCompiler;

use crate::device::stamps::StampAt;
use crate::launch::resolve::{ResolvedCount, ResolvedLaunch};
use crate::server::WgpuServer;
use crate::stream::WgpuStream;
use crate::stream::audit::INDIRECT_BYTES;

/// Orders `launch` against other streams and encodes it on `stream`.
pub(crate) fn dispatch<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
    launch: &ResolvedLaunch,
) -> Result<(), ServerError> {
    s.streams.prepare(stream, &launch.pages);
    s.check_inputs(&launch.reads)?;
    // Split borrows: no clone of the device on the hot path.
    let WgpuServer {
        gpu,
        streams,
        timing,
        logger,
        ..
    } = s;
    // An at-launch profile window (or a timeline) stamps this launch.
    let timed =
        timing
            .profiler_mut()
            .stamp_launch(gpu.device(), stream, launch.name(), &launch.count);
    let late = std::sync::Arc::clone(streams.trust().late());
    let (_, ws) = streams.encoder(stream);
    // Inputs written by work whose verdict comes late put these writes at
    // risk behind the same verdict (before the launch's own audit, which
    // judges what it writes, not what it read).
    late.depend(stream, &launch.reads, &launch.writes);
    encode(ws, gpu.device(), launch, timed.as_ref(), &late);
    ws.batch().wrote(&launch.writes);
    streams.task_done(stream);
    logger.log(LogCategory::Launch, LogLevel::Full, || {
        format!("launch `{}` {} on {stream}", launch.name(), launch.count)
    });
    Ok(())
}

/// Encodes one resolved launch into `ws`: its indirect count's audit and
/// copy when it has them, the pass (a timestamped one of its own when
/// `timed`), the dispatch. Ordering, trust and task counting are the
/// caller's.
pub(crate) fn encode(
    ws: &mut WgpuStream,
    device: &wgpu::Device,
    launch: &ResolvedLaunch,
    timed: Option<&StampAt>,
    late: &Arc<LateFaults>,
) {
    match &launch.count {
        ResolvedCount::Static(..) => {}
        ResolvedCount::Indirect { buffer, offset } => {
            ws.batch()
                .audit_indirect(device, buffer, *offset, &launch.writes, late);
        }
        ResolvedCount::Copied {
            src,
            src_offset,
            scratch,
            scratch_offset,
            ..
        } => {
            ws.batch()
                .audit_indirect(device, src, *src_offset, &launch.writes, late);
            ws.batch().encoder_for_copy(device).copy_buffer_to_buffer(
                src,
                *src_offset,
                scratch,
                *scratch_offset,
                INDIRECT_BYTES,
            );
        }
    }
    // A slot of its own per launch, replays included (`reports.rs`).
    let report = launch.pipeline.layout.reports.then(|| {
        ws.batch()
            .report_slot(device, launch.name(), &launch.writes, late)
    });
    let pass = ws.batch().launch_pass(
        device,
        timed,
        (&launch.pipeline.pipeline, launch.pipeline.id),
        (&launch.bind_group, launch.bind_id),
    );
    if let Some((group, offset)) = &report {
        pass.set_bind_group(1, group, &[*offset]);
    }
    match &launch.count {
        ResolvedCount::Static(x, y, z) => pass.dispatch_workgroups(*x, *y, *z),
        ResolvedCount::Indirect { buffer, offset } => {
            pass.dispatch_workgroups_indirect(buffer, *offset)
        }
        ResolvedCount::Copied {
            scratch,
            scratch_offset,
            ..
        } => pass.dispatch_workgroups_indirect(scratch, *scratch_offset),
    }
    if timed.is_some() {
        ws.batch().end_pass();
    }
}
