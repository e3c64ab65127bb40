//! Bad input: each case gets a precise `ServerError`, the manager keeps
//! serving afterwards, and a request that failed for lack of room succeeds
//! once memory is freed and `cleanup` has run.

use compute_memory::{BytesStorage, MemoryManagement};
use compute_runtime::{
    MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryId, MemoryPoolOptions,
    PoolKind, ServerError,
};

const PROPS: MemoryDeviceProperties = MemoryDeviceProperties {
    max_buffer_size: 1 << 20,
    max_binding_size: 1 << 16,
    alignment: 256,
};

fn sliced(page_size: u64, max_slice: u64, max_reserved: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        kind: PoolKind::Sliced {
            page_size,
            max_slice,
        },
        max_reserved,
    }
}

fn exclusive(max_slice: u64, max_reserved: Option<u64>) -> MemoryPoolOptions {
    MemoryPoolOptions {
        kind: PoolKind::Exclusive { max_slice },
        max_reserved,
    }
}

fn manager(config: MemoryConfiguration) -> MemoryManagement<BytesStorage> {
    MemoryManagement::new(BytesStorage::new(256), PROPS, &config).expect("valid configuration")
}

/// The manager still serves: a fresh small reservation works and reads back.
fn still_serves(m: &mut MemoryManagement<BytesStorage>) {
    let id = MemoryId::next();
    let h = m.bind(id, 64).expect("the manager keeps serving");
    assert_eq!(m.get(id), Some(h));
    m.release(id);
}

#[test]
fn zero_size_is_an_invalid_argument() {
    let mut m = manager(MemoryConfiguration::Default);
    let id = MemoryId::next();
    let err = m.bind(id, 0).expect_err("zero size");
    assert!(
        matches!(&err, ServerError::InvalidArgument { reason } if reason.contains("zero")),
        "{err:?}"
    );
    assert_eq!(m.get(id), None);
    still_serves(&mut m);
    // The id whose bind failed can be bound now.
    assert!(m.bind(id, 16).is_ok());
}

#[test]
fn over_max_buffer_size_is_the_device_limit() {
    let mut m = manager(MemoryConfiguration::Default);
    let err = m
        .bind(MemoryId::next(), (1 << 20) + 1)
        .expect_err("too big");
    assert_eq!(
        err,
        ServerError::LimitExceeded {
            limit: "max_buffer_size",
            requested: (1 << 20) + 1,
            max: 1 << 20,
        }
    );
    // Exactly max_buffer_size is served (by the exclusive pool).
    assert!(m.bind(MemoryId::next(), 1 << 20).is_ok());
    still_serves(&mut m);
}

/// Larger than every pool serves is over the one limit `initialize_memory`
/// and `staging` share (`max_reservation`), with the largest max slice as
/// the maximum.
#[test]
fn larger_than_every_pool_is_over_the_largest_max_slice() {
    let mut m = manager(MemoryConfiguration::Custom(vec![
        sliced(4096, 512, None),
        sliced(8192, 2048, None),
    ]));
    let err = m.bind(MemoryId::next(), 2049).expect_err("no pool");
    assert!(
        matches!(
            err,
            ServerError::LimitExceeded {
                requested: 2049,
                max: 2048,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        m.check_reservation(2049, MemoryAllocationMode::Auto),
        Err(err)
    );
    assert!(m.bind(MemoryId::next(), 2048).is_ok());
    still_serves(&mut m);
}

#[test]
fn a_pool_cap_is_out_of_memory_until_freed_and_cleaned_up() {
    // Small sizes go to a sliced pool; the exclusive pool is capped at
    // 8 KiB.
    let mut m = manager(MemoryConfiguration::Custom(vec![
        sliced(4096, 1024, None),
        exclusive(1 << 20, Some(8192)),
    ]));
    let big = MemoryId::next();
    let big_page = m.bind(big, 8192).expect("fills the cap").id;
    let err = m.bind(MemoryId::next(), 2048).expect_err("over the cap");
    match &err {
        ServerError::OutOfMemory { size, reason } => {
            assert_eq!(*size, 2048);
            assert!(
                reason.contains("pool 1") && reason.contains("exclusive"),
                "{reason}"
            );
            assert!(reason.contains("max_reserved"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Other pools keep serving.
    still_serves(&mut m);
    // Freed, the 8 KiB page is kept, and it is more than twice 2048: the
    // same request still fails, and now says cleanup would help.
    m.release(big);
    let id = MemoryId::next();
    let err = m.bind(id, 2048).expect_err("kept page still counts");
    assert!(err.to_string().contains("memory_cleanup"), "{err}");
    // Cleanup gives back the kept page (and the sliced page `still_serves`
    // emptied).
    assert!(m.cleanup().contains(&big_page));
    let h = m.bind(id, 2048).expect("room after cleanup");
    assert_eq!(m.get(id), Some(h));
    assert_eq!(m.report().pools[1].bytes_reserved, 2048);
}

#[test]
fn a_sliced_cap_frees_up_without_cleanup_when_room_is_reused() {
    let mut m = manager(MemoryConfiguration::Custom(vec![sliced(
        4096,
        4096,
        Some(8192),
    )]));
    let a = MemoryId::next();
    m.bind(a, 4096).expect("page 1");
    m.bind(MemoryId::next(), 4096).expect("page 2");
    let err = m.bind(MemoryId::next(), 256).expect_err("cap");
    assert!(
        matches!(&err, ServerError::OutOfMemory { reason, .. } if reason.contains("pool 0")),
        "{err:?}"
    );
    m.release(a);
    // The freed range is reused at once.
    assert!(m.bind(MemoryId::next(), 256).is_ok());
}

#[test]
fn a_device_out_of_memory_recovers_after_cleanup() {
    let mut storage = BytesStorage::new(256);
    storage.capacity = Some(8192);
    let mut m = MemoryManagement::new(
        storage,
        PROPS,
        &MemoryConfiguration::Custom(vec![sliced(4096, 1024, None), exclusive(1 << 20, None)]),
    )
    .expect("config");
    let x = MemoryId::next();
    m.bind(x, 6000).expect("exclusive page of 6144");
    // A sliced page of 4096 would take the storage to 10240 > 8192.
    let y = MemoryId::next();
    let err = m.bind(y, 100).expect_err("storage full");
    assert!(matches!(err, ServerError::OutOfMemory { .. }), "{err:?}");
    assert_eq!(m.get(y), None);
    // Freeing x alone keeps its page for reuse...
    m.release(x);
    assert!(m.bind(y, 100).is_err());
    // ...cleanup gives it back, and the request succeeds.
    assert_eq!(m.cleanup().len(), 1);
    m.bind(y, 100).expect("room after cleanup");
    let r = m.report();
    assert_eq!(r.bytes_reserved(), 4096);
    assert_eq!(m.storage().allocated(), 4096);
}

#[test]
fn binding_a_bound_id_twice_is_refused_and_unknown_releases_are_ignored() {
    let mut m = manager(MemoryConfiguration::Default);
    let id = MemoryId::next();
    let h = m.bind(id, 100).expect("first");
    assert_eq!(
        m.bind(id, 100),
        Err(ServerError::AlreadyInitialized { memory: id })
    );
    assert_eq!(m.get(id), Some(h));
    assert_eq!(m.size_of(id), Some(100));
    m.release(MemoryId::next());
    m.release(id);
    m.release(id);
    assert_eq!(m.get(id), None);
    assert_eq!(m.report().bytes_in_use(), 0);
}

#[test]
fn inconsistent_configurations_are_refused_with_the_reason() {
    let new = |config: MemoryConfiguration| {
        MemoryManagement::new(BytesStorage::new(256), PROPS, &config).map(|_| ())
    };
    let reason = |r: Result<(), ServerError>| match r {
        Err(ServerError::InvalidConfiguration { reason }) => reason,
        other => panic!("expected an invalid configuration, got {other:?}"),
    };
    // A max slice that, rounded to the alignment, no longer fits a page.
    let r = reason(new(MemoryConfiguration::Custom(vec![sliced(
        1000, 1000, None,
    )])));
    assert!(r.contains("pool 0") && r.contains("alignment"), "{r}");
    // Two persistent pools.
    let persistent = MemoryPoolOptions {
        kind: PoolKind::Persistent,
        max_reserved: None,
    };
    let r = reason(new(MemoryConfiguration::Custom(vec![
        persistent,
        persistent,
        exclusive(1024, None),
    ])));
    assert!(r.contains("at most one persistent"), "{r}");
    // Nothing to serve Auto mode.
    let r = reason(new(MemoryConfiguration::Custom(vec![persistent])));
    assert!(r.contains("Auto"), "{r}");
    // The runtime's own checks run first: a page over the binding size.
    let r = reason(new(MemoryConfiguration::Custom(vec![sliced(
        1 << 17,
        1024,
        None,
    )])));
    assert!(r.contains("max_storage_buffer_binding_size"), "{r}");
    // An alignment larger than any buffer.
    let r = MemoryManagement::new(
        BytesStorage::new(1 << 21),
        PROPS,
        &MemoryConfiguration::Default,
    )
    .map(|_| ());
    assert!(reason(r).contains("alignment"));
}
