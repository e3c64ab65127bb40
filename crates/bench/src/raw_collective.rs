//! Raw-wgpu host-staged collectives: the baselines of the `collective.*`
//! figures. The same bytes as the server's collective (every rank's `src`
//! down, the result up into every rank's `dst`), the same steps (chunks of
//! the server's default chunk size), the same host parallelism (the
//! reductions and copies on the host-copy pool, `hostcopy::pool`), and
//! nothing else: no ordering, no trust, no communicator.
//!
//! One thread drives every rank. Each rank keeps [`DEPTH`] steps of its
//! `src` in flight downwards (a copy into a `MAP_READ` buffer and its map,
//! each a submission of its own), so the copies of the next steps run on
//! the device while the host combines this one; a step's result is filled
//! into a mapped `MAP_WRITE` buffer per rank and copied into `dst` by a
//! submission that nobody waits for (its buffer comes back through its map
//! callback), so the copies up overlap the next steps too. The run ends
//! when every device is idle. A one-step call (4 KiB) is two map round
//! trips: this is the fewest a host-staged collective can take.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compute_collective::reduce::{Parallelism, reduce};
use compute_runtime::{DType, Reduction};

use crate::raw::buffer;

/// Steps of `src` in flight downwards per rank.
pub const DEPTH: usize = 4;

/// What the raw loop computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawOp {
    /// f32 sum; `size` bytes in and out per rank.
    AllReduceSum,
    /// `size / ranks` bytes in per rank, `size` out.
    AllGather,
}

struct RawRank {
    device: wgpu::Device,
    queue: wgpu::Queue,
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
    down: Vec<wgpu::Buffer>,
    /// Mapped upload buffers ready to fill (their map callbacks put them
    /// back).
    up_free: Arc<Mutex<Vec<wgpu::Buffer>>>,
    /// Upload copies in flight, oldest first.
    up_busy: VecDeque<wgpu::SubmissionIndex>,
    /// Each in-flight step's download: (step, submission).
    down_busy: VecDeque<(usize, wgpu::SubmissionIndex)>,
}

/// The raw ranks: a `src` and a `dst` of `max` bytes on each device, and the
/// staging rings of one `chunk` each.
pub struct RawGroup {
    ranks: Vec<RawRank>,
    chunk: u64,
    /// A step's output, in words (so it can be read as `f32`).
    out: Vec<u32>,
}

/// The bytes of `words`.
fn words_as_bytes(words: &mut [u32]) -> &mut [u8] {
    // SAFETY: u32 has no padding, and u8 has the weaker alignment; every
    // byte pattern is valid for both.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), std::mem::size_of_val(words))
    }
}

impl RawGroup {
    /// `src` of every rank is filled with `fill(rank)`'s bytes (`max` of
    /// them).
    pub fn new(
        devices: &[(wgpu::Device, wgpu::Queue)],
        max: u64,
        chunk: u64,
        fill: impl Fn(usize) -> Vec<u8>,
    ) -> Self {
        let ranks = devices
            .iter()
            .enumerate()
            .map(|(r, (device, queue))| {
                let storage = wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST;
                let src = buffer(device, max, storage);
                queue.write_buffer(&src, 0, &fill(r));
                let dst = buffer(device, max, storage);
                let down = (0..DEPTH)
                    .map(|_| {
                        buffer(
                            device,
                            chunk * devices.len() as u64,
                            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        )
                    })
                    .collect();
                let up: Vec<wgpu::Buffer> = (0..DEPTH * devices.len())
                    .map(|_| {
                        device.create_buffer(&wgpu::BufferDescriptor {
                            label: None,
                            size: chunk * devices.len() as u64,
                            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                            mapped_at_creation: true,
                        })
                    })
                    .collect();
                queue.submit(std::iter::empty());
                crate::raw::wait(device);
                RawRank {
                    device: device.clone(),
                    queue: queue.clone(),
                    src,
                    dst,
                    down,
                    up_free: Arc::new(Mutex::new(up)),
                    up_busy: VecDeque::new(),
                    down_busy: VecDeque::new(),
                }
            })
            .collect();
        RawGroup {
            ranks,
            chunk,
            out: Vec::new(),
        }
    }

    /// One call of `op` on `size` bytes (see [`RawOp`]); its wall time.
    pub fn run(&mut self, op: RawOp, size: u64) -> Duration {
        let n = self.ranks.len() as u64;
        match op {
            RawOp::AllReduceSum => self.run_with(size, 1, |parts, out| {
                let _ = reduce(
                    Reduction::sum(DType::F32),
                    parts,
                    out,
                    Parallelism::default(),
                );
            }),
            RawOp::AllGather => self.run_with(size / n, n, |parts, out| {
                let len = parts.first().map_or(0, |p| p.len());
                for (q, part) in parts.iter().enumerate() {
                    let at = q * len;
                    compute_runtime::hostcopy::copy_parallel(&mut out[at..at + part.len()], part);
                }
            }),
        }
    }

    /// One call of `src_len` bytes per rank in steps: `combine` writes each
    /// step's output (`gather` pieces of the step's length, in a buffer
    /// aligned to 4 bytes) from every rank's step (in rank order), piece
    /// `q` going to `q * src_len + start` of every rank's `dst` (`gather`
    /// 1: one piece at `start`); its wall time.
    pub fn run_with(
        &mut self,
        src_len: u64,
        gather: u64,
        mut combine: impl FnMut(&[&[u8]], &mut [u8]),
    ) -> Duration {
        let chunk = self.chunk;
        let steps = src_len.div_ceil(chunk).max(1) as usize;
        let range = |k: usize| {
            let start = k as u64 * chunk;
            (start, (start + chunk).min(src_len) - start)
        };
        let t = Instant::now();
        for k in 0..steps.min(DEPTH) {
            self.issue_down(k, range(k));
        }
        for k in 0..steps {
            let (start, len) = range(k);
            self.combine(k, len, gather, &mut combine);
            if k + DEPTH < steps {
                self.issue_down(k + DEPTH, range(k + DEPTH));
            }
            let pieces: Vec<(u64, u64, u64)> = (0..gather)
                .map(|q| (q * len, q * src_len + start, len))
                .collect();
            for r in 0..self.ranks.len() {
                self.upload(r, &pieces);
            }
        }
        for r in &self.ranks {
            crate::raw::wait(&r.device);
        }
        t.elapsed()
    }

    /// Copies step `k` (`len` bytes at `start` of `src`) into each rank's
    /// staging slot and maps it, each rank its own submission.
    fn issue_down(&mut self, k: usize, (start, len): (u64, u64)) {
        for r in &mut self.ranks {
            let slot = &r.down[k % DEPTH];
            let mut enc = r.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&r.src, start, slot, 0, len);
            let index = r.queue.submit(Some(enc.finish()));
            slot.map_async(wgpu::MapMode::Read, 0..len, |_| {});
            r.down_busy.push_back((k, index));
        }
    }

    /// Waits for step `k` on every rank and combines it into `self.out`.
    fn combine(
        &mut self,
        k: usize,
        len: u64,
        gather: u64,
        combine: &mut impl FnMut(&[&[u8]], &mut [u8]),
    ) {
        for r in &mut self.ranks {
            if let Some((step, index)) = r.down_busy.pop_front() {
                debug_assert_eq!(step, k);
                let _ = r.device.poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: None,
                });
            }
        }
        let views: Vec<wgpu::BufferView> = self
            .ranks
            .iter()
            .filter_map(|r| r.down[k % DEPTH].slice(0..len).get_mapped_range().ok())
            .collect();
        let parts: Vec<&[u8]> = views.iter().map(|v| &v[..]).collect();
        let out_len = (len * gather) as usize;
        self.out.resize(out_len.div_ceil(4), 0);
        combine(&parts, &mut words_as_bytes(&mut self.out)[..out_len]);
        drop(views);
        for r in &self.ranks {
            r.down[k % DEPTH].unmap();
        }
    }

    /// Fills a free upload buffer of rank `r` with `self.out` and copies
    /// `pieces` (offset in `out`, offset in `dst`, bytes) into `dst`.
    fn upload(&mut self, r: usize, pieces: &[(u64, u64, u64)]) {
        let len = pieces.iter().map(|p| p.0 + p.2).max().unwrap_or(0) as usize;
        let out = &words_as_bytes(&mut self.out)[..len];
        let rank = &mut self.ranks[r];
        let up = loop {
            if let Some(b) = rank.up_free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
                break b;
            }
            // Every buffer is in flight: wait for the oldest copy (its map
            // callback returns its buffer).
            let oldest = rank.up_busy.pop_front();
            let _ = rank.device.poll(wgpu::PollType::Wait {
                submission_index: oldest,
                timeout: None,
            });
        };
        fill(&up, out);
        let mut enc = rank.device.create_command_encoder(&Default::default());
        for (from, to, len) in pieces {
            enc.copy_buffer_to_buffer(&up, *from, &rank.dst, *to, *len);
        }
        let index = rank.queue.submit(Some(enc.finish()));
        let free = Arc::clone(&rank.up_free);
        let mapped = up.clone();
        up.map_async(wgpu::MapMode::Write, .., move |res| {
            if res.is_ok() {
                free.lock().unwrap_or_else(|e| e.into_inner()).push(mapped);
            }
        });
        rank.up_busy.push_back(index);
    }
}

/// A mapped range's start, for the copy threads.
#[derive(Clone, Copy)]
struct Dst(*mut u8);
// SAFETY: each task writes its own disjoint piece of the mapped range, which
// outlives the pool's scope.
unsafe impl Send for Dst {}
// SAFETY: as above.
unsafe impl Sync for Dst {}

impl Dst {
    fn at(self, offset: usize) -> *mut u8 {
        self.0.wrapping_add(offset)
    }
}

/// Copies `data` into the start of the mapped `buffer` on the host-copy
/// threads, and unmaps it.
fn fill(buffer: &wgpu::Buffer, data: &[u8]) {
    {
        let Ok(mut view) = buffer.slice(0..data.len() as u64).get_mapped_range_mut() else {
            return;
        };
        let mut whole = view.slice(..);
        let pieces = compute_runtime::hostcopy::pieces_for(data.len());
        match compute_runtime::hostcopy::pool() {
            Some(pool) if pieces > 1 => {
                let chunk = data.len().div_ceil(pieces);
                let base = Dst(whole.as_raw_ptr().cast::<u8>().as_ptr());
                pool.scope(|scope| {
                    for (i, src) in data.chunks(chunk).enumerate() {
                        scope.spawn(move |_| {
                            // SAFETY: the mapped view holds `data.len()`
                            // writable bytes until the scope ends; the pieces
                            // are disjoint and inside it.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    src.as_ptr(),
                                    base.at(i * chunk),
                                    src.len(),
                                )
                            }
                        });
                    }
                });
            }
            _ => whole.copy_from_slice(data),
        }
    }
    buffer.unmap();
}
