//! The suite on communicators directly: an invalid call, a poisoned input, an abandoned call.

use super::*;

// ------------------------------------------------------ communicator level --

fn u32_call(len: usize) -> CollectiveCall {
    CollectiveCall::AllReduce {
        reduction: Reduction::sum(DType::U32),
        len,
    }
}

/// Rank 1 posts a sum over 6 bytes of f32 (not whole elements): it is
/// refused at `post` on rank 1 and fails with the same words everywhere.
pub(crate) fn invalid_call(ctx: &mut Ctx) {
    let mut comm = ctx.comm(Duration::from_secs(30));
    let call = if ctx.rank == 1 {
        CollectiveCall::AllReduce {
            reduction: Reduction::sum(DType::F32),
            len: 6,
        }
    } else {
        CollectiveCall::AllReduce {
            reduction: Reduction::sum(DType::F32),
            len: 8,
        }
    };
    let text = match comm.post(call) {
        Err(e) => e.to_string(),
        Ok((c, p)) => {
            c.provide(Ok(Bytes::from(vec![0u8; 8])));
            p.wait(Duration::from_secs(30))
                .expect_err("mismatch")
                .to_string()
        }
    };
    assert!(text.contains("rank 1 posted an invalid call"), "{text}");
    ctx.same_everywhere("the invalid call", &text);
}

/// Rank 2's input fails: every rank's outcome is poisoned with
/// `CollectiveInput { rank: 2 }`, reading the same everywhere.
pub(crate) fn poisoned(ctx: &mut Ctx) {
    let mut comm = ctx.comm(Duration::from_secs(30));
    let (c, p) = comm.post(u32_call(4)).expect("post");
    if ctx.rank == 2 {
        c.provide(Err(Arc::new(ServerError::DeviceLost {
            reason: "unplugged (test)".into(),
        })));
    } else {
        c.provide(Ok(Bytes::from_static(&[1, 0, 0, 0])));
    }
    let outcome = p.wait(Duration::from_secs(30)).expect("outcome");
    let poison = outcome.poisoned.expect("poisoned");
    assert!(
        matches!(poison, ServerError::CollectiveInput { rank: 2, .. }),
        "{poison}"
    );
    assert!(poison.to_string().contains("unplugged (test)"), "{poison}");
    ctx.same_everywhere("the poison", &poison.to_string());
}

/// Rank 1 never provides its input: it times out (1 s), every other rank
/// (waiting up to 20 s) fails as soon as rank 1's abort reaches it, with
/// the same `CollectiveAborted`, and the next call on the communicator
/// still pairs.
pub(crate) fn abandoned(ctx: &mut Ctx) {
    let timeout = if ctx.rank == 1 { 1 } else { 20 };
    let mut comm = ctx.comm(Duration::from_secs(timeout));
    let (c, p) = comm.post(u32_call(4)).expect("post");
    let kept = if ctx.rank == 1 {
        Some(c)
    } else {
        c.provide(Ok(Bytes::from_static(&[1, 0, 0, 0])));
        None
    };
    let t = Instant::now();
    let e = p.wait(Duration::from_secs(30)).expect_err("abandoned");
    let waited = t.elapsed();
    drop(kept);
    if ctx.rank == 1 {
        assert!(
            matches!(e, ServerError::CollectiveTimeout { rank: 1, .. }),
            "{e}"
        );
    } else {
        assert!(matches!(e, ServerError::CollectiveAborted { .. }), "{e}");
        assert!(e.to_string().contains("rank 1"), "{e}");
    }
    assert!(waited < Duration::from_secs(8), "waited {waited:?}");
    let aborted = if ctx.rank == 1 {
        String::new()
    } else {
        e.to_string()
    };
    let all = ctx.gather(&aborted);
    let others: Vec<&String> = all.iter().filter(|s| !s.is_empty()).collect();
    assert!(others.windows(2).all(|w| w[0] == w[1]), "{others:?}");
    // The sequence still holds: the next call pairs.
    let (c, p) = comm.post(u32_call(4)).expect("post");
    c.provide(Ok(Bytes::from_static(&[2, 0, 0, 0])));
    let out = p.wait(Duration::from_secs(30)).expect("next call");
    assert_eq!(out.bytes.as_ref(), &(2 * ctx.size as u32).to_le_bytes());
}
