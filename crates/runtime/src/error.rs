//! The errors every server path returns.
//!
//! One enum, [`ServerError`], with a variant per thing a caller can act on:
//! fix the input, free memory, give up on the device. It is `Clone` because
//! one failure is reported many times: to the call that caused it, to every
//! `check` and `read` of the bytes it poisoned, and to the next `sync`.

use std::sync::Arc;

use crate::{CollectiveFault, InternalFault};

use crate::{DType, GraphId, KernelArray, MemoryId, StreamId};

/// Why a server call could not do what it was asked.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerError {
    /// The handle was never bound with `initialize_memory`, or its slice was
    /// already freed.
    #[error("unknown memory handle {memory}: never initialized, or already freed")]
    UnknownHandle {
        /// The handle's id.
        memory: MemoryId,
    },
    /// `initialize_memory` on a handle that is already bound.
    #[error("memory handle {memory} is already initialized")]
    AlreadyInitialized {
        /// The handle's id.
        memory: MemoryId,
    },
    /// A byte range reaches past the end of its slice.
    #[error(
        "out of bounds: bytes {offset}..{offset}+{size} of {memory}, which holds {capacity} bytes"
    )]
    OutOfBounds {
        /// The slice.
        memory: MemoryId,
        /// Start of the range asked for.
        offset: u64,
        /// Length of the range asked for.
        size: u64,
        /// Bytes the slice holds.
        capacity: u64,
    },
    /// Data and descriptor disagree on how many bytes move.
    #[error("size mismatch: the descriptor names {expected} bytes, the data has {actual}")]
    SizeMismatch {
        /// Bytes the descriptor describes.
        expected: u64,
        /// Bytes the caller supplied.
        actual: u64,
    },
    /// A size or count the operation cannot take (zero, misaligned, ...).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What was wrong, in words.
        reason: String,
    },
    /// A request over a hard limit of the device.
    #[error("{limit} exceeded: asked for {requested}, the device allows {max}")]
    LimitExceeded {
        /// The limit's name as wgpu spells it.
        limit: &'static str,
        /// What was asked.
        requested: u64,
        /// What the device allows.
        max: u64,
    },
    /// The allocator or the device could not provide the memory.
    #[error("out of memory: could not reserve {size} bytes ({reason})")]
    OutOfMemory {
        /// Bytes asked for.
        size: u64,
        /// Which limit was hit.
        reason: String,
    },
    /// The memory configuration given at construction is inconsistent.
    #[error("invalid memory configuration: {reason}")]
    InvalidConfiguration {
        /// What is inconsistent.
        reason: String,
    },
    /// A kernel failed to compile; `diagnostic` is the compiler's own text.
    #[error("kernel `{kernel}` failed to compile: {diagnostic}")]
    Compilation {
        /// The kernel's name.
        kernel: String,
        /// The compiler's diagnostic (naga's, for WGSL).
        diagnostic: String,
    },
    /// A launch the client refused before enqueuing it (its arguments do
    /// not fit the kernel, a binding is unknown or out of bounds, the
    /// kernel does not compile...): `cause` says why. Nothing was enqueued,
    /// so nothing was written or poisoned.
    #[error("launch of `{kernel}`: {cause}")]
    Launch {
        /// The kernel's name.
        kernel: String,
        /// What was wrong.
        cause: Arc<ServerError>,
    },
    /// The kernel handed to `launch` is not one this server's compiler knows.
    #[error("kernel `{kernel}` is not a kernel of the {compiler} compiler")]
    ForeignKernel {
        /// The kernel's name.
        kernel: String,
        /// The server's compiler.
        compiler: &'static str,
    },
    /// wgpu rejected an operation at enqueue time (captured by an error scope).
    #[error("validation error: {message}")]
    Validation {
        /// wgpu's message.
        message: String,
    },
    /// A kernel's declared interface disagrees with its module (binding
    /// count, a binding's access, the scalar block, the workgroup size), or
    /// the module departs from the server's binding model.
    #[error("kernel `{kernel}`: the declared layout disagrees with the module: {reason}")]
    LayoutMismatch {
        /// The kernel's name.
        kernel: String,
        /// Which binding or property disagrees, with both sides.
        reason: String,
    },
    /// The queue refused a batch of work, so none of it ran; what it wrote
    /// is poisoned with this error. The checks before encoding exist so
    /// that this does not happen; seeing it means one was missing.
    #[error("the queue refused a batch: {reason}")]
    BatchRejected {
        /// wgpu's message.
        reason: String,
    },
    /// A binding (or the scalar block) is smaller than the kernel's module
    /// needs: WebGPU's minimum binding size, checked before encoding.
    #[error(
        "kernel `{kernel}`: binding {binding} has {size} bytes, the module needs at least {min}"
    )]
    BindingTooSmall {
        /// The kernel's name.
        kernel: String,
        /// `@binding` index (the scalar block is the binding after the
        /// buffers).
        binding: u32,
        /// Bytes bound.
        size: u64,
        /// The minimum binding size of the module's declaration.
        min: u64,
    },
    /// A typed slice used as another element type by a typed host call
    /// (`read_vec`, `write_from_slice`) or typed again.
    #[error("{memory} holds {holds}, not {asked}")]
    ElementType {
        /// The slice.
        memory: MemoryId,
        /// The element type it was created with.
        holds: DType,
        /// The element type the call used.
        asked: DType,
    },
    /// A typed slice bound where the kernel's module declares another
    /// element type: refused before anything is enqueued, since the kernel
    /// would read its bytes as the wrong type.
    #[error("kernel `{kernel}`: binding {binding} declares {declared}, but {memory} holds {holds}")]
    BindingType {
        /// The kernel's name.
        kernel: String,
        /// `@binding` index.
        binding: u32,
        /// The slice bound there.
        memory: MemoryId,
        /// The element type the module declares for the binding.
        declared: DType,
        /// The element type the slice was created with.
        holds: DType,
    },
    /// A buffer shorter than the length its kernel declares for it under
    /// the launch's scalars (`KernelBuilder::input_len`,
    /// `WgslKernel::with_len`), refused when the arguments are made.
    #[error(
        "kernel `{kernel}`: binding {binding} ({memory}) holds {actual} element(s), the kernel \
         declares at least {expected} for these scalars"
    )]
    BindingLength {
        /// The kernel's name.
        kernel: String,
        /// `@binding` index.
        binding: u32,
        /// The slice bound there.
        memory: MemoryId,
        /// Elements the declaration asks for.
        expected: u64,
        /// Elements the binding holds.
        actual: u64,
    },
    /// Two bindings of one launch share bytes and at least one of them is
    /// written: invocations would read bytes others are writing, in no
    /// defined order (WebGPU refuses such a usage conflict; the server binds
    /// every storage buffer writable, so it checks the bytes itself). An
    /// in-place kernel binds the buffer once, read-write.
    #[error(
        "kernel `{kernel}`: binding {first} ({first_memory}) and binding {second} \
         ({second_memory}) share bytes and binding {written} is written"
    )]
    BindingsOverlap {
        /// The kernel's name.
        kernel: String,
        /// The first binding's index.
        first: u32,
        /// The slice bound there.
        first_memory: MemoryId,
        /// The second binding's index.
        second: u32,
        /// The slice bound there.
        second_memory: MemoryId,
        /// The one of them the kernel writes (the second, when both are).
        written: u32,
    },
    /// A scalar argument of another type than the kernel's uniform block
    /// declares for it (checked by `WgslKernel::args` against the source;
    /// an IR kernel's `args` checks its declared scalars the same way).
    #[error(
        "kernel `{kernel}`: scalar argument {index} (`{member}`) is declared {declared}, \
         the call passes {passed}"
    )]
    ScalarType {
        /// The kernel's name.
        kernel: String,
        /// The argument's position.
        index: u32,
        /// The uniform block's member it lands in.
        member: String,
        /// The member's type.
        declared: DType,
        /// The argument's type.
        passed: DType,
    },
    /// Fewer or more scalar arguments than the kernel's uniform block has
    /// members (a missing one would read zero).
    #[error("kernel `{kernel}` declares {declared} scalar(s), the call passes {passed}")]
    ScalarCount {
        /// The kernel's name.
        kernel: String,
        /// Members of the uniform block.
        declared: u32,
        /// Arguments passed.
        passed: u32,
    },
    /// A kernel compiled with reported bounds checks
    /// (`BoundsChecks::Reported`) accessed an array outside its length.
    /// The access itself was contained (a load read zero or a clamped
    /// element, a store was dropped or clamped), and the launch's writes are
    /// poisoned with this error once its batch has run. `index` and `len`
    /// are of the first such access the device recorded; `count` is how many
    /// there were in the launch.
    #[error(
        "kernel `{kernel}`: out-of-bounds access to {array} at index {index} (length {len}; \
         {count} such access(es) in the launch)"
    )]
    OutOfBoundsAccess {
        /// The kernel's name.
        kernel: String,
        /// The array accessed.
        array: KernelArray,
        /// The index used, as a `u32` (a negative `i32` index wraps).
        index: u32,
        /// The array's length in elements.
        len: u32,
        /// Out-of-bounds accesses in the launch (saturating).
        count: u32,
    },
    /// Work that would have read untrusted bytes was refused, so what it
    /// writes is untrusted too (poison follows data). `input` is the
    /// untrusted slice it reads; `cause` is why that slice is untrusted.
    #[error("input {input} is untrusted: {cause}")]
    UntrustedInput {
        /// The untrusted slice the work reads.
        input: MemoryId,
        /// The error that poisoned it.
        cause: Arc<ServerError>,
    },
    /// The bytes asked about were written by work that failed; `cause` is the
    /// failure. They stay untrusted until a successful full overwrite.
    #[error("memory {memory} is untrusted: {cause}")]
    Untrusted {
        /// The poisoned slice.
        memory: MemoryId,
        /// The error that poisoned it.
        cause: Arc<ServerError>,
    },
    /// A fault inside the server, not the caller's mistake (see
    /// [`InternalFault`]).
    #[error("internal fault of the server: {fault}")]
    Internal {
        /// What the server found.
        fault: InternalFault,
    },
    /// A call that restores trust carried the key of another server's
    /// scheduler: only the server that owns the bytes may make them trusted
    /// again. Nothing ran.
    #[error("trust key of scheduler {key} cannot restore trust on scheduler {owner}")]
    ForeignTrustKey {
        /// The scheduler the key belongs to.
        key: u64,
        /// The scheduler it was used on.
        owner: u64,
    },
    /// Work on the stream failed earlier and the failure had not been reported
    /// yet (a `write` or `launch`, which return nothing, or a batch the queue
    /// refused).
    #[error("earlier work on {stream} failed: {cause}{}", later_note(*later))]
    Deferred {
        /// The stream the work ran on.
        stream: StreamId,
        /// The first failure not reported yet.
        cause: Arc<ServerError>,
        /// Failures on the stream after it, not reported on their own (each
        /// poisoned its own writes).
        later: u32,
    },
    /// A fault only the device could report (an uncaptured error), known after
    /// a drain.
    #[error("device fault: {message}")]
    DeviceFault {
        /// What the device said.
        message: String,
    },
    /// The device is gone; every later call answers this.
    #[error("device lost: {reason}")]
    DeviceLost {
        /// What the device-lost callback said.
        reason: String,
    },
    /// Mapping a buffer for reading failed.
    #[error("buffer mapping failed: {reason}")]
    Mapping {
        /// Why.
        reason: String,
    },
    /// The capability is not built (yet) or the device lacks it.
    #[error("unsupported: {what} ({reason})")]
    Unsupported {
        /// The capability.
        what: &'static str,
        /// Why, and where it is tracked.
        reason: &'static str,
    },
    /// A graph-capture call in the wrong state.
    #[error("graph capture on {stream}: {reason}")]
    CaptureState {
        /// The stream.
        stream: StreamId,
        /// What the state machine refused.
        reason: String,
    },
    /// `replay` of a graph id the device's registry does not hold.
    #[error("unknown graph {graph}: never captured on this server, or destroyed")]
    UnknownGraph {
        /// The id asked for.
        graph: GraphId,
    },
    /// A profiling call in the wrong state.
    #[error("profiling on {stream}: {reason}")]
    ProfileState {
        /// The stream.
        stream: StreamId,
        /// What the state machine refused.
        reason: String,
    },
    /// Ranks of a collective disagree (call kind, sizes, dtypes, operation,
    /// root, rank sets), or one rank posted a call that cannot be valid on
    /// any rank (a size that does not divide by the rank count, say). Every
    /// rank of the call gets it.
    #[error("collective mismatch: {reason}")]
    CollectiveMismatch {
        /// What disagreed, naming the ranks and their calls.
        reason: String,
    },
    /// A collective did not complete in time: some rank never posted its
    /// call, or never provided its input. The call is aborted on every rank
    /// that reaches it later.
    #[error(
        "collective timeout: rank {rank} waited {waited_ms} ms on {call}; still missing: ranks {missing:?}"
    )]
    CollectiveTimeout {
        /// The rank that gave up.
        rank: usize,
        /// The call, in words (`all_reduce #3`, `send #0 from rank 1 to rank 2`).
        call: String,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
        /// The ranks whose part had not arrived, as far as `rank` knows (it
        /// may name `rank` itself when its own input never came).
        missing: Vec<usize>,
    },
    /// The result depends on a rank's input that was untrusted or failed, so
    /// it is poisoned too. `cause` is that rank's error.
    #[error("collective input of rank {rank} failed: {cause}")]
    CollectiveInput {
        /// The rank whose input failed (the lowest one, if several did).
        rank: usize,
        /// Why that rank's input failed.
        cause: Arc<ServerError>,
    },
    /// A collective call in the wrong state: before `comm_init`, a device not
    /// in the communicator's rank list, a rank that joined twice, a peer that
    /// is not a rank, a stopped thread, MPI unusable (see
    /// [`CollectiveFault`]).
    #[error("collective state: {fault}")]
    CollectiveState {
        /// What was wrong.
        fault: CollectiveFault,
    },
    /// The bytes are the destination of a `ComputeWait::Overlap` collective
    /// that `sync_collective` has not written yet: until it has, they are
    /// neither the old bytes nor the result, and every use is refused.
    #[error(
        "the destination of an Overlap {call} on {stream} is written by sync_collective: call it \
         before using these bytes"
    )]
    CollectivePending {
        /// The collective, in words (`all_reduce`).
        call: &'static str,
        /// The stream whose `sync_collective` writes the result.
        stream: StreamId,
    },
    /// A collective was aborted before it completed (another rank timed out
    /// waiting on it, or a rank left the communicator); every rank that
    /// reaches it afterwards gets this at once.
    #[error("collective {call} aborted: {reason}")]
    CollectiveAborted {
        /// The call, in words.
        call: String,
        /// Why it was aborted.
        reason: String,
    },
    /// An error that happened on another rank in another process (a
    /// collective peer over MPI), carried as its words: the variant does not
    /// cross the wire, the text does, so it reads the same on every rank.
    #[error("{message}")]
    CollectiveRemote {
        /// The rank (in the communicator) where it happened.
        rank: usize,
        /// The error as that rank displayed it.
        message: String,
    },
}

fn later_note(later: u32) -> String {
    match later {
        0 => String::new(),
        1 => " (and 1 later failure)".into(),
        n => format!(" (and {n} later failures)"),
    }
}
