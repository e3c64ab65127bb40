//! `collective.*`: an nccl-tests-like table of the collectives on 2 and 4
//! ranks, and the figures against the raw host-staged loop doing the same
//! bytes with the same steps and host threads (`raw_collective.rs`):
//! `collective.all_reduce_{4kib_us,64mib_busbw_gbps,1gib_busbw_gbps}` on 2
//! ranks, `collective.all_gather_4kib_4ranks_us`.
//!
//! Ranks are servers on separate wgpu devices of one adapter (as in
//! `tests/gpu/collective/`), one communicator over them. A host-staged
//! collective copies each rank's `src` into mapped staging step by step,
//! the communicator combines the ranks' steps on the host, and each step's
//! result is copied up into every rank's `dst`; where the devices share
//! memory (a GPU's, not a CPU adapter's) calls from 256 KiB per rank move
//! on the devices instead (`collective/device_call.rs`), and the figures'
//! baseline is the raw loop over shared memory (`raw_shared.rs`).
//!
//! **One call, timed**: one thread drives every rank. It posts the
//! collective on every rank in turn (`ComputeWait::Wait`), then calls every
//! rank's `sync` and only then waits on the returned futures. A `sync`
//! submits at the call (after the collective's result is in) and its future
//! only waits for the GPU, so the ranks' uploads run side by side, as the
//! downloads do (each rank's staging, map and write happen on its server's
//! own poller and applier threads). One thread per rank was tried and was
//! not faster (see `docs/benchmarks.md`), so the bench keeps one thread.
//! The time of a round of all ranks is the time of one call; a row is the
//! median over `iters` rounds after `warmup` rounds.
//!
//! **Rows** (nccl-tests' columns): `size` is the larger per-rank buffer in
//! bytes (`dst` of `all_gather`, `src` of `reduce_scatter`, either of the
//! others), `count` its f32 elements; `algbw = size / time`; `busbw =
//! algbw * factor`, the factor nccl-tests uses to compare with the link
//! bandwidth: `all_reduce` 2(n-1)/n; `all_gather`, `reduce_scatter`,
//! `all_to_all` (n-1)/n; `broadcast` 1. `#wrong` counts the elements, over
//! every rank, that differ from the expected result of the size's last call
//! (`dst` is filled with NaN before the size's first call, so a call that
//! wrote nothing cannot pass). Buffers are allocated once at the largest
//! size; each row binds their first bytes.

use std::time::Instant;

use compute_runtime::{
    BufferBinding, Bytes, ComputeWait, CopyDescriptor, DType, DeviceId, Handle, Reduction, Server,
    ServerCommunication, ServerError,
};
use wgpu_server::{WgpuServerOptions, WgslPassthrough};

mod table;

use crate::S;
use crate::harness::{Options, STREAM, alloc, gbps, interleaved};
use crate::raw_collective::{RawGroup, RawOp};
use crate::raw_shared::{Baseline, RawShared};
use crate::report::Figure;
use wgpu_server::testing::collective_on_device;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The bandwidth figure's size.
const FIGURE_SIZE: u64 = 64 * MIB;
/// The small-call figures' size.
const SMALL: u64 = 4096;

/// The collectives of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    AllToAll,
}

impl Op {
    const ALL: [Op; 5] = [
        Op::AllReduce,
        Op::AllGather,
        Op::ReduceScatter,
        Op::Broadcast,
        Op::AllToAll,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::AllGather => "all_gather",
            Op::ReduceScatter => "reduce_scatter",
            Op::Broadcast => "broadcast",
            Op::AllToAll => "all_to_all",
        }
    }

    fn redop(self) -> &'static str {
        match self {
            Op::AllReduce | Op::ReduceScatter => "sum",
            _ => "none",
        }
    }

    /// nccl-tests' bus-bandwidth factor on `n` ranks.
    fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::AllGather | Op::ReduceScatter | Op::AllToAll => (n - 1.0) / n,
            Op::Broadcast => 1.0,
        }
    }

    /// Bytes of `src` and `dst` per rank for a row of `size` bytes.
    fn lens(self, size: u64, n: u64) -> (u64, u64) {
        match self {
            Op::AllGather => (size / n, size),
            Op::ReduceScatter => (size, size / n),
            Op::AllReduce | Op::Broadcast | Op::AllToAll => (size, size),
        }
    }

    /// Element `i` of rank `rank`'s result, for a row of `count` elements.
    fn expected(self, rank: usize, i: usize, n: usize, count: usize) -> f32 {
        let chunk = count / n;
        match self {
            Op::AllReduce => (0..n).map(|q| value(q, i)).sum(),
            Op::AllGather => value(i / chunk, i % chunk),
            Op::ReduceScatter => (0..n).map(|q| value(q, rank * chunk + i)).sum(),
            Op::Broadcast => value(0, i),
            Op::AllToAll => value(i / chunk, rank * chunk + i % chunk),
        }
    }
}

/// Element `i` of rank `rank`'s `src`: small integers, so sums of up to 4
/// ranks are exact in f32 and the check can compare bits.
fn value(rank: usize, i: usize) -> f32 {
    ((i * 7 + rank * 131) % 1031) as f32
}

/// Rank `r`'s `src` of `max` bytes, as the servers' are filled.
fn filled(max: u64) -> impl Fn(usize) -> Vec<u8> + Copy {
    move |r| {
        (0..(max / 4) as usize)
            .flat_map(|i| value(r, i).to_le_bytes())
            .collect()
    }
}

/// `n` servers on one adapter, a communicator over them, and each rank's
/// `src` (filled with [`value`]) and `dst` of `max` bytes.
struct Ranks {
    servers: Vec<S>,
    ids: Vec<DeviceId>,
    src: Vec<Handle>,
    dst: Vec<Handle>,
    /// `max` bytes of NaN, to reset `dst` before each row.
    nan: Bytes,
}

impl Ranks {
    fn open(n: usize, first_id: u64, max: u64) -> Result<Self, ServerError> {
        let ids: Vec<DeviceId> = (0..n as u64).map(|i| DeviceId(first_id + i)).collect();
        let mut servers = ids
            .iter()
            .map(|id| {
                WgpuServerOptions::new()
                    .device_id(*id)
                    .adapter(0)
                    .open::<WgslPassthrough>()
            })
            .collect::<Result<Vec<S>, _>>()?;
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        for (r, s) in servers.iter_mut().enumerate() {
            s.comm_init(ids.clone())?;
            let data: Vec<u8> = (0..(max / 4) as usize)
                .flat_map(|i| value(r, i).to_le_bytes())
                .collect();
            let h = alloc(s, max)?;
            s.write(vec![(h.copy_descriptor(), Bytes::from(data))], STREAM);
            src.push(h);
            dst.push(alloc(s, max)?);
        }
        for s in servers.iter_mut() {
            futures::executor::block_on(s.sync(vec![], STREAM))?;
        }
        Ok(Ranks {
            servers,
            ids,
            src,
            dst,
            nan: Bytes::from(vec![0xff; max as usize]),
        })
    }

    fn n(&self) -> usize {
        self.servers.len()
    }

    /// Each rank's device and queue, for the raw loops.
    fn devices(&self) -> Vec<(wgpu::Device, wgpu::Queue)> {
        self.servers
            .iter()
            .map(|s| (s.device().clone(), s.queue().clone()))
            .collect()
    }

    /// Posts `op` on every rank in turn, then syncs them all: one call.
    fn round(&mut self, op: Op, size: u64) -> Result<(), ServerError> {
        let n = self.n();
        let (src_len, dst_len) = op.lens(size, n as u64);
        let red = Reduction::sum(DType::F32);
        for (r, s) in self.servers.iter_mut().enumerate() {
            let src = prefix(&self.src[r], src_len);
            let dst = prefix(&self.dst[r], dst_len);
            let ids = self.ids.clone();
            match op {
                Op::AllReduce => s.all_reduce(src, dst, red, STREAM, ids, ComputeWait::Wait),
                Op::AllGather => s.all_gather(src, dst, STREAM, ids),
                Op::ReduceScatter => s.reduce_scatter(src, dst, red, STREAM, ids),
                Op::Broadcast => {
                    let root = self.ids[0];
                    s.broadcast((r == 0).then_some(src), dst, STREAM, root, ids)
                }
                Op::AllToAll => s.all_to_all(src, dst, STREAM, ids),
            }?;
        }
        // Every rank's sync submits now; the futures only wait.
        let waits: Vec<_> = self
            .servers
            .iter_mut()
            .map(|s| s.sync(vec![], STREAM))
            .collect();
        for w in waits {
            futures::executor::block_on(w)?;
        }
        Ok(())
    }

    /// Fills every rank's `dst` with NaN up to `len` bytes.
    fn reset_dst(&mut self, len: u64) -> Result<(), ServerError> {
        for (s, dst) in self.servers.iter_mut().zip(&self.dst) {
            let d = CopyDescriptor::contiguous(prefix(dst, len));
            s.write(vec![(d, self.nan.slice(..len as usize))], STREAM);
        }
        for s in self.servers.iter_mut() {
            futures::executor::block_on(s.sync(vec![], STREAM))?;
        }
        Ok(())
    }

    /// Elements of every rank's `dst` that differ from `op`'s result.
    fn wrong(&mut self, op: Op, size: u64) -> Result<usize, ServerError> {
        let n = self.n();
        let (_, dst_len) = op.lens(size, n as u64);
        let count = (size / 4) as usize;
        let mut wrong = 0;
        for (r, s) in self.servers.iter_mut().enumerate() {
            let d = CopyDescriptor::contiguous(prefix(&self.dst[r], dst_len));
            let got = futures::executor::block_on(s.read(vec![d], STREAM))?;
            let got = got.first().map_or(&[][..], |b| &b[..]);
            let (words, _) = got.as_chunks::<4>();
            wrong += words
                .iter()
                .enumerate()
                .filter(|(i, w)| f32::from_le_bytes(**w) != op.expected(r, *i, n, count))
                .count();
            wrong += (dst_len as usize / 4).saturating_sub(words.len());
        }
        Ok(wrong)
    }
}

/// The first `len` bytes of `h`.
fn prefix(h: &Handle, len: u64) -> BufferBinding {
    BufferBinding {
        memory: h.memory.clone(),
        offset: h.offset,
        size: len,
    }
}

/// The raw loop over `ranks`' own devices, `src` filled as the server's
/// (`value`), `max` bytes per rank.
fn raw_group(ranks: &Ranks, max: u64) -> Baseline {
    let devices = ranks.devices();
    let fill = filled(max);
    let on_device = collective_on_device(&ranks.servers[0], &ranks.ids) == Some(true);
    if on_device && let Some(raw) = RawShared::new(&devices, max, fill) {
        return Baseline::Shared(raw);
    }
    let chunk = (compute_collective::DEFAULT_CHUNK_BYTES as u64).min(max);
    Baseline::Host(RawGroup::new(&devices, max, chunk, fill))
}

/// One figure: `op` on `size` bytes through the server and through the raw
/// loop, interleaved; busbw in GB/s, or (`us`) the time of one call.
#[allow(clippy::too_many_arguments)] // The figure's names, its call and its unit.
fn compare(
    ranks: &mut Ranks,
    raw: &mut Baseline,
    o: &Options,
    (op, raw_op, size): (Op, RawOp, u64),
    us: bool,
    name: &'static str,
    unit: String,
    // The host-staged loop's name, and the shared-memory loop's.
    baseline: (&'static str, &'static str),
) -> Result<Figure, ServerError> {
    let baseline = raw.name(baseline.0, baseline.1);
    let n = ranks.n();
    let report = |secs: f64| {
        if us {
            secs * 1e6
        } else {
            gbps(size, std::time::Duration::from_secs_f64(secs)) * op.bus_factor(n)
        }
    };
    let mut failed = None;
    let mut ours = || {
        let t = Instant::now();
        match ranks.round(op, size) {
            Ok(()) => report(t.elapsed().as_secs_f64()),
            Err(e) => {
                failed.get_or_insert(e);
                f64::NAN
            }
        }
    };
    let mut raw_loop = || report(raw.run(raw_op, size).as_secs_f64());
    // Untimed: the first call of a size allocates staging on both paths.
    ours();
    raw_loop();
    let rounds = if size <= SMALL {
        o.rounds(21, 101)
    } else {
        o.rounds(3, 7)
    };
    let (v, b) = interleaved(rounds, ours, raw_loop);
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Figure::new(name, v, unit, baseline, b))
}

/// The 2-rank figures: a 4 KiB call's time, and busbw at 64 MiB and (full
/// runs) 1 GiB.
fn figures_2(ranks: &mut Ranks, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let large = if o.quick { FIGURE_SIZE } else { GIB };
    let devices = ranks.devices();
    out.extend(crate::switch::figure(&devices, o));
    out.extend(crate::switch::duplex(&devices, o));
    // Only when asked until it has run on the H200: the device call that
    // first carried it lost its machine before answering (see
    // docs/benchmarks.md).
    if o.asks_for("collective.two_device_kernels") {
        out.extend(crate::switch::kernels_at_once(&devices, o));
    }
    let mut raw = raw_group(ranks, large);
    let ar = |size| (Op::AllReduce, RawOp::AllReduceSum, size);
    out.push(compare(
        ranks,
        &mut raw,
        o,
        ar(SMALL),
        true,
        "collective.all_reduce_4kib_us",
        "us per call, 2 ranks, f32 sum, posted and synced on every rank (lower is better)".into(),
        ("raw.all_reduce_4kib_us", "raw.shared_all_reduce_4kib_us"),
    )?);
    let busbw = "GB/s bus bandwidth, 2 ranks, f32 sum (higher is better)";
    out.push(compare(
        ranks,
        &mut raw,
        o,
        ar(FIGURE_SIZE),
        false,
        "collective.all_reduce_64mib_busbw_gbps",
        busbw.into(),
        (
            "raw.all_reduce_64mib_busbw_gbps",
            "raw.shared_all_reduce_64mib_busbw_gbps",
        ),
    )?);
    if !o.quick {
        out.push(compare(
            ranks,
            &mut raw,
            o,
            ar(GIB),
            false,
            "collective.all_reduce_1gib_busbw_gbps",
            busbw.into(),
            (
                "raw.all_reduce_1gib_busbw_gbps",
                "raw.shared_all_reduce_1gib_busbw_gbps",
            ),
        )?);
    }
    Ok(())
}

/// The 4-rank figure: a 4 KiB `all_gather`'s time.
fn figures_4(ranks: &mut Ranks, o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let mut raw = raw_group(ranks, SMALL);
    out.push(compare(
        ranks,
        &mut raw,
        o,
        (Op::AllGather, RawOp::AllGather, SMALL),
        true,
        "collective.all_gather_4kib_4ranks_us",
        "us per call, 4 ranks, 4 KiB gathered (1 KiB each), posted and synced on every rank \
         (lower is better)"
            .into(),
        (
            "raw.all_gather_4kib_4ranks_us",
            "raw.shared_all_gather_4kib_4ranks_us",
        ),
    )?);
    Ok(())
}

pub fn figures(o: &Options, out: &mut Vec<Figure>) -> Result<(), ServerError> {
    let largest = table::sizes(o).last().copied().unwrap_or(4096);
    for (n, first_id) in [(2usize, 100u64), (4, 200)] {
        // The 2-rank figures run at 64 MiB even in a quick run.
        let max = if n == 2 {
            largest.max(FIGURE_SIZE)
        } else {
            largest
        };
        let mut ranks = Ranks::open(n, first_id, max)?;
        table::table(&mut ranks, o)?;
        match n {
            2 => {
                figures_2(&mut ranks, o, out)?;
                if o.asks_for("probe.one_context") {
                    let (devices, fill) = (ranks.devices(), filled(FIGURE_SIZE));
                    crate::one_context::probe(&devices, FIGURE_SIZE, fill, o, out);
                }
            }
            _ => figures_4(&mut ranks, o, out)?,
        }
    }
    println!();
    Ok(())
}
