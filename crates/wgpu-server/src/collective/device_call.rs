//! One collective call whose data moves on the devices of a group that
//! shares device memory (`shared.rs`): its [`DeviceData`] (fill: this
//! rank's input copied into its exchange buffer; combine: every rank's
//! piece copied or folded into `dst`), run on the rank's engine thread.
//!
//! A call goes here when its group's path is the device and the call is
//! one the devices do exactly (`layout.rs`, `eligible`: a function of the
//! call and the group alone, so every rank decides the same); everything
//! else (and every `send`/`recv`) is host-staged as before.

use std::sync::Arc;

use compute_collective::DeviceData;
use compute_runtime::{CollectiveFault, ServerError};

use crate::collective::fold::{Folds, Span};
use crate::collective::layout::{Combine, Layout};
use crate::collective::pipeline::ScratchPool;
use crate::collective::shared::Exchange;
use crate::collective::stage::Source;
use crate::device::poller::PollerHandle;
use crate::stream::gate::Gate;
use crate::stream::submit::Submitter;

/// What a device call runs on: the rank's device, its exchange, its fold
/// kernels; made once per call from the server's parts.
#[derive(Clone, Debug)]
pub(crate) struct On {
    pub exchange: Arc<Exchange>,
    pub folds: Arc<Folds>,
    pub device: wgpu::Device,
    pub submitter: Submitter,
    pub poller: PollerHandle,
}

/// One rank's device half of one call.
#[derive(Debug)]
pub(crate) struct DeviceCall {
    on: On,
    layout: Layout,
    rank: usize,
    ranks: usize,
    /// Where this rank's input is read (`None`: it gives none).
    source: Option<Source>,
    /// Where its output goes: the buffer and the binding's offset.
    dst: Option<(wgpu::Buffer, u64)>,
    /// Nothing lands in `dst` once the stream gave up on the call.
    gate: Arc<Gate>,
    /// The device copy `source` is, when it is one (given back on drop).
    scratch: Option<ScratchPool>,
    /// The first piece was filled on the stream at the call.
    prefilled: bool,
}

impl DeviceCall {
    #[allow(clippy::too_many_arguments)] // The call's ends and its rank.
    pub fn new(
        on: On,
        layout: Layout,
        (rank, ranks): (usize, usize),
        source: Option<Source>,
        dst: Option<(wgpu::Buffer, u64)>,
        gate: Arc<Gate>,
        scratch: Option<ScratchPool>,
    ) -> Self {
        DeviceCall {
            on,
            layout,
            rank,
            ranks,
            source,
            dst,
            gate,
            scratch,
            prefilled: false,
        }
    }

    /// Records the fill of piece `piece` (this rank's input, read from
    /// `source`, copied into its exchange buffer) into `encoder`: what
    /// `fill` submits, or the server records on the stream at the call.
    pub fn encode_fill(
        on: &On,
        layout: Layout,
        source: &Source,
        encoder: &mut wgpu::CommandEncoder,
        piece: usize,
    ) -> Result<(), ServerError> {
        let l = layout;
        let (lo, len) = l.piece_range(piece);
        let own = on.exchange.own(l.blocks * l.stride())?;
        for c in 0..l.blocks {
            let to = Span {
                buffer: own.clone(),
                offset: c * l.stride(),
                len,
            };
            // A `src` that starts mid-word is shifted into place by a kernel.
            let from = source.base + c * l.block + lo;
            on.folds
                .encode_copy_from(encoder, &source.buffer, from, &to)?;
        }
        Ok(())
    }

    /// The first piece was filled on the stream, after the work before the
    /// call (its exchange buffer was free then): the engine's first fill
    /// has nothing left to do.
    pub fn prefilled(&mut self) {
        self.prefilled = true;
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.on
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("device collective"),
            })
    }

    /// Submits `encoder` and waits until it has run.
    fn submit(&self, encoder: wgpu::CommandEncoder) -> Result<wgpu::SubmissionIndex, ServerError> {
        self.on
            .submitter
            .commands(Some(encoder.finish()))
            .map(|(index, _)| index)
    }

    fn wait(&self, index: wgpu::SubmissionIndex) -> Result<(), ServerError> {
        futures::executor::block_on(self.on.poller.wait(Some(index))).unwrap_or_else(|_| {
            Err(ServerError::DeviceLost {
                reason: "the device's poller stopped during a collective".into(),
            })
        })
    }
}

impl DeviceData for DeviceCall {
    fn pieces(&self) -> usize {
        self.layout.pieces()
    }

    fn fill(&self, piece: usize) -> Result<(), ServerError> {
        let Some(source) = self
            .source
            .as_ref()
            .filter(|_| piece > 0 || !self.prefilled)
        else {
            return Ok(());
        };
        let mut encoder = self.encoder();
        DeviceCall::encode_fill(&self.on, self.layout, source, &mut encoder, piece)?;
        let index = self.submit(encoder)?;
        self.wait(index)
    }

    fn combine(&self, piece: usize) -> Result<(), ServerError> {
        let Some((dst, at)) = &self.dst else {
            return Ok(());
        };
        let l = self.layout;
        let (lo, len) = l.piece_range(piece);
        let x = |j: usize| self.on.exchange.of_rank(j);
        let mine = self.rank as u64 * l.stride();
        let mut encoder = self.encoder();
        match l.combine {
            Combine::Fold(reduction) => {
                let at_block = if l.blocks == 1 { 0 } else { mine };
                let mut inputs = Vec::with_capacity(self.ranks);
                for j in 0..self.ranks {
                    inputs.push(Span {
                        buffer: x(j)?,
                        offset: at_block,
                        len,
                    });
                }
                let out = Span {
                    buffer: dst.clone(),
                    offset: at + lo,
                    len,
                };
                self.on
                    .folds
                    .encode(&mut encoder, reduction, &inputs, &out)?;
            }
            Combine::Gather | Combine::Transpose => {
                let from = if l.combine == Combine::Gather {
                    0
                } else {
                    mine
                };
                for j in 0..self.ranks {
                    let to = at + j as u64 * l.block + lo;
                    encoder.copy_buffer_to_buffer(&x(j)?, from, dst, to, len);
                }
            }
            Combine::Root(root) => {
                encoder.copy_buffer_to_buffer(&x(root)?, 0, dst, at + lo, len);
            }
        }
        let index = self.gate.if_pending(|| self.submit(encoder)).ok_or(
            ServerError::CollectiveState {
                fault: CollectiveFault::StoppedWaiting,
            },
        )??;
        self.wait(index)
    }
}

impl Drop for DeviceCall {
    fn drop(&mut self) {
        if let (Some(pool), Some(source)) = (&self.scratch, &self.source) {
            pool.put(source.buffer.clone());
        }
    }
}

/// Whether `folds`' float products give the host's bits on this device
/// (denormals kept): folds a few denormal cases on the device and
/// compares. Blocks until the device has run them; `false` on any failure.
pub(crate) fn exact_floats(
    folds: &Folds,
    device: &wgpu::Device,
    submitter: &Submitter,
    poller: &PollerHandle,
) -> bool {
    let a: [f32; 8] = [
        1e-40,
        -3e-39,
        1.0,
        1e-45,
        f32::MIN_POSITIVE,
        5e-39,
        1e-20,
        -2e-40,
    ];
    let b: [f32; 8] = [2e-40, 3e-39, 1e-40, 1e-45, -1e-39, 1e-30, 1e-20, 7e-40];
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (a, b) = (bytes(&a), bytes(&b));
    [compute_runtime::ReduceOp::Prod].into_iter().all(|op| {
        let r = compute_runtime::Reduction::new(op, compute_runtime::DType::F32);
        let mut want = vec![0u8; a.len()];
        let host = compute_collective::reduce::reduce(
            r,
            &[&a, &b],
            &mut want,
            compute_collective::Parallelism::SERIAL,
        );
        host.is_ok()
            && probe(folds, device, submitter, poller, r, [&a, &b]).as_deref() == Some(&want[..])
    })
}

/// The device's fold of `inputs` under `r`, read back.
fn probe(
    folds: &Folds,
    device: &wgpu::Device,
    submitter: &Submitter,
    poller: &PollerHandle,
    r: compute_runtime::Reduction,
    inputs: [&[u8]; 2],
) -> Option<Vec<u8>> {
    let len = inputs[0].len() as u64;
    let storage = |contents: &[u8]| {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("collective float probe"),
            size: len,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        if let Ok(mut view) = buffer.slice(..).get_mapped_range_mut() {
            view.copy_from_slice(contents);
        }
        buffer.unmap();
        buffer
    };
    let spans: Vec<Span> = inputs
        .iter()
        .map(|c| Span {
            buffer: storage(c),
            offset: 0,
            len,
        })
        .collect();
    let out = Span {
        buffer: storage(&vec![0; len as usize]),
        offset: 0,
        len,
    };
    let back = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("collective float probe"),
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    folds.encode(&mut encoder, r, &spans, &out).ok()?;
    encoder.copy_buffer_to_buffer(&out.buffer, 0, &back, 0, len);
    let (index, _) = submitter.commands(Some(encoder.finish())).ok()?;
    let mapped = Arc::new(std::sync::Mutex::new(None));
    let slot = Arc::clone(&mapped);
    back.slice(..).map_async(wgpu::MapMode::Read, move |r| {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.is_ok());
    });
    futures::executor::block_on(poller.wait(Some(index)))
        .ok()?
        .ok()?;
    let ok = *mapped.lock().unwrap_or_else(|e| e.into_inner());
    if ok != Some(true) {
        return None;
    }
    let bytes = back.slice(..).get_mapped_range().ok()?.to_vec();
    back.unmap();
    Some(bytes)
}

/// A device call posted before its operands were checked: the engine
/// reaches it only once this rank's input is ready, which is provided
/// after [`LateCall::set`] (a call refused here provides its refusal, so
/// the engine never fills or combines it, and only counts it done).
#[derive(Debug)]
pub(crate) struct LateCall {
    call: std::sync::OnceLock<DeviceCall>,
    exchange: Arc<Exchange>,
}

impl LateCall {
    pub fn new(exchange: Arc<Exchange>) -> Self {
        LateCall {
            call: std::sync::OnceLock::new(),
            exchange,
        }
    }

    pub fn set(&self, call: DeviceCall) {
        let _ = self.call.set(call);
    }

    fn get(&self) -> Result<&DeviceCall, ServerError> {
        self.call.get().ok_or(ServerError::CollectiveState {
            fault: CollectiveFault::Misuse("a device collective ran before it was made"),
        })
    }
}

impl DeviceData for LateCall {
    fn pieces(&self) -> usize {
        self.call.get().map_or(1, DeviceData::pieces)
    }

    fn fill(&self, piece: usize) -> Result<(), ServerError> {
        self.get()?.fill(piece)
    }

    fn combine(&self, piece: usize) -> Result<(), ServerError> {
        self.get()?.combine(piece)
    }

    fn done(&self) {
        self.exchange.finished();
    }
}
