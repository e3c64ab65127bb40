//! Host transfers: cubecl's copy descriptors as this server's.
//!
//! Contiguous layouts only, as on cubecl-wgpu (`UnsupportedStrides`
//! otherwise). Each range is widened to whole words inside its allocation
//! ([`crate::memory`]): a write's padding bytes are zeros written into the
//! allocation's alignment gap, and a read's are cut off again.

use cubecl_common::bytes::Bytes as CubeBytes;
use cubecl_environment::future::DynFut;
use cubecl_runtime::server::{CopyDescriptor, ServerError};
use wgpu_server::runtime::{
    Bytes, CopyDescriptor as InnerCopy, Server as _, ServerError as Inner, StreamId,
};

use crate::errors::read_error;
use crate::server::BridgeServer;

/// Whether `shape` and `strides` describe a dense row-major layout.
fn contiguous(shape: &[usize], strides: &[usize]) -> bool {
    if shape.len() != strides.len() {
        return false;
    }
    let mut expected = 1usize;
    for (dim, stride) in shape.iter().zip(strides).rev() {
        if *dim > 1 && *stride != expected {
            return false;
        }
        expected = expected.saturating_mul(*dim);
    }
    true
}

fn strided() -> Inner {
    Inner::Unsupported {
        what: "strided copies",
        reason: "the server copies contiguous layouts only",
    }
}

/// The bytes a descriptor names, or `None` on overflow.
fn bytes_of(desc: &CopyDescriptor) -> Option<u64> {
    desc.shape
        .iter()
        .try_fold(desc.elem_size as u64, |n, d| n.checked_mul(*d as u64))
}

impl BridgeServer {
    pub(crate) fn read_start(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream: StreamId,
    ) -> Result<DynFut<Result<Vec<CubeBytes>, ServerError>>, Inner> {
        let mut copies = Vec::with_capacity(descriptors.len());
        let mut lens = Vec::with_capacity(descriptors.len());
        let mut empty = Vec::new();
        for desc in &descriptors {
            if !contiguous(&desc.shape, &desc.strides) {
                return Err(strided());
            }
            let resolved = self.memory.resolve(&desc.handle)?;
            let len = bytes_of(desc)
                .filter(|n| *n <= resolved.len)
                .ok_or_else(|| Inner::InvalidArgument {
                    reason: format!(
                        "a read of shape {:?} x {} bytes from a range of {} bytes",
                        desc.shape, desc.elem_size, resolved.len
                    ),
                })?;
            let mut binding = resolved.binding;
            if len == 0 {
                // Nothing to copy, but the claim check a read makes.
                empty.push(binding);
                lens.push(None);
                continue;
            }
            binding.size = len.next_multiple_of(4);
            copies.push(InnerCopy::contiguous(binding));
            lens.push(Some(len));
        }
        if !empty.is_empty() {
            self.inner.check(empty, stream)?;
        }
        let read = self.inner.read(copies, stream);
        Ok(Box::pin(async move {
            let mut bytes = read.await.map_err(|e| read_error(&e))?.into_iter();
            let mut out = Vec::with_capacity(lens.len());
            for len in lens {
                let data = match len {
                    None => Vec::new(),
                    Some(len) => {
                        let b = bytes.next().ok_or_else(|| {
                            crate::errors::generic("the server answered fewer reads than asked")
                        })?;
                        b.get(..len as usize).unwrap_or(&b).to_vec()
                    }
                };
                out.push(CubeBytes::from_bytes_vec(data));
            }
            Ok(out)
        }))
    }

    pub(crate) fn write_all(
        &mut self,
        descriptors: Vec<(CopyDescriptor, CubeBytes)>,
        stream: StreamId,
    ) {
        let mut writes = Vec::with_capacity(descriptors.len());
        for (desc, data) in descriptors {
            match self.write_one(&desc, &data, stream) {
                Ok(Some(write)) => writes.push(write),
                Ok(None) => {}
                Err(error) => {
                    // Refused before any byte moved: the destination keeps
                    // what it held and carries the refusal, as a server
                    // write refused at the call does.
                    let target: Vec<_> = self
                        .memory
                        .resolve(&desc.handle)
                        .ok()
                        .map(|r| r.binding)
                        .into_iter()
                        .collect();
                    let _ = compute_stream::write_scope(&mut self.inner, stream, &target, |_| {
                        Err::<(), _>(error)
                    });
                }
            }
        }
        if !writes.is_empty() {
            self.inner.write(writes, stream);
        }
    }

    fn write_one(
        &mut self,
        desc: &CopyDescriptor,
        data: &CubeBytes,
        stream: StreamId,
    ) -> Result<Option<(InnerCopy, Bytes)>, Inner> {
        if !contiguous(&desc.shape, &desc.strides) {
            return Err(strided());
        }
        let resolved = self.memory.resolve(&desc.handle)?;
        let len = data.len() as u64;
        if len > resolved.len {
            return Err(Inner::SizeMismatch {
                expected: resolved.len,
                actual: len,
            });
        }
        if len == 0 {
            return Ok(None);
        }
        let mut binding = resolved.binding;
        binding.size = len.next_multiple_of(4);
        let copy = InnerCopy::contiguous(binding);
        // What the server would refuse at the call it reports at the
        // stream's next flush and poisons nothing for; cubecl's flush does
        // not report it, so the bridge asks first and the destination
        // carries the refusal (cubecl's rule for a write that never landed).
        self.inner
            .validate_write(&copy, copy.binding.size, stream)?;
        let mut bytes = data.to_vec();
        bytes.resize(copy.binding.size as usize, 0);
        Ok(Some((copy, Bytes::from(bytes))))
    }
}
