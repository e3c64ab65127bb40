//! `sync`: submit the stream (and pending host writes), wait for it, then
//! report, in this order, a lost device, the stream's own failures (those
//! deferred before the wait and the late verdicts that arrived during it),
//! uncaptured faults, and the trust of the handles named.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use compute_runtime::{
    BufferBinding, DynFut, LogCategory, LogLevel, ServerError, ServerLogger, StreamId,
};
use compute_stream::settle_batch_failures;
use compute_wgsl::WgpuCompiler;

use crate::server::WgpuServer;

pub(crate) fn sync<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    handles: Vec<BufferBinding>,
    stream: StreamId,
) -> DynFut<Result<(), ServerError>> {
    if let Err(e) = s
        .enter()
        .and_then(|()| s.capture_state(stream).allow_host_wait(stream, "sync"))
        .and_then(|()| handles.iter().try_for_each(|h| s.resolve(h).map(|_| ())))
    {
        return Box::pin(async move { Err(e) });
    }
    s.streams.submit(stream);
    settle_batch_failures(s);
    let deferred = s.streams.take_deferred(stream);
    let poisoned: Result<(), ServerError> = handles
        .iter()
        .try_for_each(|h| s.streams.check(h.memory_id()));
    let (index, no) = drain_point(s, stream);
    let waiter = s.gpu.waiter().clone();
    let faults = Arc::clone(s.gpu.faults());
    // Late verdicts (audited indirect counts, collective outcomes) on the
    // batches this wait covers arrive during it: the stream's are reported
    // here, and the handles named are checked again once it is over.
    let late = Arc::clone(s.streams.trust().late());
    let memories: Vec<_> = handles.iter().map(BufferBinding::memory_id).collect();
    let log = GpuTimeLog::new(s, stream);
    Box::pin(async move {
        waiter.wait(index, no).await?;
        log.after_wait();
        // Every error reaches someone: the stream's own failures first; a
        // fault that arrived during the wait is reported here when nothing
        // else is, and owed to the other streams either way.
        faults.lost()?;
        report(stream, deferred, &late.claim(stream))?;
        faults.take_uncaptured_for(stream)?;
        poisoned?;
        memories.into_iter().try_for_each(|m| late.check(m))
    })
}

/// The submission a `sync` of `stream` waits for: the newest of any stream
/// when host writes were pending (they reach the GPU only with a submit,
/// and the caller may wait for them), else the stream's own last.
fn drain_point<C: WgpuCompiler>(
    s: &mut WgpuServer<C>,
    stream: StreamId,
) -> (Option<wgpu::SubmissionIndex>, u64) {
    if s.streams.backend().host_writes_pending() {
        let index = s.streams.backend_mut().flush_host_writes();
        (index, s.streams.backend().last_submission().1)
    } else {
        s.streams.encoder(stream).1.last_submission()
    }
}

/// The stream's failures, as one report: those deferred before the wait
/// (`deferred`), then the late verdicts that arrived during it, counted in
/// `later`.
fn report(
    stream: StreamId,
    deferred: Result<(), ServerError>,
    arrived: &[Arc<ServerError>],
) -> Result<(), ServerError> {
    match (deferred, arrived.split_first()) {
        (
            Err(ServerError::Deferred {
                stream,
                cause,
                later,
            }),
            _,
        ) => Err(ServerError::Deferred {
            stream,
            cause,
            later: later.saturating_add(arrived.len() as u32),
        }),
        (Err(other), _) => Err(other),
        (Ok(()), Some((first, rest))) => Err(ServerError::Deferred {
            stream,
            cause: Arc::clone(first),
            later: rest.len() as u32,
        }),
        (Ok(()), None) => Ok(()),
    }
}

/// The `sync` log line, with the GPU time of the batches the wait covered
/// when batch timing is on.
struct GpuTimeLog {
    stream: StreamId,
    logger: Arc<ServerLogger>,
    counter: Option<Arc<AtomicU64>>,
    last: Arc<AtomicU64>,
    started: Instant,
}

impl GpuTimeLog {
    fn new<C: WgpuCompiler>(s: &WgpuServer<C>, stream: StreamId) -> Self {
        GpuTimeLog {
            stream,
            logger: Arc::clone(&s.logger),
            counter: s
                .streams
                .backend()
                .submitter()
                .timing()
                .map(|t| t.counter()),
            last: Arc::clone(s.timing.last_sync_gpu_ns()),
            started: Instant::now(),
        }
    }

    /// Map callbacks of the batches the wait covered ran inside the poll,
    /// so their GPU time is in the counter now.
    fn after_wait(&self) {
        let gpu_ns = self.counter.as_ref().map(|c| c.swap(0, Ordering::Relaxed));
        if let Some(ns) = gpu_ns {
            self.last.store(ns, Ordering::Relaxed);
        }
        let (stream, waited) = (self.stream, self.started.elapsed());
        self.logger
            .log(LogCategory::Sync, LogLevel::Basic, || match gpu_ns {
                Some(ns) => format!(
                    "sync {stream}: drained in {waited:?}, completing {:?} of GPU work",
                    Duration::from_nanos(ns)
                ),
                None => format!("sync {stream}: drained in {waited:?}"),
            });
    }
}
