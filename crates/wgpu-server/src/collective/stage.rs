//! Staging a collective's input: the device half of the data path.
//!
//! A rank's `src` is copied, on its stream, into pooled `MAP_READ` buffers
//! (the read path's): the whole of it for a call of one step, else one
//! buffer per step of the call's [`Plan`](compute_collective::Plan), each
//! copy its own submission so that the steps land one after the other. Once
//! a copy has run, the buffer's map callback hands the mapped range itself
//! to the communicator as the rank's input (or the step's,
//! [`Feed::provide`]), with no host copy. Nothing here waits: the device's
//! poller is asked to drive the submission, so the input arrives even if no
//! call on this server waits.
//!
//! Devices copy whole words: a step's pieces are copied from the word
//! before them to the word after them, and cut out of the mapped range (one
//! piece: a slice of it; several pieces whose ends are not words, as a
//! `reduce_scatter` of a `src` that starts mid-word: gathered on the host).

use std::ops::Range;
use std::sync::Arc;

use compute_collective::{Contribution, Feed};
use compute_runtime::{Bytes, CollectiveFault, ServerError};
use compute_stream::{DependOutcome, LateFaults};

use crate::device::poller::PollerHandle;
use crate::memory::readback::{Back, MappedRange};

const ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;

/// Where `src` is read from: byte `i` of it at `base + i` of `buffer` (its
/// page, or a copy of it).
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub buffer: wgpu::Buffer,
    pub base: u64,
}

/// The copies that stage one step (or a whole input) into a staging
/// buffer, and where its bytes lie once mapped.
#[derive(Clone, Debug)]
pub(crate) struct StepCopies {
    /// (offset in the source, offset in the staging buffer, bytes).
    copies: Vec<(u64, u64, u64)>,
    mapped_len: u64,
    /// (start, length) in the mapped range of each piece, in order.
    extract: Vec<(usize, usize)>,
}

impl StepCopies {
    /// The copies of the pieces `pieces` of `src` (byte ranges of it) from
    /// `source`, packed word by word.
    pub fn plan(source: &Source, pieces: &[Range<usize>]) -> Self {
        let (mut copies, mut extract) = (Vec::new(), Vec::<(usize, usize)>::new());
        let mut at = 0u64;
        for p in pieces.iter().filter(|p| !p.is_empty()) {
            let start = source.base + p.start as u64;
            let from = start - start % ALIGN;
            let end = (source.base + p.end as u64)
                .next_multiple_of(ALIGN)
                .min(source.buffer.size());
            copies.push((from, at, end - from));
            let piece = ((at + start - from) as usize, p.len());
            match extract.last_mut() {
                Some(last) if last.0 + last.1 == piece.0 => last.1 += piece.1,
                _ => extract.push(piece),
            }
            at += end - from;
        }
        StepCopies {
            copies,
            mapped_len: at.max(ALIGN),
            extract,
        }
    }

    /// Bytes the staging buffer needs.
    pub fn size(&self) -> u64 {
        self.mapped_len
    }

    /// Records the copies from `source` into `staging`.
    pub fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        source: &Source,
        staging: &wgpu::Buffer,
    ) {
        for (from, to, len) in &self.copies {
            encoder.copy_buffer_to_buffer(&source.buffer, *from, staging, *to, *len);
        }
    }
}

/// Where staged bytes go: the whole input, or one step of it.
pub(crate) enum Provide {
    Whole(Contribution),
    Step(Feed, usize),
}

impl Provide {
    fn give(self, input: Result<Bytes, Arc<ServerError>>) {
        match self {
            Provide::Whole(c) => c.provide(input),
            Provide::Step(feed, step) => feed.provide(step, input),
        }
    }
}

impl std::fmt::Debug for Provide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provide::Whole(_) => f.write_str("Provide::Whole"),
            Provide::Step(_, step) => write!(f, "Provide::Step({step})"),
        }
    }
}

/// A copy of `src` (or of one step of it) on its way to host memory, and
/// where it goes then.
#[derive(Debug)]
pub(crate) struct Staged {
    pub buffer: wgpu::Buffer,
    pub copies: StepCopies,
    pub to: Provide,
    /// Where the buffer goes once the bytes are used.
    pub back: Back,
    /// `src` was at risk when it was staged (written by work whose verdict
    /// comes late, see [`LateFaults`]): the registration that says whether
    /// the staged bytes were bad, asked once they have landed.
    pub risk: Option<(u64, Arc<LateFaults>)>,
}

impl Staged {
    /// After the submission `index` that holds the copy: maps the staging
    /// buffer, provides the input from the map callback, and has the poller
    /// drive the submission.
    pub fn map_and_provide(self, poller: &PollerHandle, index: wgpu::SubmissionIndex) {
        let Staged {
            buffer,
            copies,
            to,
            back,
            risk,
        } = self;
        let mapped = buffer.clone();
        let mapped_len = copies.mapped_len;
        buffer.map_async(wgpu::MapMode::Read, 0..mapped_len, move |r| {
            // Every verdict on the bytes copied is in by the time the copy
            // has run (see `compute_stream::LateFaults`).
            if let Err(cause) = judged(risk.as_ref()) {
                if r.is_ok() {
                    mapped.unmap();
                }
                back.give(mapped);
                to.give(Err(cause));
                return;
            }
            let input = r
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    mapped
                        .slice(0..mapped_len)
                        .get_mapped_range()
                        .map_err(|e| e.to_string())
                })
                .map_err(|why| {
                    Arc::new(ServerError::DeviceLost {
                        reason: format!("mapping a collective's staged input failed: {why}"),
                    })
                });
            let input = match input {
                Ok(view) => Ok(cut(view, mapped, back, &copies.extract)),
                Err(e) => {
                    back.give(mapped);
                    Err(e)
                }
            };
            to.give(input);
        });
        poller.kick(index);
    }

    /// The input will never be staged: tells the peers why.
    pub fn fail(self, cause: Arc<ServerError>) {
        self.back.give(self.buffer);
        self.to.give(Err(cause));
    }
}

/// Whether the staged bytes can be trusted, by the late verdicts on `src`.
fn judged(risk: Option<&(u64, Arc<LateFaults>)>) -> Result<(), Arc<ServerError>> {
    match risk.map(|(t, late)| late.outcome(*t)) {
        None | Some(DependOutcome::Clean) => Ok(()),
        // The input's own cause, as when the verdict was known at the call
        // (the copy read it: not a second step to name).
        Some(DependOutcome::Poisoned(cause)) => Err(match &*cause {
            ServerError::UntrustedInput { cause, .. } => Arc::clone(cause),
            _ => cause,
        }),
        Some(DependOutcome::Pending) => Err(Arc::new(ServerError::CollectiveState {
            fault: CollectiveFault::VerdictMissing,
        })),
    }
}

/// The staged bytes out of the mapped `view`: the mapped range itself for
/// one piece, else the pieces gathered (and the buffer given back at once).
fn cut(
    view: wgpu::BufferView,
    buffer: wgpu::Buffer,
    back: Back,
    extract: &[(usize, usize)],
) -> Bytes {
    match extract {
        [] => {
            drop(view);
            buffer.unmap();
            back.give(buffer);
            Bytes::new()
        }
        [(start, len)] => {
            Bytes::from_owner(MappedRange::returning(view, buffer, back, *start, *len))
        }
        many => {
            let mut out = Vec::with_capacity(many.iter().map(|(_, l)| l).sum());
            for (start, len) in many {
                out.extend_from_slice(view.get(*start..*start + *len).unwrap_or(&[]));
            }
            drop(view);
            buffer.unmap();
            back.give(buffer);
            Bytes::from(out)
        }
    }
}
