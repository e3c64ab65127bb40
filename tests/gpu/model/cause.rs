//! Why the model says a buffer is untrusted: its own words for the
//! server's errors, derived from the operations alone.

use std::rc::Rc;

#[derive(Debug, PartialEq)]
pub enum Cause {
    SizeMismatch,
    InvalidArgument,
    BindingTooSmall,
    LayoutMismatch,
    /// An indirect count over the per-dimension limit, known late.
    Late,
    /// Work that read buffer `buf` of `rank` while it was untrusted.
    Input {
        rank: usize,
        buf: usize,
        cause: Rc<Cause>,
    },
    /// A collective whose input on `rank` was bad.
    CollectiveInput {
        rank: usize,
        cause: Rc<Cause>,
    },
    /// Ranks whose calls disagree, or a call that cannot be valid.
    Mismatch,
    /// A collective inside a capture window.
    Capture,
    /// The `dst` of an `Overlap` collective before `sync_collective`.
    Pending,
}

impl Cause {
    pub fn input(rank: usize, buf: usize, cause: &Rc<Cause>) -> Rc<Cause> {
        Rc::new(Cause::Input {
            rank,
            buf,
            cause: Rc::clone(cause),
        })
    }
}
