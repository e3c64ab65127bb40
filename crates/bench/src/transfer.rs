//! `transfer.*`: host writes and reads of 64 MiB, a 4 KiB round trip, and
//! a write of bytes the caller filled through `staging`.

use std::cell::RefCell;
use std::time::Instant;

use compute_runtime::{Bytes, Server, ServerError, hostcopy};

use crate::harness::{Options, STREAM, alloc, gbps, interleaved, sync, us};
use crate::report::Figure;
use crate::workers::Workers;
use crate::{S, raw};

const SIZE: u64 = 64 << 20;
/// The chunk of `transfer.read_64mib_gbps`'s chunked read.
const READ_CHUNK: u64 = 4 << 20;

pub fn figures(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let rounds = o.rounds(3, 7);
    let data = Bytes::from((0..SIZE).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let h = alloc(s, SIZE)?;
    let device = s.device().clone();
    let queue = s.queue().clone();
    let raw_dst = raw::buffer(
        &device,
        SIZE,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    );
    let cell = RefCell::new(&mut *s);

    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            s.write(vec![(h.copy_descriptor(), data.clone())], STREAM);
            let _ = sync(&mut s);
            gbps(SIZE, t.elapsed())
        },
        || gbps(SIZE, raw::write(&device, &queue, &raw_dst, &data)),
    );
    out.push(Figure::new(
        "transfer.write_64mib_gbps",
        v,
        "GB/s (higher is better)",
        "raw.write_64mib_gbps",
        b,
    ));

    // Reads, with the bytes used where they are (summed), and into a Vec
    // the caller reuses. The raw loops reuse one staging buffer and a
    // pre-touched destination, so neither side pays page faults.
    let readback = raw::Readback::new(&device, SIZE);
    // Where the server reads through imported host memory, its raw
    // baseline does too (the same kind of memory, with nothing of a server
    // around it); else the mapped loop.
    let imported = match s.utilities().host_transfers {
        compute_runtime::HostTransfers::Imported { .. } => {
            raw::ImportedReadback::new(&device, SIZE)
        }
        compute_runtime::HostTransfers::Mapped => None,
    };
    let raw_read = |use_bytes: &mut dyn FnMut(&[u8])| match &imported {
        Some(i) => i.read(&device, &queue, &raw_dst, SIZE, |b| use_bytes(b)),
        None => readback.read(&device, &queue, &raw_dst, SIZE, |b| use_bytes(b)),
    };
    let raw_name = |mapped: &'static str, imported_name: &'static str| {
        if imported.is_some() {
            imported_name
        } else {
            mapped
        }
    };
    let cell = RefCell::new(&mut *s);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            let r = futures::executor::block_on(s.read(vec![h.copy_descriptor()], STREAM));
            let sum = r.ok().and_then(|mut v| v.pop()).map(|b| raw::sum_words(&b));
            std::hint::black_box(sum);
            gbps(SIZE, t.elapsed())
        },
        || {
            let t = Instant::now();
            let mut sum = 0;
            raw_read(&mut |b| sum = raw::sum_words(b));
            std::hint::black_box(sum);
            gbps(SIZE, t.elapsed())
        },
    );
    out.push(Figure::new(
        "transfer.read_whole_64mib_gbps",
        v,
        "GB/s, one read, its bytes used in place once all have landed (higher is better)",
        raw_name("raw.read_64mib_gbps", "raw.read_imported_64mib_gbps"),
        b,
    ));

    // The same bytes used as they land: `read_chunks` against the raw
    // chunked loop, each chunk used by a worker thread.
    let (v, b) = {
        let mut s = cell.borrow_mut();
        chunked_read_gbps(&mut s, &h, &raw_dst, READ_CHUNK, rounds)
    };
    out.push(Figure::new(
        "transfer.read_64mib_gbps",
        v,
        "GB/s, read_chunks of 4 MiB, each used in place by worker threads (1 MiB a job) as it lands (higher is better)",
        "raw.read_chunked_64mib_gbps",
        b,
    ));
    let mut ours_vec = vec![1u8; SIZE as usize];
    let mut raw_vec = vec![1u8; SIZE as usize];
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            let r = futures::executor::block_on(s.read(vec![h.copy_descriptor()], STREAM));
            if let Some(bytes) = r.ok().and_then(|mut v| v.pop()) {
                hostcopy::copy_parallel(&mut ours_vec, &bytes);
            }
            std::hint::black_box(&ours_vec);
            gbps(SIZE, t.elapsed())
        },
        || {
            let t = Instant::now();
            raw_read(&mut |bytes| hostcopy::copy_parallel(&mut raw_vec, bytes));
            std::hint::black_box(&raw_vec);
            gbps(SIZE, t.elapsed())
        },
    );
    out.push(Figure::new(
        "transfer.read_into_vec_64mib_gbps",
        v,
        "GB/s into a reused Vec, copied on several threads (higher is better)",
        raw_name(
            "raw.read_into_vec_64mib_gbps",
            "raw.read_imported_into_vec_64mib_gbps",
        ),
        b,
    ));

    let (v, b) = roundtrip_4kib(s, o)?;
    out.push(Figure::new(
        "transfer.roundtrip_4kib_us",
        v,
        "us (lower is better), after the 64 MiB transfers",
        "raw.roundtrip_4kib_us",
        b,
    ));
    let cell = RefCell::new(&mut *s);

    // staging + write of 64 MiB against the raw write_buffer loop.
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t0 = Instant::now();
            let Some(staged) = s
                .staging(&[SIZE as usize], STREAM)
                .ok()
                .and_then(|mut v| v.pop())
            else {
                return f64::NAN;
            };
            let staging_time = t0.elapsed();
            // Filling is the caller's work (the raw loop's data is already
            // in place), so it is not timed.
            let Ok(mut fill) = staged.try_into_mut() else {
                return f64::NAN;
            };
            fill.copy_from_slice(&data);
            let t1 = Instant::now();
            s.write(vec![(h.copy_descriptor(), fill.freeze())], STREAM);
            let _ = sync(&mut s);
            gbps(SIZE, staging_time + t1.elapsed())
        },
        || gbps(SIZE, raw::write(&device, &queue, &raw_dst, &data)),
    );
    out.push(Figure::new(
        "transfer.staged_write_64mib_gbps",
        v,
        "GB/s (higher is better)",
        "raw.write_64mib_gbps",
        b,
    ));
    Ok(())
}

/// `transfer.roundtrip_4kib_fresh_us`: the 4 KiB round trip measured first
/// in the process, before any bulk transfer. On some H200 instances every
/// small `write_buffer` got slow only after the large ones (wgpu's staging
/// allocation): this figure and `transfer.roundtrip_4kib_us`, measured
/// after them, show both cases.
pub fn fresh_roundtrip(s: &mut S, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let (v, b) = roundtrip_4kib(s, o)?;
    out.push(Figure::new(
        "transfer.roundtrip_4kib_fresh_us",
        v,
        "us (lower is better), first in the process",
        "raw.roundtrip_4kib_us",
        b,
    ));
    Ok(())
}

/// Write 4 KiB then read it back, `n` times: the server against
/// `write_buffer` and the raw read, in us per round trip.
fn roundtrip_4kib(s: &mut S, o: &Options) -> Result<(f64, f64), ServerError> {
    let rounds = o.rounds(3, 7);
    let device = s.device().clone();
    let queue = s.queue().clone();
    let cell = RefCell::new(&mut *s);
    let small = Bytes::from(vec![7u8; 4096]);
    let hs = alloc(&mut cell.borrow_mut(), 4096)?;
    let raw_small = raw::buffer(
        &device,
        4096,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    );
    let n = if o.quick { 50 } else { 200 };
    let small_back = raw::Readback::new(&device, 4096);
    let (v, b) = interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let t = Instant::now();
            for _ in 0..n {
                s.write(vec![(hs.copy_descriptor(), small.clone())], STREAM);
                let r = futures::executor::block_on(s.read(vec![hs.copy_descriptor()], STREAM));
                std::hint::black_box(r.ok().and_then(|mut v| v.pop()).map(|b| b.to_vec()));
            }
            us(t.elapsed(), n)
        },
        || {
            let t = Instant::now();
            for _ in 0..n {
                queue.write_buffer(&raw_small, 0, &small);
                std::hint::black_box(
                    small_back.read(&device, &queue, &raw_small, 4096, |b| b.to_vec()),
                );
            }
            us(t.elapsed(), n)
        },
    );
    Ok((v, b))
}

/// 64 MiB read with `read_chunks` of `chunk` bytes, each chunk summed by a
/// pool of worker threads (started before the timing, a job per
/// `raw::USE_PIECE`) as soon as it lands,
/// against the raw chunked loop doing the same (`raw::ChunkedReadback`);
/// GB/s, ours and raw.
pub fn chunked_read_gbps(
    s: &mut S,
    h: &compute_runtime::Handle,
    raw_src: &wgpu::Buffer,
    chunk: u64,
    rounds: usize,
) -> (f64, f64) {
    let device = s.device().clone();
    let queue = s.queue().clone();
    let chunked = raw::ChunkedReadback::new(&device, SIZE, chunk);
    let sum: fn(&[u8]) -> u64 = |b| raw::sum_words_in(b, usize::MAX);
    let workers = RefCell::new(Workers::per_core());
    let cell = RefCell::new(s);
    interleaved(
        rounds,
        || {
            let mut s = cell.borrow_mut();
            let mut workers = workers.borrow_mut();
            let t = Instant::now();
            let Ok(chunks) = s.read_chunks(h.copy_descriptor(), chunk, STREAM) else {
                return f64::NAN;
            };
            let mut given = 0;
            for c in futures::executor::block_on_stream(chunks).flatten() {
                for piece in raw::pieces(c.bytes.len(), raw::USE_PIECE) {
                    let bytes = c.bytes.slice(piece);
                    workers.run(move || sum(&bytes));
                    given += 1;
                }
            }
            std::hint::black_box(workers.gather(given));
            gbps(SIZE, t.elapsed())
        },
        || {
            let mut workers = workers.borrow_mut();
            let t = Instant::now();
            std::hint::black_box(chunked.read(&device, &queue, raw_src, &mut workers, sum));
            gbps(SIZE, t.elapsed())
        },
    )
}
