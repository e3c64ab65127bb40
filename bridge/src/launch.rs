//! A cubecl launch, as a launch of this server.
//!
//! The kernel is compiled by the bridge ([`crate::compile`]); its buffers
//! are resolved against the memory table; cubecl's packed scalars, shapes
//! and strides (`KernelArguments::info`, u64 words) go in a read-only
//! storage buffer bound after the kernel's own, which is where cubecl's
//! WGSL declares them. Everything else (ordering, trust, the pipeline)
//! is the server's.
//!
//! A launch the bridge cannot hand over (the kernel does not compile, a
//! buffer is unknown) fails the way the server fails one: through the
//! server's public `compute_stream::write_scope`, which poisons what the
//! launch would have written and nothing else (cubecl's own answer of
//! what the kernel writes, else the caller's declaration, else every
//! buffer).

use std::collections::HashMap;
use std::sync::Arc;

use cubecl_runtime::execution::LaunchMode as CubeMode;
use cubecl_runtime::kernel::CubeKernel;
use cubecl_runtime::server::{
    CubeCount as CubeCount_, KernelArguments as CubeArgs, KernelResource,
};
use wgpu_server::runtime::{
    Bytes, CopyDescriptor, CubeCount, KernelArguments, LaunchMode, LaunchValidation,
    ManagedMemoryHandle, Server as _, ServerError as Inner, StreamId,
};

use crate::compile::Compiled;
use crate::properties::probing;
use crate::server::BridgeServer;

/// A launch cubecl asked to queue: compiled, translated, not dispatched.
pub(crate) type Queued = (Arc<Compiled>, KernelArguments, CubeCount);

/// Metadata buffers by content: a launch with the same words reuses the
/// buffer, which only kernels read (never written after its one full
/// host write). Bounded: cleared when full.
#[derive(Debug, Default)]
pub(crate) struct InfoBuffers {
    by_words: HashMap<Vec<u64>, (ManagedMemoryHandle, u64)>,
}

const INFO_CACHE_MAX: usize = 1024;

impl BridgeServer {
    pub(crate) fn launch_kernel(
        &mut self,
        kernel: Box<dyn CubeKernel>,
        count: CubeCount_,
        args: CubeArgs,
        stream: StreamId,
        mode: CubeMode,
    ) {
        crate::probe::touched(stream.0);
        if probing() {
            // The probe only counts launches; running kernels of features
            // the device lacks would prove nothing.
            let refusal = Inner::Unsupported {
                what: "launches",
                reason: "the bridge runs as the feature probe (CUBECL_BRIDGE_PROBE)",
            };
            return self.fail_writes(&args, None, refusal, stream);
        }
        let compiled = match self
            .kernels
            .get(kernel.as_ref(), &self.utilities.properties)
        {
            Ok(compiled) => compiled,
            Err(error) => return self.fail_writes(&args, None, error, stream),
        };
        let translated = self.translate(&compiled, &args, count, stream);
        let (inner_args, inner_count) = match translated {
            Ok(t) => t,
            Err(error) => return self.fail_writes(&args, compiled.io.as_deref(), error, stream),
        };
        match mode {
            // Everything a first launch does short of dispatching: the
            // server compiles the pipeline and checks the arguments. The
            // launch is discarded, so a refusal belongs to the launch that
            // runs it (which fails the same way, on its own outputs).
            CubeMode::Compile => {
                let _ =
                    self.inner
                        .validate_launch(&compiled.kernel, &inner_count, &inner_args, stream);
            }
            CubeMode::Queue => self.queued.push((compiled, inner_args, inner_count)),
            CubeMode::Execute => {
                self.compile_queued_now(stream);
                // Safety: the kernel was compiled with the server's bounds
                // checks on (the bridge asks for `Unchecked` only when the
                // user set `CUBECL_BRIDGE_UNSAFE_UNCHECKED`, whose contract
                // is theirs), so its accesses stay inside its bindings.
                unsafe {
                    self.inner.launch(
                        Box::new(compiled.kernel.clone()),
                        inner_count,
                        inner_args,
                        stream,
                        LaunchMode::Execute,
                    );
                }
            }
        }
    }

    /// Compiles the pipelines of every queued launch, and discards them.
    pub(crate) fn compile_queued_now(&mut self, stream: StreamId) {
        for (compiled, args, count) in std::mem::take(&mut self.queued) {
            let _ = self
                .inner
                .validate_launch(&compiled.kernel, &count, &args, stream);
        }
    }

    fn translate(
        &mut self,
        compiled: &Compiled,
        args: &CubeArgs,
        count: CubeCount_,
        stream: StreamId,
    ) -> Result<(KernelArguments, CubeCount), Inner> {
        let mut buffers = Vec::with_capacity(compiled.bindings);
        for resource in &args.resources {
            match resource {
                KernelResource::Buffer(b) => buffers.push(self.memory.resolve(b)?.binding),
                KernelResource::TensorMap(_) => {
                    return Err(Inner::Unsupported {
                        what: "tensor maps",
                        reason: "wgpu has no TMA",
                    });
                }
            }
        }
        match compiled.info_min {
            Some(min) => {
                let info = self.info_buffer(&args.info.data, min, stream)?;
                buffers.push(info);
            }
            None if !args.info.data.is_empty() => {
                return Err(Inner::InvalidArgument {
                    reason: format!(
                        "kernel `{}` was given {} metadata words but declares no metadata binding",
                        compiled.kernel.layout().bindings.len(),
                        args.info.data.len()
                    ),
                });
            }
            None => {}
        }
        let count = match count {
            CubeCount_::Static(x, y, z) => CubeCount::Static(x, y, z),
            CubeCount_::Dynamic(b) => CubeCount::Dynamic(self.memory.resolve(&b)?.binding),
        };
        Ok((KernelArguments::buffers(buffers), count))
    }

    /// The metadata words as a read-only buffer of at least `min` bytes.
    fn info_buffer(
        &mut self,
        words: &[u64],
        min: u64,
        stream: StreamId,
    ) -> Result<wgpu_server::runtime::BufferBinding, Inner> {
        if let Some((handle, size)) = self.info.by_words.get(words) {
            return Ok(handle.binding(*size));
        }
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        // Whole 16-byte rows, and at least what the struct's fixed part
        // needs: the padding is never read.
        let size = (bytes.len() as u64).max(min).max(16).next_multiple_of(16);
        bytes.resize(usize::try_from(size).unwrap_or(usize::MAX), 0);
        let handle = ManagedMemoryHandle::new();
        handle.set_label("cubecl launch metadata");
        self.inner.initialize_memory(handle.clone(), size, stream)?;
        let binding = handle.binding(size);
        // A refused write would leave the buffer unwritten and trusted, and
        // the launch reading garbage: asked first, refused as the launch.
        let copy = CopyDescriptor::contiguous(binding.clone());
        self.inner.validate_write(&copy, size, stream)?;
        self.inner.write(
            vec![(
                CopyDescriptor::contiguous(binding.clone()),
                Bytes::from(bytes),
            )],
            stream,
        );
        if self.info.by_words.len() >= INFO_CACHE_MAX {
            self.info.by_words.clear();
        }
        self.info.by_words.insert(words.to_vec(), (handle, size));
        Ok(binding)
    }

    /// Fails a launch the server never saw: poisons what it would have
    /// written with `error`, through the server's own write scope.
    pub(crate) fn fail_writes(
        &mut self,
        args: &CubeArgs,
        io: Option<&[cubecl_ir::attributes::BufferIOAttr]>,
        error: Inner,
        stream: StreamId,
    ) {
        let writes: Vec<_> = args
            .buffers_written(io)
            .filter_map(|b| self.memory.resolve(b).ok().map(|r| r.binding))
            .collect();
        let _ =
            compute_stream::write_scope(&mut self.inner, stream, &writes, |_| Err::<(), _>(error));
    }
}
