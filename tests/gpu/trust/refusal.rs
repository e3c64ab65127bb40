//! Poison follows data by refusal, and only a full host write restores
//! trust.

use std::sync::Arc;

use super::*;
use compute_runtime::{BufferBinding, CopyDescriptor, CubeCount, Server, ServerError};

#[test]
fn check_answers_ok_or_untrusted_and_a_read_of_untrusted_bytes_is_that_error_never_bytes() {
    let mut f = fixture();
    let good = upload(&mut f.s, u32_bytes(&[5; N]), S1);
    let bad = upload(&mut f.s, u32_bytes(&[6; N]), S1);
    let cause = poison(&mut f.s, &bad, S1);
    f.begin(S0);
    f.s.check(vec![good.binding()], S0).expect("trusted");
    let err =
        f.s.check(vec![good.binding(), bad.binding()], S0)
            .expect_err("one untrusted");
    assert_eq!(
        err,
        ServerError::Untrusted {
            memory: bad.memory.id(),
            cause: Arc::clone(&cause),
        }
    );
    assert!(matches!(cause.as_ref(), ServerError::Compilation { .. }));
    // A read says the same, and returns no bytes, alone or with a trusted
    // descriptor.
    assert_eq!(read(&mut f.s, &bad, S0).expect_err("untrusted"), err);
    let both =
        f.s.read(vec![good.copy_descriptor(), bad.copy_descriptor()], S0);
    assert_eq!(
        futures::executor::block_on(both).expect_err("no bytes"),
        err
    );
    f.end();
    assert_eq!(
        bytes_u32(&read(&mut f.s, &good, S0).expect("trusted read")),
        vec![5; N]
    );
    // Still untrusted: reads report, they do not repair.
    assert_eq!(f.s.check(vec![bad.binding()], S0).expect_err("still"), err);
    f.assert_neighbours_and_bystander();
}

#[test]
fn a_launch_reading_untrusted_bytes_is_refused_and_poisons_its_writes() {
    let mut f = fixture();
    let src = upload(&mut f.s, u32_bytes(&[1; N]), S1);
    let rw = upload(&mut f.s, u32_bytes(&[2; N]), S1);
    let count = upload(&mut f.s, u32_bytes(&[1, 1, 1]), S1);
    let trusted = upload(&mut f.s, u32_bytes(&[3; N]), S1);
    let out = [0, 1, 2, 3].map(|i| upload(&mut f.s, u32_bytes(&[100 + i; N]), S1));
    sync(&mut f.s, S1).expect("setup");
    let src_cause = poison(&mut f.s, &src, S1);
    let rw_cause = poison(&mut f.s, &rw, S1);
    let count_cause = poison(&mut f.s, &count, S1);
    let failures = f.s.failure_count();

    f.begin(S0);
    // A read-only input.
    launch(
        &mut f.s,
        add_kernel(),
        CubeCount::x(1),
        &[&trusted, &src, &out[0]],
        S0,
    );
    // A read-write input: the other read-write binding is poisoned too.
    launch(
        &mut f.s,
        move_kernel(),
        CubeCount::x(1),
        &[&rw, &out[1]],
        S0,
    );
    // The indirect count.
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(count.binding()),
        bindings(&[&out[2]]),
        S0,
    );
    // Poison follows data further: a launch reading a refused launch's
    // output is refused in turn.
    launch(
        &mut f.s,
        double_kernel(),
        CubeCount::x(1),
        &[&out[0], &out[3]],
        S0,
    );
    f.end();

    assert_eq!(f.s.failure_count(), failures + 4);
    assert_refused_for(&mut f.s, &out[0], src.memory.id(), &src_cause);
    assert_refused_for(&mut f.s, &out[1], rw.memory.id(), &rw_cause);
    assert_refused_for(&mut f.s, &out[2], count.memory.id(), &count_cause);
    let out0_cause = untrusted_cause(&mut f.s, &out[0]);
    assert_refused_for(&mut f.s, &out[3], out[0].memory.id(), &out0_cause);
    // An untrusted read-write input stays poisoned by its first cause.
    assert_eq!(untrusted_cause(&mut f.s, &rw), rw_cause);
    // Read-only inputs are not written, so not poisoned.
    f.s.check(vec![trusted.binding()], S0)
        .expect("read-only input stays trusted");

    // Reported once, by the stream's next flush; `later` counts the rest.
    let err = f.s.flush(S0).expect_err("deferred");
    let (stream, cause, later) = deferred(&err);
    assert_eq!(stream, S0);
    assert_eq!(later, 3);
    assert!(
        matches!(cause.as_ref(), ServerError::UntrustedInput { input, .. } if *input == src.memory.id()),
        "{cause}"
    );
    assert_eq!(err.root_cause(), src_cause.as_ref());
    f.s.flush(S0).expect("reported once");

    // None of them ran: every output still holds its old bytes.
    for (i, h) in out.iter().enumerate() {
        assert_eq!(
            raw_u32(&mut f.s, h),
            vec![100 + i as u32; N],
            "out[{i}] written"
        );
    }
    assert_eq!(
        raw_u32(&mut f.s, &rw),
        vec![2; N],
        "the rw input was written"
    );

    // A replay is refused the same way, and reported by the next sync.
    let q = upload(&mut f.s, u32_bytes(&[4; N]), S2);
    let r = upload(&mut f.s, u32_bytes(&[0; N]), S2);
    launch(&mut f.s, double_kernel(), CubeCount::x(1), &[&q, &r], S2); // compile
    sync(&mut f.s, S2).expect("warm-up");
    f.s.begin_capture(S2).expect("begin");
    launch(&mut f.s, double_kernel(), CubeCount::x(1), &[&q, &r], S2);
    let g = f.s.end_capture(S2).expect("end");
    f.s.replay(g, S2).expect("a trusted replay runs");
    assert_eq!(
        bytes_u32(&read(&mut f.s, &r, S2).expect("read")),
        vec![9; N]
    );
    let q_cause = poison(&mut f.s, &q, S1);
    let err = f.s.replay(g, S2).expect_err("refused");
    assert!(
        matches!(&err, ServerError::UntrustedInput { input, .. } if *input == q.memory.id()),
        "{err}"
    );
    assert_refused_for(&mut f.s, &r, q.memory.id(), &q_cause);
    let err = sync(&mut f.s, S2).expect_err("deferred to sync");
    let (stream, _, later) = deferred(&err);
    assert_eq!((stream, later), (S2, 0));
    assert_eq!(err.root_cause(), q_cause.root_cause());
    assert_eq!(raw_u32(&mut f.s, &r), vec![9; N], "the refused replay ran");

    f.assert_neighbours_and_bystander();
}

#[test]
fn a_launch_never_restores_trust_only_a_full_host_write_does() {
    let mut f = fixture();
    let x = upload(&mut f.s, u32_bytes(&[1; N]), S1);
    let cause = poison(&mut f.s, &x, S1);

    f.begin(S0);
    // Binding the whole slice, writing every element without reading it:
    // still refused (its binding is an input), and `x` keeps its cause.
    launch(&mut f.s, fill_kernel(), CubeCount::x(1), &[&x], S0);
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&x], S0);
    f.end();
    assert_eq!(untrusted_cause(&mut f.s, &x), cause);
    let err = f.s.flush(S0).expect_err("the refusals");
    assert_eq!(deferred(&err).2, 1);
    assert_eq!(raw_u32(&mut f.s, &x), vec![1; N], "a refused launch ran");

    // A partial host write does not restore it.
    let half = BufferBinding {
        memory: x.memory.clone(),
        offset: 0,
        size: 4 * N as u64 / 2,
    };
    f.s.write(
        vec![(
            CopyDescriptor::contiguous(half),
            u32_bytes(&[8; N / 2]).into(),
        )],
        S0,
    );
    f.s.flush(S0).expect("the partial write succeeds");
    assert_eq!(untrusted_cause(&mut f.s, &x), cause);
    // Nor does a full one that fails.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[8; 3]).into())], S0);
    assert!(f.s.flush(S0).is_err());
    assert_eq!(untrusted_cause(&mut f.s, &x), cause);
    // A successful full host write does; launches then run on it, and a
    // launch that succeeds keeps it trusted.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[8; N]).into())], S0);
    f.s.check(vec![x.binding()], S0).expect("trusted again");
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&x], S0);
    assert_eq!(
        bytes_u32(&read(&mut f.s, &x, S0).expect("read")),
        vec![9; N]
    );
    launch(&mut f.s, fill_kernel(), CubeCount::x(1), &[&x], S0);
    assert_eq!(
        bytes_u32(&read(&mut f.s, &x, S0).expect("read")),
        vec![7; N]
    );
    sync(&mut f.s, S0).expect("nothing else failed");
    f.assert_neighbours_and_bystander();
}
