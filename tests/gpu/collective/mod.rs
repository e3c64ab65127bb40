//! Collectives across servers on separate devices of one adapter: an
//! nccl-tests-style correctness suite. Every result is checked against the
//! suite's own oracle (`oracle.rs`), never the collective crate's code.
//!
//! - `reduce`: `all_reduce` and `reduce_scatter`, every dtype x op on 2, 3
//!   and 4 ranks at 0, 1, 7 and 1000 elements; integer edge cases; NaN.
//! - `movement`: `all_gather`, `broadcast` (every root), `all_to_all`.
//! - `large`: MiB-sized cases (f32 and u32).
//! - `device`: ranks whose devices share memory move group calls on the
//!   devices; a call posted before every rank joined is host-staged, the
//!   later ones are not.
//! - `steps`: calls cut into many steps (a small chunk size): past the
//!   staging window (the rest refilled from a device copy of `src`), a
//!   `src` that starts mid-word, `src` as of the call.
//! - `p2p`: `send` / `recv` pairing, rings in both call orders.
//! - `ordering`: `Wait` / `Overlap`, streams, sub-ranges, `src` as of the
//!   call; nothing but a read or a sync waits for another rank.
//! - `threads`: both threading patterns (one thread for every rank in turn;
//!   one thread per rank) over every kind of call.
//! - `mismatch`: calls that disagree fail on every rank, and the
//!   communicator goes on.
//! - `poison`: untrusted inputs poison every result that depends on them; a
//!   failed collective poisons its `dst` and the work queued after it.
//! - `refused`: a call one rank's `Communicator` refuses still takes its
//!   place (every method, both threading patterns); 0-byte failures; a
//!   refused `send` with no `recv` costs at most the timeout.
//! - `state`: capture refusal, calls before `comm_init`, bad rank lists.
//! - `found`: broken promises the random-program model found (ignored
//!   until fixed).
//!
//! The timeout (a rank that never arrives) is the `collective_timeout`
//! binary: it sets the timeout through the environment.

mod device;
mod found;
pub(crate) mod group;
mod large;
mod mismatch;
mod movement;
mod oracle;
mod ordering;
mod p2p;
mod poison;
mod promises;
mod reduce;
mod refused;
mod state;
mod steps;
mod threads;
