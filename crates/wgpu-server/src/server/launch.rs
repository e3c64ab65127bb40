//! The launch path: layout, write set, then (inside the write scope)
//! resolution and dispatch.
//!
//! Order matters for the trust model. The kernel's layout (known without
//! compiling) names the write set first; everything after runs inside the
//! write scope, so any failure (foreign kernel, bad arguments, compile error,
//! a layout that disagrees with its module, a dispatch over the device's
//! limits, an untrusted input) poisons exactly the buffers the kernel would
//! have written and is reported by the stream's next flush/sync. Every check
//! wgpu would make at encode time is made first (`launch/prepare.rs`): an invalid
//! command inside an encoder would invalidate the whole batch, taking other
//! launches' work with it.
//!
//! A launch never makes its outputs trusted again, even when it binds a
//! whole slice: nothing says the kernel wrote every byte. Only a host write
//! of the whole slice does.

use std::sync::Arc;

use compute_runtime::{BufferBinding, CubeCount, CubeKernel, KernelArguments, StreamId};
use compute_stream::{WriteScoped, write_scope_ids};
use compute_wgsl::{BindingAccess, WgpuCompiler};

use crate::launch::cache::LaunchKey;
use crate::launch::layout_of;
use crate::launch::prepare::resolve_launch;
use crate::server::WgpuServer;
use crate::server::dispatch::dispatch;

pub use crate::launch::resolve::ResolvedLaunch;

/// Launches `kernel` now (or records it, on a capturing stream). No launch
/// mode: a `LaunchMode::Queue` launch reaches here only on a cache hit with
/// nothing held (where it is the same as `Execute`), from `compile_queued`,
/// or inside a capture, where compilation happens at record time and
/// nothing would be gained by deferring it.
pub(crate) fn launch<C: WgpuCompiler>(
    server: &mut WgpuServer<C>,
    kernel: &dyn CubeKernel,
    count: CubeCount,
    args: KernelArguments,
    stream: StreamId,
) {
    if let Err(e) = server.enter() {
        server.streams.defer_error(stream, &Arc::new(e));
        return;
    }
    let capturing = server.is_capturing(stream);
    let key = (!capturing)
        .then(|| LaunchKey::new(kernel.id(), server.kernels.options(), &count, &args))
        .flatten();
    if let Some(resolved) = key.and_then(|k| server.kernels.launches().get(&k).cloned()) {
        // Resolved before, identically: order, check trust, encode.
        let _ = write_scope_ids(server, stream, &resolved.writes, |s| {
            dispatch(s, stream, &resolved)
        });
        return;
    }
    // A cache hit knows the layout; a miss asks the compiler, which can
    // tell it without compiling.
    let cached = server.kernels.cached(kernel);
    let layout = layout_of(cached.as_ref(), server.kernels.compiler(), kernel);
    // The write set: read-write bindings by the layout; every buffer when
    // the layout itself cannot be had (nothing is known to be read-only).
    let writes: Vec<BufferBinding> = match &layout {
        Ok(l) => args
            .buffers
            .iter()
            .enumerate()
            .filter(|(i, _)| l.bindings.get(*i) != Some(&BindingAccess::ReadOnly))
            .map(|(_, b)| b.clone())
            .collect(),
        Err(_) => args.buffers.clone(),
    };
    if capturing {
        // Recorded, not run: nothing is written now, so nothing is settled;
        // a failure spoils the capture instead (`end_capture` reports it).
        // The graph pins what the launch reads, the indirect count too.
        let mut reads: Vec<BufferBinding> = args.buffers.clone();
        if let CubeCount::Dynamic(b) = &count {
            reads.push(b.clone());
        }
        let resolved = layout.and_then(|l| {
            resolve_launch(
                &mut server.launch_parts(),
                kernel,
                cached.clone(),
                &l,
                count,
                &args,
            )
        });
        if let Some(capture) = server.capturing(stream) {
            match resolved {
                Ok(r) => capture.record(r, &reads, &writes),
                Err(e) => capture.fail(e),
            }
        }
        return;
    }
    let _ = server.scoped(stream, &writes, |s| {
        let layout = layout?;
        let resolved = resolve_launch(
            &mut s.launch_parts(),
            kernel,
            cached.clone(),
            &layout,
            count,
            &args,
        )?;
        let resolved = Arc::new(resolved);
        if let Some(k) = key {
            s.kernels.launches().insert(k, Arc::clone(&resolved));
        }
        dispatch(s, stream, &resolved)
    });
}
/// Compiles every held kernel, then encodes the held launches in order.
pub(crate) fn compile_and_encode<C: WgpuCompiler>(s: &mut WgpuServer<C>) {
    let held = s.kernels.take_held();
    if held.is_empty() {
        return;
    }
    for h in &held {
        // Failures are not reported here: the launch below fails the same
        // way inside its write scope, which poisons and defers it.
        let _ = s
            .kernels
            .pipeline(h.kernel.as_ref(), s.gpu.caps(), s.gpu.device(), &s.logger);
    }
    for h in held {
        crate::server::launch::launch(s, h.kernel.as_ref(), h.count, h.args, h.stream);
    }
}
