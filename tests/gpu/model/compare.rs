//! The server's answers against the model's: each `Cause` against the
//! error it stands for, and trust, bytes and reports against what the
//! oracle allows.

use compute_runtime::{MemoryId, ServerError};

use super::cause::Cause;
use super::oracle::{Expect, ReadExpect, Reports};

/// Every rank's buffers' ids, which the server's errors name.
#[derive(Debug)]
pub struct Ids(pub Vec<Vec<MemoryId>>);

impl Ids {
    pub fn cause(&self, m: &Cause, e: &ServerError) -> bool {
        match m {
            Cause::SizeMismatch => matches!(e, ServerError::SizeMismatch { .. }),
            Cause::InvalidArgument => matches!(e, ServerError::InvalidArgument { .. }),
            Cause::BindingTooSmall => matches!(e, ServerError::BindingTooSmall { .. }),
            Cause::LayoutMismatch => matches!(e, ServerError::LayoutMismatch { .. }),
            Cause::Late => matches!(e, ServerError::LimitExceeded { .. }),
            Cause::Input { rank, buf, cause } => matches!(
                e,
                ServerError::UntrustedInput { input, cause: c }
                    if *input == self.0[*rank][*buf] && self.cause(cause, c)
            ),
            Cause::CollectiveInput { rank, cause } => matches!(
                e,
                ServerError::CollectiveInput { rank: r, cause: c }
                    if r == rank && self.cause(cause, c)
            ),
            Cause::Mismatch => matches!(e, ServerError::CollectiveMismatch { .. }),
            Cause::Capture => matches!(e, ServerError::CaptureState { .. }),
            Cause::Pending => matches!(e, ServerError::CollectivePending { .. }),
        }
    }

    /// `e` says buffer `b` of `rank` is untrusted because of `m`.
    fn untrusted(&self, rank: usize, b: usize, m: &Cause, e: &ServerError) -> bool {
        matches!(
            e,
            ServerError::Untrusted { memory, cause } if *memory == self.0[rank][b] && self.cause(m, cause)
        )
    }

    pub fn trust(
        &self,
        rank: usize,
        b: usize,
        want: &Expect,
        got: &Result<(), ServerError>,
    ) -> bool {
        match (want, got) {
            (Expect::Trusted | Expect::TrustedOr(_), Ok(())) => true,
            (Expect::Untrusted(m) | Expect::TrustedOr(m), Err(e)) => self.untrusted(rank, b, m, e),
            (Expect::Trusted, Err(_)) | (Expect::Untrusted(_), Ok(())) => false,
        }
    }

    pub fn read(
        &self,
        rank: usize,
        b: usize,
        want: &ReadExpect,
        got: &Result<Vec<u32>, ServerError>,
    ) -> bool {
        match (want, got) {
            (ReadExpect::Bytes(w), Ok(g)) => w == g,
            (ReadExpect::Untrusted(m), Err(e)) => self.untrusted(rank, b, m, e),
            (ReadExpect::Bytes(_), Err(_)) | (ReadExpect::Untrusted(_), Ok(_)) => false,
        }
    }

    /// A report of `stream`'s failures against what may be reported;
    /// `None` when the server reported none and none had to be.
    pub fn reports(
        &self,
        stream: u64,
        want: &Reports,
        got: &Result<(), ServerError>,
    ) -> Option<bool> {
        let Err(ServerError::Deferred {
            stream: s,
            cause,
            later,
        }) = got
        else {
            return (want.at_least > 0).then_some(false);
        };
        let n = *later as usize + 1;
        let first_ok = match want.ordered {
            true => want.causes.first().is_some_and(|m| self.cause(m, cause)),
            false => want.causes.iter().any(|m| self.cause(m, cause)),
        };
        Some(s.0 == stream && (want.at_least..=want.at_most).contains(&n) && first_ok)
    }
}
