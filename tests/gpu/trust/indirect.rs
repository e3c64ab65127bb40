//! Indirect counts: copied to scratch when they share a page, audited
//! and poisoning late when over the limit.

use super::*;
use compute_runtime::{BufferBinding, CubeCount, Handle, Server, ServerError, ServerStorage};

#[test]
fn an_indirect_count_on_the_page_of_a_storage_binding_is_copied_to_scratch_and_runs() {
    let mut f = fixture();
    let x = upload(&mut f.s, u32_bytes(&[0; 4 * N]), S0);
    let count2 = upload(&mut f.s, u32_bytes(&[2, 1, 1]), S0);
    let count4 = upload(&mut f.s, u32_bytes(&[4, 1, 1]), S0);
    let none = upload(&mut f.s, u32_bytes(&[0, 1, 1]), S0);
    // Sixteen bytes, the count in the middle (a 4-aligned offset).
    let inner = upload(&mut f.s, u32_bytes(&[9, 1, 1, 1]), S0);
    let page =
        |s: &mut TestServer, h: &Handle| s.get_resource(h.binding(), S0).expect("page").handle.id;
    let x_page = page(&mut f.s, &x);
    for c in [&count2, &count4, &none, &inner] {
        assert_eq!(page(&mut f.s, c), x_page, "the case needs one sliced page");
    }
    sync(&mut f.s, S0).expect("setup");
    let dynamic = |h: &Handle| CubeCount::Dynamic(h.binding());

    f.begin(S0);
    // Two workgroups of 64 of the 256 elements, then four: every one.
    launch_args(
        &mut f.s,
        inc_kernel(),
        dynamic(&count2),
        bindings(&[&x]),
        S0,
    );
    launch_args(
        &mut f.s,
        inc_kernel(),
        dynamic(&count4),
        bindings(&[&x]),
        S0,
    );
    // No workgroups at all.
    launch_args(&mut f.s, inc_kernel(), dynamic(&none), bindings(&[&x]), S0);
    // The count of a binding at an offset: (1, 1, 1).
    let at_4 = BufferBinding {
        memory: inner.memory.clone(),
        offset: 4,
        size: 12,
    };
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(at_4),
        bindings(&[&x]),
        S0,
    );
    f.end();

    let mut want = vec![3; 4 * N];
    want[2 * N..].fill(1);
    want[..N].fill(3);
    want[N..2 * N].fill(2);
    f.s.check(vec![x.binding()], S0).expect("trusted");
    assert_eq!(bytes_u32(&read(&mut f.s, &x, S0).expect("x")), want);
    // The counts are read, not written.
    for (c, v) in [
        (&count2, [2, 1, 1]),
        (&count4, [4, 1, 1]),
        (&none, [0, 1, 1]),
    ] {
        f.s.check(vec![c.binding()], S0).expect("count trusted");
        assert_eq!(bytes_u32(&read(&mut f.s, c, S0).expect("count")), v);
    }
    sync(&mut f.s, S0).expect("no failure");
    f.assert_neighbours_and_bystander();
}

#[test]
fn an_indirect_count_over_the_limit_poisons_the_launch_writes_late() {
    let mut f = fixture();
    let max = indirect_max(&f.s);
    let over_x = upload(&mut f.s, u32_bytes(&[max + 1, 1, 1]), S0);
    let over_z = upload(&mut f.s, u32_bytes(&[1, 1, max + 1]), S0);
    let x = upload(&mut f.s, u32_bytes(&[5; N]), S0);
    let y = upload(&mut f.s, u32_bytes(&[6; N]), S0);
    let src = upload(&mut f.s, u32_bytes(&[7; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    let is_limit = |e: &ServerError| {
        matches!(
            e,
            ServerError::LimitExceeded { requested, max: m, .. } if *requested == u64::from(max) + 1 && *m == u64::from(max)
        )
    };

    // The sync of the stream reports it.
    f.begin(S0);
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(over_x.binding()),
        bindings(&[&x]),
        S0,
    );
    f.end();
    let err = sync(&mut f.s, S0).expect_err("the sync that ran the batch reports it");
    let (stream, cause, later) = deferred(&err);
    assert_eq!((stream, later), (S0, 0));
    assert!(is_limit(cause), "{cause}");
    sync(&mut f.s, S0).expect("reported once");
    // check after the sync: untrusted, with the limit as its cause.
    let cause = untrusted_cause(&mut f.s, &x);
    assert!(is_limit(&cause), "{cause}");
    f.assert_neighbours_and_bystander();
    // The dispatch was skipped: nothing changed.
    assert_eq!(raw_u32(&mut f.s, &x), vec![5; N]);

    // A read of the writes (no sync first) returns the error, not bytes.
    f.reset_neighbours();
    f.begin(S1);
    launch_args(
        &mut f.s,
        double_kernel(),
        CubeCount::Dynamic(over_z.binding()),
        bindings(&[&src, &y]),
        S1,
    );
    f.end();
    match read(&mut f.s, &y, S1).expect_err("untrusted") {
        ServerError::Untrusted { memory, cause } => {
            assert_eq!(memory, y.memory.id());
            assert!(is_limit(&cause), "{cause}");
        }
        other => panic!("expected Untrusted, got {other}"),
    }
    f.s.check(vec![y.binding()], S1).expect_err("untrusted");
    f.s.check(vec![src.binding()], S1)
        .expect("its read-only input is not poisoned");
    let err = sync(&mut f.s, S1).expect_err("deferred");
    assert!(is_limit(err.root_cause()), "{err}");
    f.assert_neighbours_and_bystander();

    // Poison follows the late verdict: a launch reading `y` now is
    // refused.
    let z = upload(&mut f.s, u32_bytes(&[0; N]), S0);
    launch(&mut f.s, double_kernel(), CubeCount::x(1), &[&y, &z], S0);
    let y_cause = untrusted_cause(&mut f.s, &y);
    assert_refused_for(&mut f.s, &z, y.memory.id(), &y_cause);
    // A refused launch writing `y` leaves it its first cause, the verdict.
    launch(&mut f.s, inc_kernel(), CubeCount::x(1), &[&y], S0);
    assert_eq!(untrusted_cause(&mut f.s, &y), y_cause);
    assert!(is_limit(&y_cause), "{y_cause}");
    let err = sync(&mut f.s, S0).expect_err("two refusals");
    assert_eq!(deferred(&err).2, 1);
    // A full host write trusts `y` again.
    f.s.write(vec![(y.copy_descriptor(), u32_bytes(&[1; N]).into())], S0);
    assert_eq!(bytes_u32(&read(&mut f.s, &y, S0).expect("y")), vec![1; N]);
}

#[test]
fn a_full_host_write_after_an_over_limit_indirect_launch_is_trusted_whenever_the_verdict_arrives() {
    let mut f = fixture();
    let max = indirect_max(&f.s);
    let over = upload(&mut f.s, u32_bytes(&[max + 1, 1, 1]), S0);
    let x = upload(&mut f.s, u32_bytes(&[5; N]), S0);
    sync(&mut f.s, S0).expect("setup");
    f.begin(S0);
    launch_args(
        &mut f.s,
        inc_kernel(),
        CubeCount::Dynamic(over.binding()),
        bindings(&[&x]),
        S0,
    );
    f.end();
    // Program order: the skipped launch, then the write. The write wins.
    f.s.write(vec![(x.copy_descriptor(), u32_bytes(&[8; N]).into())], S0);
    let err = sync(&mut f.s, S0).expect_err("the skipped launch is reported");
    assert!(
        matches!(err.root_cause(), ServerError::LimitExceeded { .. }),
        "{err}"
    );
    f.s.check(vec![x.binding()], S0)
        .expect("the later full write restored trust");
    assert_eq!(bytes_u32(&read(&mut f.s, &x, S0).expect("x")), vec![8; N]);
    f.assert_neighbours_and_bystander();
}
