//! `read_chunks`: the chunks put together are `read`'s bytes, in order, for
//! any chunk size and any range; refusals are `read`'s, plus the chunk
//! size's own; later work on the stream never reaches a chunk.

use compute_runtime::{CopyDescriptor, CubeCount, Handle, ServerError};
use futures::executor::block_on_stream;
use wgpu_server::{MAX_READ_CHUNKS, ReadChunk};

use crate::common::*;

/// Every chunk of a `read_chunks`, or its first error.
fn chunks(
    s: &mut TestServer,
    d: CopyDescriptor,
    chunk: u64,
) -> Result<Vec<ReadChunk>, ServerError> {
    block_on_stream(s.read_chunks(d, chunk, S0)?).collect()
}

fn joined(parts: &[ReadChunk]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        assert_eq!(
            p.offset,
            out.len() as u64,
            "chunks come in order, back to back"
        );
        out.extend_from_slice(&p.bytes);
    }
    out
}

#[test]
fn chunks_put_together_are_the_read_for_any_chunk_size_and_range() {
    let mut s = server();
    let len = (1 << 20) + 13;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    let h = upload(&mut s, data.clone(), S0);
    // Unaligned starts and ends, chunks that are not whole words.
    for (start, end) in [(0, len), (6, len - 3), (4097, 4097 + 70_001)] {
        let part = Handle {
            offset: start as u64,
            size: (end - start) as u64,
            ..h.clone()
        };
        let want = &data[start..end];
        for chunk in [4096, 1000, 3, want.len() as u64, 1 << 30] {
            if (want.len() as u64).div_ceil(chunk) > MAX_READ_CHUNKS {
                continue;
            }
            let got = chunks(&mut s, part.copy_descriptor(), chunk).expect("read_chunks");
            let sizes_ok = got
                .iter()
                .rev()
                .skip(1)
                .all(|c| c.bytes.len() as u64 == chunk);
            assert!(sizes_ok, "every chunk but the last is whole ({chunk})");
            assert!(
                joined(&got) == want,
                "bytes {start}..{end} in chunks of {chunk}"
            );
        }
    }
}

#[test]
fn chunk_sizes_that_cannot_work_are_refused_and_an_empty_read_has_no_chunk() {
    let mut s = server();
    let h = upload(&mut s, vec![1u8; 1 << 16], S0);
    for chunk in [0, 1] {
        let Err(e) = s.read_chunks(h.copy_descriptor(), chunk, S0) else {
            panic!("chunk {chunk} accepted");
        };
        assert!(matches!(e, ServerError::InvalidArgument { .. }), "{e}");
    }
    let empty = Handle {
        size: 0,
        ..h.clone()
    };
    let got = chunks(&mut s, empty.copy_descriptor(), 64).expect("empty read");
    assert!(got.is_empty());
    // The refusals left the buffer as it was.
    assert_eq!(
        read(&mut s, &h, S0).expect("read").to_vec(),
        vec![1u8; 1 << 16]
    );
}

#[test]
fn refusals_are_reads_refusals() {
    let mut s = server();
    let unbound = Handle::new(compute_runtime::ManagedMemoryHandle::new(), 64);
    let Err(e) = s.read_chunks(unbound.copy_descriptor(), 16, S0) else {
        panic!("an unbound handle was read");
    };
    assert!(matches!(e, ServerError::UnknownHandle { .. }), "{e}");

    let h = upload(&mut s, u32_bytes(&[0; 64]), S0);
    let broken = wgpu_server::WgslKernel::new(
        "broken",
        "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
         @compute @workgroup_size(64) fn main() { x[0] = 1.5; }",
        "main",
        [64, 1, 1],
        vec![wgpu_server::BindingAccess::ReadWrite],
    );
    launch(&mut s, broken, CubeCount::x(1), &[&h], S0);
    let Err(e) = s.read_chunks(h.copy_descriptor(), 64, S0) else {
        panic!("poisoned bytes were read");
    };
    assert!(matches!(e, ServerError::Untrusted { .. }), "{e}");
}

#[test]
fn work_after_the_call_never_reaches_a_chunk() {
    let mut s = server();
    let n = 1 << 16;
    let h = upload(&mut s, u32_bytes(&vec![5; n]), S0);
    let stream = s
        .read_chunks(h.copy_descriptor(), 4096, S0)
        .expect("read_chunks");
    // Queued after the copies: the chunks still hold the 5s.
    launch(&mut s, inc_kernel(), CubeCount::x(n as u32 / 64), &[&h], S0);
    let got: Vec<ReadChunk> = block_on_stream(stream)
        .collect::<Result<_, _>>()
        .expect("chunks");
    assert_eq!(bytes_u32(&joined(&got)), vec![5; n]);
    assert_eq!(bytes_u32(&read(&mut s, &h, S0).expect("read")), vec![6; n]);
}
