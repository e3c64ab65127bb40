//! The server side of a run: one server per rank on the one adapter, each
//! with the same buffers, and every operation as calls on them. Nothing
//! here knows what the answers should be.

use compute_runtime::{
    BufferBinding, Bytes, ComputeWait, CopyDescriptor, CubeCount, DType, DeviceId, Handle,
    KernelArguments, LaunchMode, MemoryConfiguration, MemoryId, MemoryPoolOptions, PoolKind,
    Reduction, Server, ServerCommunication, ServerError, ServerStorage, StreamId,
};
use wgpu_server::{BindingAccess, WgpuServerOptions, WgslKernel, WgslPassthrough};

use super::ops::{Coll, CollKind, Count, Local, Part};
use super::{FAR, FAR_BYTES, INITIAL_COUNTS, RANKS, VALUES, initial};
use crate::collective::group::device_ids;
use crate::common::*;
use crate::streams::{COPY_WGSL, copy_kernel};

/// The ranks' servers and buffers.
#[derive(Debug)]
pub struct Device {
    s: Vec<TestServer>,
    ids: Vec<DeviceId>,
    bufs: Vec<Vec<Handle>>,
    pub max: u32,
}

/// The words of count buffer `c` (the far one is padded to its size).
fn count_words(max: u32, c: usize, count: Count) -> Vec<u32> {
    let mut words = count.words(max).to_vec();
    if c == FAR {
        words.resize(FAR_BYTES / 4, 0);
    }
    words
}

/// Small slices on one sliced page; the far count buffer on a page of
/// its own.
fn config() -> MemoryConfiguration {
    MemoryConfiguration::Custom(vec![
        MemoryPoolOptions {
            kind: PoolKind::Sliced {
                page_size: 64 << 10,
                max_slice: 1 << 10,
            },
            max_reserved: None,
        },
        MemoryPoolOptions {
            kind: PoolKind::Exclusive { max_slice: 1 << 30 },
            max_reserved: None,
        },
    ])
}

/// Bytes of a step of the collectives of programs run with `tasks_max` 4:
/// their calls (a few words) move in several steps, so the model checks
/// the stepped path too (a step failing after the data started moving).
const STEPPED_CHUNK: usize = 8;

impl Device {
    pub fn open(tasks_max: usize) -> Self {
        let ids = device_ids(RANKS);
        let mut s: Vec<TestServer> = ids
            .iter()
            .map(|id| {
                let options = WgpuServerOptions::new()
                    .device_id(*id)
                    .adapter(0)
                    .memory(config())
                    .tasks_max(tasks_max);
                let options = match tasks_max {
                    4 => options.collective_chunk_bytes(STEPPED_CHUNK),
                    _ => options,
                };
                options.open::<WgslPassthrough>().expect("server")
            })
            .collect();
        for server in &mut s {
            server.comm_init(ids.clone()).expect("comm_init");
        }
        let max = s[0].device().limits().max_compute_workgroups_per_dimension;
        let mut dev = Device {
            s,
            ids,
            bufs: Vec::new(),
            max,
        };
        for r in 0..RANKS {
            let bufs = dev.buffers(r);
            dev.bufs.push(bufs);
        }
        dev
    }

    /// Rank `r`'s buffers, written and checked to be where the model says.
    fn buffers(&mut self, r: usize) -> Vec<Handle> {
        let s = &mut self.s[r];
        let mut bufs: Vec<Handle> = (0..VALUES)
            .map(|b| upload(s, u32_bytes(&initial(r, b)), S0))
            .collect();
        for (c, count) in INITIAL_COUNTS.into_iter().enumerate() {
            bufs.push(upload(s, u32_bytes(&count_words(self.max, c, count)), S0));
        }
        sync(s, S0).expect("setup");
        let mut page = |b: usize| {
            let binding = bufs[b].binding();
            s.get_resource(binding, S0).expect("page").handle.id
        };
        // The near counts share the data buffers' page; the far one does not.
        let data_page = page(0);
        for b in 1..VALUES + FAR {
            assert_eq!(page(b), data_page, "rank {r}: buffer {b} off the page");
        }
        assert_ne!(page(VALUES + FAR), data_page);
        bufs
    }

    pub fn memory_ids(&self) -> Vec<Vec<MemoryId>> {
        let ids = |bufs: &Vec<Handle>| bufs.iter().map(|h| h.memory.id()).collect();
        self.bufs.iter().map(ids).collect()
    }

    fn binding(&self, r: usize, part: Part) -> BufferBinding {
        let h = &self.bufs[r][part.buf];
        BufferBinding {
            memory: h.memory.clone(),
            offset: 0,
            size: if part.half { h.size / 2 } else { h.size },
        }
    }

    fn write(&mut self, r: usize, stream: StreamId, part: Part, data: Bytes) {
        let d = CopyDescriptor::contiguous(self.binding(r, part));
        self.s[r].write(vec![(d, data)], stream);
    }

    fn write_count(&mut self, r: usize, stream: StreamId, c: usize, count: Count) {
        let whole = Part {
            buf: VALUES + c,
            half: false,
        };
        let words = count_words(self.max, c, count);
        self.write(r, stream, whole, u32_bytes(&words).into());
    }

    fn launch(&mut self, r: usize, st: StreamId, k: WgslKernel, n: CubeCount, bufs: &[usize]) {
        let args = bufs.iter().map(|b| self.bufs[r][*b].binding()).collect();
        self.launch_with(r, st, k, n, args);
    }

    fn launch_with(
        &mut self,
        r: usize,
        stream: StreamId,
        k: WgslKernel,
        n: CubeCount,
        args: Vec<BufferBinding>,
    ) {
        let args = KernelArguments::buffers(args);
        // SAFETY: every kernel bounds its accesses (arrayLength, or a fixed
        // array the launch is refused for binding too little of).
        unsafe { self.s[r].launch(Box::new(k), n, args, stream, LaunchMode::Execute) };
    }
}

/// Every operation, as calls.
impl Device {
    /// Issues a host write or a launch on `stream` of rank `r`.
    pub fn issue(&mut self, r: usize, stream: u64, op: &Local) {
        let st = StreamId(stream);
        let whole = |buf| Part { buf, half: false };
        match *op {
            Local::Write { dst, value } => {
                let n = self.bufs[r][dst].size as usize / 4;
                self.write(r, st, whole(dst), u32_bytes(&vec![value; n]).into());
            }
            Local::WriteHalf { dst, value } => {
                let n = self.bufs[r][dst].size as usize / 8;
                let half = Part {
                    buf: dst,
                    half: true,
                };
                self.write(r, st, half, u32_bytes(&vec![value; n]).into());
            }
            Local::BadWrite { dst } => self.write(r, st, whole(dst), Bytes::from(vec![0u8; 8])),
            Local::WriteCount { c, count } => self.write_count(r, st, c, count),
            Local::Inc { dst } => self.launch(r, st, inc_kernel(), CubeCount::x(1), &[dst]),
            Local::Copy { src, dst } => {
                self.launch(r, st, copy_kernel(), CubeCount::x(1), &[src, dst]);
            }
            Local::IndirectInc { c, dst } => {
                let count = CubeCount::Dynamic(self.bufs[r][VALUES + c].binding());
                self.launch(r, st, inc_kernel(), count, &[dst]);
            }
            Local::BadArity { a, b } => {
                self.launch(r, st, inc_kernel(), CubeCount::x(1), &[a, b]);
            }
            Local::TooSmall { dst } => {
                let first_16 = BufferBinding {
                    memory: self.bufs[r][dst].memory.clone(),
                    offset: 0,
                    size: 16,
                };
                let n = CubeCount::x(1);
                self.launch_with(r, st, fixed_kernel(), n, vec![first_16]);
            }
            Local::Mismatch { src, dst } => {
                self.launch(r, st, mismatch_kernel(), CubeCount::x(1), &[src, dst]);
            }
            Local::Read { .. } | Local::Check { .. } | Local::Sync { .. } => {
                panic!("{op:?} is a question: it has a call of its own")
            }
            Local::SyncCollective => panic!("{op:?} is a question: it has a call of its own"),
        }
    }

    pub fn read(&mut self, r: usize, stream: u64, b: usize) -> Result<Vec<u32>, ServerError> {
        read(&mut self.s[r], &self.bufs[r][b], StreamId(stream)).map(|bytes| bytes_u32(&bytes))
    }

    pub fn check(&mut self, r: usize, stream: u64, b: usize) -> Result<(), ServerError> {
        let binding = self.bufs[r][b].binding();
        self.s[r].check(vec![binding], StreamId(stream))
    }

    pub fn sync(&mut self, r: usize, stream: u64, target: usize) -> Result<(), ServerError> {
        let binding = self.bufs[r][target].binding();
        futures::executor::block_on(self.s[r].sync(vec![binding], StreamId(stream)))
    }

    pub fn sync_collective(&mut self, r: usize, stream: u64) -> Result<(), ServerError> {
        self.s[r].sync_collective(StreamId(stream))
    }

    /// Issues `op` on every rank in turn; what each call returned.
    pub fn collective(&mut self, op: &Coll) -> Vec<Result<(), ServerError>> {
        (0..RANKS).map(|r| self.call(r, op)).collect()
    }

    fn call(&mut self, r: usize, op: &Coll) -> Result<(), ServerError> {
        let call = op.call(r);
        let stream = StreamId(op.streams[r]);
        let src = call.src.map(|p| self.binding(r, p));
        let dst = self.binding(r, call.dst);
        let ids = self.ids.clone();
        let s = &mut self.s[r];
        if call.capture {
            s.begin_capture(stream).expect("begin_capture");
        }
        let src_of = |src: Option<BufferBinding>| src.expect("this call has a source");
        let got = match op.kind {
            CollKind::AllReduce { overlap, .. } => {
                let dtype = if call.i32 { DType::I32 } else { DType::U32 };
                let mode = match overlap {
                    true => ComputeWait::Overlap,
                    false => ComputeWait::Wait,
                };
                s.all_reduce(src_of(src), dst, Reduction::sum(dtype), stream, ids, mode)
            }
            CollKind::Broadcast { root, .. } => s.broadcast(src, dst, stream, ids[root], ids),
            CollKind::AllGather { .. } => s.all_gather(src_of(src), dst, stream, ids),
        };
        if call.capture
            && let Ok(graph) = s.end_capture(stream)
        {
            s.graph_destroy(graph, stream);
        }
        got
    }
}

fn mismatch_kernel() -> WgslKernel {
    WgslKernel::new(
        "copy_declared_rw",
        COPY_WGSL,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite, BindingAccess::ReadWrite],
    )
}

fn fixed_kernel() -> WgslKernel {
    WgslKernel::new(
        "fixed64",
        r#"
@group(0) @binding(0) var<storage, read_write> x: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) { x[id.x] = x[id.x] + 1u; }
"#,
        "main",
        [64, 1, 1],
        vec![BindingAccess::ReadWrite],
    )
}
