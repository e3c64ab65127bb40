//! `read_chunks`: the chunks put together are `read`'s bytes, in order, for
//! any chunk size and any range; refusals are `read`'s, plus the chunk
//! size's own; later work on the stream never reaches a chunk. And large
//! writes, the other bulk path, land whole and in order.

use compute_runtime::{CopyDescriptor, CubeCount, Handle, Server, ServerError};
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

/// A large write: 16 MiB, filled by several threads.
const BIG: usize = 16 << 20;

#[test]
fn large_writes_land_whole_and_in_order() {
    let mut s = server();
    // Past the mapped upload path's threshold, several threads' pieces and
    // a tail that ends inside a word
    // (at the end of its slice, whose padding is its own), after four bytes
    // that must keep their value, beside a slice that must keep its bytes.
    let len = 2 * BIG + (1 << 20) + 6;
    let slice = alloc(&mut s, len as u64 + 4, S0);
    let bystander = upload(&mut s, vec![0x5Au8; 4096], S0);
    s.write(
        vec![(slice.copy_descriptor(), vec![0xEEu8; len + 4].into())],
        S0,
    );
    let tail = Handle {
        offset: 4,
        size: len as u64,
        ..slice.clone()
    };
    let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
    s.write(vec![(tail.copy_descriptor(), data.clone().into())], S0);
    let all = read(&mut s, &slice, S0).expect("read").to_vec();
    assert_eq!(&all[..4], &[0xEE; 4], "the bytes before");
    assert!(all[4..] == data[..], "the chunks, in place");
    assert_eq!(
        read(&mut s, &bystander, S0).expect("bystander").to_vec(),
        vec![0x5A; 4096]
    );

    // Work queued after a large write sees it, on a range that crosses
    // the pieces of two fill threads.
    let n = (BIG + (1 << 20)) / 4;
    let x = alloc(&mut s, (n * 4) as u64, S0);
    s.write(
        vec![(x.copy_descriptor(), u32_bytes(&vec![41; n]).into())],
        S0,
    );
    let from = n - (3 << 18);
    let across = Handle {
        offset: (from * 4) as u64,
        size: (3 << 20) as u64,
        ..x.clone()
    };
    launch(
        &mut s,
        inc_kernel(),
        CubeCount::x((3 << 18) / 64),
        &[&across],
        S0,
    );
    let got = bytes_u32(&read(&mut s, &x, S0).expect("read x"));
    assert!(got[..from].iter().all(|v| *v == 41));
    assert!(got[from..].iter().all(|v| *v == 42));
}
