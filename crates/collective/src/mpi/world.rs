//! The process's MPI: started once, on a thread of its own, with
//! `MPI_THREAD_MULTIPLE` (every transport has its own worker thread) and
//! `MPI_ERRORS_RETURN` (a failed call is an error, not an abort of the
//! job); the [`MpiLayout`] check; thin checked wrappers over rsmpi's raw
//! bindings (`mpi::ffi`); finalization.
//!
//! rsmpi's safe API assumes `MPI_ERRORS_ARE_FATAL` (it discards the return
//! codes) and ties `MPI_Finalize` to dropping its `Universe`; the transport
//! needs every code checked and finalization it can refuse, so it calls the
//! bindings rsmpi generates and checks each code.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use compute_runtime::CollectiveFault;
use compute_runtime::ServerError;
use mpi::ffi;

use super::worker::{Worker, run_until};
use crate::layout::MpiLayout;

/// An MPI communicator handle (a plain value; MPI is initialized with
/// `MPI_THREAD_MULTIPLE`, so any thread may use it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Comm(pub ffi::MPI_Comm);
// SAFETY: a handle, not data; MPI_THREAD_MULTIPLE makes calls on it from
// any thread valid.
unsafe impl Send for Comm {}
// SAFETY: as above.
unsafe impl Sync for Comm {}

impl Comm {
    /// The handle (a method, so a closure captures the whole `Comm`).
    pub fn raw(self) -> ffi::MPI_Comm {
        self.0
    }
}

/// An MPI datatype handle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dt(pub ffi::MPI_Datatype);
// SAFETY: a handle, as for `Comm`.
unsafe impl Send for Dt {}
// SAFETY: as above.
unsafe impl Sync for Dt {}

/// An MPI reduction operation handle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op(pub ffi::MPI_Op);
// SAFETY: a handle, as for `Comm`.
unsafe impl Send for Op {}
// SAFETY: as above.
unsafe impl Sync for Op {}

/// MPI's words for an error code.
pub(crate) fn error_string(code: c_int) -> String {
    let mut buf = [0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters and a NUL.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    if rc != ffi::MPI_SUCCESS as c_int {
        return format!("MPI error {code}");
    }
    // SAFETY: MPI wrote a NUL-terminated string into the zeroed buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `Ok` for `MPI_SUCCESS`, else the call's error in MPI's words.
pub(crate) fn check(rc: c_int, what: &'static str) -> Result<(), ServerError> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(ServerError::CollectiveState {
            fault: CollectiveFault::Mpi {
                call: what,
                code: rc,
                message: error_string(rc),
            },
        })
    }
}

/// `MPI_COMM_WORLD`.
pub(crate) fn comm_world() -> Comm {
    // SAFETY: reading an initialized constant of the shim library.
    Comm(unsafe { ffi::RSMPI_COMM_WORLD })
}

/// Bytes (`MPI_UINT8_T`).
pub(crate) fn byte() -> Dt {
    // SAFETY: reading an initialized constant of the shim library.
    Dt(unsafe { ffi::RSMPI_UINT8_T })
}

/// A count as MPI's C int.
pub(crate) fn count(n: usize) -> Result<c_int, ServerError> {
    c_int::try_from(n).map_err(|_| ServerError::Unsupported {
        what: "MPI messages of 2^31 elements or more",
        reason: "MPI counts are C ints; split the buffer",
    })
}

/// The process's MPI, once started.
#[derive(Debug)]
pub(crate) struct World {
    /// This process's rank in `MPI_COMM_WORLD`.
    pub rank: usize,
    /// `MPI_COMM_WORLD`'s size.
    pub size: usize,
    /// Which process owns which device.
    pub layout: MpiLayout,
    /// Two `u64`s, the element of widened 64-bit integer means.
    pub wide: Dt,
    /// The thread that initialized MPI; it finalizes it too.
    worker: Worker,
    /// Whether this crate called `MPI_Init_thread` (else someone else did,
    /// and finalizes).
    owns: bool,
    /// User operations, by code (`ops.rs`), created on first use.
    pub(crate) user_ops: Mutex<HashMap<u8, Op>>,
    /// Transports whose worker thread still runs.
    live: Mutex<usize>,
    live_changed: Condvar,
    /// Why MPI in this process cannot be trusted any more (a call that
    /// timed out or failed): `finalize` refuses then.
    broken: Mutex<Option<String>>,
    finalized: AtomicBool,
}

static WORLD: OnceLock<Result<World, ServerError>> = OnceLock::new();

/// The process's MPI, started on first use within `timeout` (`MPI_Init`
/// waits for every process of the job).
pub(crate) fn world(timeout: Duration) -> Result<&'static World, ServerError> {
    let world = WORLD.get_or_init(|| start(timeout)).as_ref();
    match world {
        Ok(w) if w.finalized.load(Ordering::SeqCst) => Err(ServerError::CollectiveState {
            fault: CollectiveFault::MpiUnusable {
                reason: "MPI was finalized in this process".into(),
            },
        }),
        Ok(w) => Ok(w),
        Err(e) => Err(e.clone()),
    }
}

/// The world if it was started.
pub(crate) fn started() -> Option<&'static Result<World, ServerError>> {
    WORLD.get()
}

/// What the init thread learns.
struct Started {
    rank: usize,
    size: usize,
    layout: MpiLayout,
    wide: Dt,
    owns: bool,
}

fn start(timeout: Duration) -> Result<World, ServerError> {
    let started_at = Instant::now();
    let deadline = started_at + timeout;
    let worker = Worker::spawn("compute-mpi-world".into(), || {})?;
    let dpp = MpiLayout::devices_per_process_from_env();
    match run_until(&worker, "MPI start", deadline, move || init(dpp)) {
        Ok(s) => Ok(World {
            rank: s.rank,
            size: s.size,
            layout: s.layout,
            wide: s.wide,
            worker,
            owns: s.owns,
            user_ops: Mutex::new(HashMap::new()),
            live: Mutex::new(0),
            live_changed: Condvar::new(),
            broken: Mutex::new(None),
            finalized: AtomicBool::new(false),
        }),
        Err(Some(e)) => Err(e),
        Err(None) => Err(ServerError::CollectiveTimeout {
            rank: 0,
            call: "MPI start (MPI_Init_thread and the devices-per-process check)".into(),
            waited_ms: u64::try_from(started_at.elapsed().as_millis()).unwrap_or(u64::MAX),
            missing: Vec::new(),
        }),
    }
}

/// On the init thread: `MPI_Init_thread`, the error handler, the layout.
fn init(dpp: Result<usize, ServerError>) -> Result<Started, ServerError> {
    let world = comm_world();
    let mut flag: c_int = 0;
    // SAFETY: plain out-parameters; these calls are valid before MPI_Init.
    check(
        unsafe { ffi::MPI_Initialized(&mut flag) },
        "MPI_Initialized",
    )?;
    let owns = flag == 0;
    let mut provided: c_int = 0;
    // SAFETY: null argc/argv are allowed; `provided` is an out-parameter.
    let multiple = unsafe { ffi::RSMPI_THREAD_MULTIPLE };
    if owns {
        check(
            // SAFETY: as above.
            unsafe {
                ffi::MPI_Init_thread(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    multiple,
                    &mut provided,
                )
            },
            "MPI_Init_thread",
        )?;
    } else {
        // SAFETY: an out-parameter.
        check(
            unsafe { ffi::MPI_Query_thread(&mut provided) },
            "MPI_Query_thread",
        )?;
    }
    // SAFETY: MPI is initialized; the handler is a library constant.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(world.0, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler")?;
    if provided < multiple {
        return Err(ServerError::CollectiveState {
            fault: CollectiveFault::MpiThreadLevel {
                provided,
                needed: multiple,
            },
        });
    }
    let (mut rank, mut size): (c_int, c_int) = (0, 0);
    // SAFETY: out-parameters on a valid communicator.
    check(
        unsafe { ffi::MPI_Comm_rank(world.0, &mut rank) },
        "MPI_Comm_rank",
    )?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_size(world.0, &mut size) },
        "MPI_Comm_size",
    )?;
    let (rank, size) = (rank.max(0) as usize, size.max(1) as usize);
    // Every process says how many devices it drives (0: it could not read
    // its setting), so a disagreement is the same error everywhere.
    let mine = dpp.as_ref().map_or(0u64, |d| *d as u64);
    let mut all = vec![0u64; size];
    // SAFETY: one u64 sent, one per rank received into `all`.
    let rc = unsafe {
        ffi::MPI_Allgather(
            (&mine as *const u64).cast(),
            1,
            ffi::RSMPI_UINT64_T,
            all.as_mut_ptr().cast(),
            1,
            ffi::RSMPI_UINT64_T,
            world.0,
        )
    };
    check(rc, "MPI_Allgather of the devices per process")?;
    if all.iter().any(|d| *d != mine) || mine == 0 {
        dpp?;
        return Err(ServerError::CollectiveMismatch {
            reason: format!(
                "the processes disagree on {} (per process, 0 = unreadable): {all:?}",
                MpiLayout::DEVICES_PER_PROCESS_ENV
            ),
        });
    }
    let mut wide = Dt(
        // SAFETY: reading a library constant.
        unsafe { ffi::RSMPI_DATATYPE_NULL },
    );
    // SAFETY: a contiguous type of two u64s, committed before use.
    check(
        unsafe { ffi::MPI_Type_contiguous(2, ffi::RSMPI_UINT64_T, &mut wide.0) },
        "MPI_Type_contiguous",
    )?;
    // SAFETY: the type was just created.
    check(
        unsafe { ffi::MPI_Type_commit(&mut wide.0) },
        "MPI_Type_commit",
    )?;
    Ok(Started {
        rank,
        size,
        layout: MpiLayout {
            processes: size,
            devices_per_process: mine as usize,
        },
        wide,
        owns,
    })
}

impl World {
    /// A transport's worker started.
    pub fn enter(&self) {
        *self.live.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    /// A transport's worker ended.
    pub fn exit(&self) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        *live = live.saturating_sub(1);
        self.live_changed.notify_all();
    }

    /// Records why MPI in this process is not trustworthy any more.
    pub fn break_with(&self, reason: &str) {
        let mut b = self.broken.lock().unwrap_or_else(|e| e.into_inner());
        if b.is_none() {
            *b = Some(reason.to_string());
        }
    }

    /// Why MPI in this process is broken, if it is.
    pub fn broken(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `MPI_Barrier` over `MPI_COMM_WORLD`, within `timeout`.
    pub fn barrier(&self, timeout: Duration) -> Result<(), ServerError> {
        let world = comm_world();
        let started = Instant::now();
        let r = run_until(&self.worker, "MPI_Barrier", started + timeout, move || {
            // SAFETY: a valid communicator.
            check(unsafe { ffi::MPI_Barrier(world.raw()) }, "MPI_Barrier")
        });
        self.settle(r, "MPI_Barrier", started)
    }

    /// Every process's `bytes`, in world rank order (`MPI_Allgather` of the
    /// lengths, `MPI_Allgatherv` of the bytes), within `timeout`.
    pub fn gather(&self, bytes: Vec<u8>, timeout: Duration) -> Result<Vec<Vec<u8>>, ServerError> {
        let world = comm_world();
        let size = self.size;
        let started = Instant::now();
        let r = run_until(
            &self.worker,
            "MPI_Allgatherv",
            started + timeout,
            move || {
                let mine = bytes.len() as u64;
                let mut lens = vec![0u64; size];
                // SAFETY: one u64 sent, one per rank received.
                let rc = unsafe {
                    ffi::MPI_Allgather(
                        (&mine as *const u64).cast(),
                        1,
                        ffi::RSMPI_UINT64_T,
                        lens.as_mut_ptr().cast(),
                        1,
                        ffi::RSMPI_UINT64_T,
                        world.raw(),
                    )
                };
                check(rc, "MPI_Allgather of the lengths")?;
                let counts = lens
                    .iter()
                    .map(|l| count(*l as usize))
                    .collect::<Result<Vec<c_int>, _>>()?;
                let mut displs = Vec::with_capacity(size);
                let mut at: c_int = 0;
                for c in &counts {
                    displs.push(at);
                    at = at.saturating_add(*c);
                }
                let mut all = vec![0u8; lens.iter().sum::<u64>() as usize];
                // SAFETY: `counts[r]` bytes of rank r at `displs[r]` of `all`.
                let rc = unsafe {
                    ffi::MPI_Allgatherv(
                        bytes.as_ptr().cast(),
                        count(bytes.len())?,
                        byte().0,
                        all.as_mut_ptr().cast(),
                        counts.as_ptr(),
                        displs.as_ptr(),
                        byte().0,
                        world.raw(),
                    )
                };
                check(rc, "MPI_Allgatherv")?;
                let mut out = Vec::with_capacity(size);
                let mut at = 0usize;
                for l in lens {
                    out.push(all[at..at + l as usize].to_vec());
                    at += l as usize;
                }
                Ok(out)
            },
        );
        self.settle(r, "MPI_Allgatherv", started)
    }

    /// `Ok` or the error; a timeout breaks the world.
    fn settle<T>(
        &self,
        r: Result<T, Option<ServerError>>,
        what: &str,
        started: Instant,
    ) -> Result<T, ServerError> {
        match r {
            Ok(v) => Ok(v),
            Err(Some(e)) => {
                self.break_with(&e.to_string());
                Err(e)
            }
            Err(None) => {
                let waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                self.break_with(&format!("{what} did not complete within {waited_ms} ms"));
                Err(ServerError::CollectiveTimeout {
                    rank: self.rank,
                    call: what.into(),
                    waited_ms,
                    missing: Vec::new(),
                })
            }
        }
    }

    /// See [`super::finalize`].
    pub fn finalize(&'static self, timeout: Duration) -> Result<(), ServerError> {
        let started = Instant::now();
        let deadline = started + timeout;
        if let Some(reason) = self.broken() {
            return Err(ServerError::CollectiveState {
                fault: CollectiveFault::MpiUnusable {
                    reason: format!(
                        "{reason}; not finalizing it: a peer may be gone, and MPI_Finalize \
                         would wait for it. Exit without it (std::process::exit)"
                    ),
                },
            });
        }
        // Every transport's communicator is freed by its worker first.
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        while *live > 0 {
            let now = Instant::now();
            if now >= deadline {
                return Err(ServerError::CollectiveState {
                    fault: CollectiveFault::Misuse(
                        "not finalizing MPI: communicators still in use (drop every server and \
                         communicator first)",
                    ),
                });
            }
            live = self
                .live_changed
                .wait_timeout(live, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(live);
        if self.finalized.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let ops: Vec<Op> = self
            .user_ops
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, op)| op)
            .collect();
        let (wide, owns) = (self.wide, self.owns);
        let r = run_until(&self.worker, "MPI_Finalize", deadline, move || {
            let mut wide = wide;
            for mut op in ops {
                // SAFETY: ops this crate created; no call uses them any more.
                check(unsafe { ffi::MPI_Op_free(&mut op.0) }, "MPI_Op_free")?;
            }
            // SAFETY: the type this crate created; no call uses it any more.
            check(unsafe { ffi::MPI_Type_free(&mut wide.0) }, "MPI_Type_free")?;
            if owns {
                // SAFETY: the thread that initialized MPI; nothing is in flight.
                check(unsafe { ffi::MPI_Finalize() }, "MPI_Finalize")?;
            }
            Ok(())
        });
        let r = self.settle(r, "MPI_Finalize", started);
        self.worker.stop();
        r
    }
}
