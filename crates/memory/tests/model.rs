//! Property tests against a model: random reserve / free / write / read
//! sequences (with an occasional cleanup or mode switch) on a real
//! `BytesStorage`. After every operation:
//! - live slices never overlap (checked per page, on the slices' full
//!   reserved ranges), start on the alignment and lie inside their page;
//! - `get` / `size_of` answer what `bind` returned;
//! - the report agrees with the model (allocations, bytes in use, padding)
//!   and with the storage (bytes reserved == bytes the storage holds);
//! - bytes reserved by the sliced pools stay within
//!   `2 x peak live + one page of each sliced pool`;
//! - right after a cleanup in Auto mode, the pages held are exactly the
//!   pages of the live slices (nothing with nothing live survives it).
//!
//! Every read returns exactly the bytes last written; and at the end, with
//! everything freed and cleaned up, nothing is reserved.
//!
//! The exclusive pool has no bound of its own between cleanups: a kept
//! page serves only requests within 2x of it (see `exclusive.rs`), so
//! sizes that keep growing keep adding pages until cleanup. That is what
//! the cleanup check covers.

use std::sync::OnceLock;

use compute_memory::{BytesStorage, MemoryManagement};
use compute_runtime::{
    MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryId, MemoryPoolOptions,
    PoolKind, StorageHandle,
};
use compute_testkit::Rng;
use proptest::prelude::*;

const MIB: u64 = 1 << 20;
const MAX_SIZE: u64 = 64 * MIB;
/// Bytes live the model stays under (a reserve over it frees instead).
const LIVE_CAP: u64 = 512 * MIB;
const ALIGN: u64 = 256;

/// Random bytes; a slice's content is a window of them, so writes are one
/// `memcpy` and reads one `memcmp` even in a debug build.
fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    PATTERN.get_or_init(|| {
        let mut rng = Rng::new(0x006d_6f64_656c);
        let len = usize::try_from(MAX_SIZE).unwrap_or(usize::MAX) + 4096;
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    })
}

fn window(shift: u16, size: u64) -> &'static [u8] {
    let start = usize::from(shift % 4096);
    let len = usize::try_from(size).unwrap_or(usize::MAX);
    &pattern()[start..start + len]
}

#[derive(Debug, Clone)]
enum Op {
    Reserve(u64),
    Free(usize),
    Write(usize, u16),
    Read(usize),
    Cleanup,
    Persistent(bool),
}

/// Log-uniform in `[min, max]`.
fn log_uniform(min: u64, max: u64) -> impl Strategy<Value = u64> {
    let (lo, hi) = ((min as f64).log2(), (max as f64).log2());
    (lo..=hi).prop_map(move |e| (e.exp2() as u64).clamp(min, max))
}

fn ops(min: u64, max: u64, len: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        8 => log_uniform(min, max).prop_map(Op::Reserve),
        6 => any::<usize>().prop_map(Op::Free),
        4 => (any::<usize>(), any::<u16>()).prop_map(|(i, s)| Op::Write(i, s)),
        4 => any::<usize>().prop_map(Op::Read),
        1 => Just(Op::Cleanup),
        1 => any::<bool>().prop_map(Op::Persistent),
    ];
    prop::collection::vec(op, 1..len)
}

#[derive(Debug)]
struct Live {
    id: MemoryId,
    size: u64,
    handle: StorageHandle,
    written: Option<u16>,
}

fn range(h: &StorageHandle, size: u64) -> StorageHandle {
    StorageHandle { size, ..*h }
}

fn run(
    config: &MemoryConfiguration,
    props: MemoryDeviceProperties,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut m = MemoryManagement::new(BytesStorage::new(ALIGN), props, config)
        .map_err(|e| TestCaseError::fail(format!("config: {e}")))?;
    // One page of every sliced pool: the slack the bound allows.
    let slack: u64 = m
        .report()
        .pools
        .iter()
        .map(|p| match p.kind {
            PoolKind::Sliced { page_size, .. } => page_size,
            _ => 0,
        })
        .sum();
    let mut live: Vec<Live> = Vec::new();
    let mut live_bytes = 0u64;
    let mut peak_live = 0u64;
    for op in ops {
        match *op {
            Op::Reserve(size) if live_bytes + size <= LIVE_CAP => {
                let id = MemoryId::next();
                let handle = m
                    .bind(id, size)
                    .map_err(|e| TestCaseError::fail(format!("bind {size}: {e}")))?;
                prop_assert!(handle.size >= size);
                live.push(Live {
                    id,
                    size,
                    handle,
                    written: None,
                });
                live_bytes += size;
                peak_live = peak_live.max(live_bytes);
            }
            Op::Reserve(_) => {}
            Op::Free(i) if !live.is_empty() => {
                let l = live.swap_remove(i % live.len());
                m.release(l.id);
                live_bytes -= l.size;
                prop_assert_eq!(m.get(l.id), None);
            }
            Op::Write(i, shift) if !live.is_empty() => {
                let n = live.len();
                let l = &mut live[i % n];
                let dst = m
                    .storage()
                    .bytes_mut(&range(&l.handle, l.size))
                    .ok_or_else(|| TestCaseError::fail("slice outside its page"))?;
                dst.copy_from_slice(window(shift, l.size));
                l.written = Some(shift);
            }
            Op::Read(i) if !live.is_empty() => {
                let l = &live[i % live.len()];
                if let Some(shift) = l.written {
                    let got = m
                        .storage()
                        .bytes(&range(&l.handle, l.size))
                        .ok_or_else(|| TestCaseError::fail("slice outside its page"))?;
                    prop_assert!(got == window(shift, l.size), "read of {:?} differs", l.id);
                }
            }
            Op::Cleanup => {
                let gone = m.cleanup();
                let mut pages: Vec<_> = live.iter().map(|l| l.handle.id).collect();
                pages.sort_unstable();
                pages.dedup();
                for id in &gone {
                    prop_assert!(
                        pages.binary_search(id).is_err(),
                        "a page with live slices went"
                    );
                }
                let held: u64 = m.report().pools.iter().map(|p| p.pages).sum();
                if m.mode() == MemoryAllocationMode::Auto {
                    prop_assert_eq!(held, pages.len() as u64);
                    prop_assert_eq!(m.storage().page_count(), pages.len());
                } else {
                    prop_assert!(held >= pages.len() as u64);
                }
            }
            Op::Persistent(on) => m.set_mode(if on {
                MemoryAllocationMode::Persistent
            } else {
                MemoryAllocationMode::Auto
            }),
            _ => {}
        }
        check(&mut m, &live, live_bytes, peak_live, slack)?;
    }
    // Every write survived to the end (cleanup and mode switches included).
    for l in &live {
        if let Some(shift) = l.written {
            let got = m.storage().bytes(&range(&l.handle, l.size));
            prop_assert!(got == Some(window(shift, l.size)));
        }
    }
    for l in live.drain(..) {
        m.release(l.id);
    }
    m.set_mode(MemoryAllocationMode::Auto);
    m.cleanup();
    let r = m.report();
    prop_assert_eq!(r.bytes_reserved(), 0);
    prop_assert_eq!(m.storage().allocated(), 0);
    prop_assert_eq!(m.storage().page_count(), 0);
    Ok(())
}

fn check(
    m: &mut MemoryManagement<BytesStorage>,
    live: &[Live],
    live_bytes: u64,
    peak_live: u64,
    slack: u64,
) -> Result<(), TestCaseError> {
    let mut slices: Vec<StorageHandle> = Vec::with_capacity(live.len());
    for l in live {
        prop_assert_eq!(m.get(l.id), Some(l.handle));
        prop_assert_eq!(m.size_of(l.id), Some(l.size));
        prop_assert_eq!(l.handle.offset % ALIGN, 0);
        prop_assert!(
            m.storage().bytes(&l.handle).is_some(),
            "slice outside its page"
        );
        slices.push(l.handle);
    }
    slices.sort_unstable_by_key(|h| (h.id, h.offset));
    for w in slices.windows(2) {
        if w[0].id == w[1].id {
            prop_assert!(
                w[0].offset + w[0].size <= w[1].offset,
                "overlap: {:?} and {:?}",
                w[0],
                w[1]
            );
        }
    }
    let r = m.report();
    let allocations: u64 = r.pools.iter().map(|p| p.allocations).sum();
    let padding: u64 = r.pools.iter().map(|p| p.bytes_padding).sum();
    prop_assert_eq!(allocations, live.len() as u64);
    prop_assert_eq!(r.bytes_in_use(), live_bytes);
    prop_assert_eq!(
        padding,
        live.iter().map(|l| l.handle.size - l.size).sum::<u64>()
    );
    prop_assert_eq!(r.bytes_reserved(), m.storage().allocated());
    for p in &r.pools {
        prop_assert!(p.bytes_in_use + p.bytes_padding <= p.bytes_reserved);
        prop_assert!(p.peak_bytes_reserved >= p.bytes_reserved && p.peak_pages >= p.pages);
    }
    let sliced: u64 = r
        .pools
        .iter()
        .filter(|p| matches!(p.kind, PoolKind::Sliced { .. }))
        .map(|p| p.bytes_reserved)
        .sum();
    prop_assert!(
        sliced <= 2 * peak_live + slack,
        "{sliced} bytes reserved by sliced pools for a peak of {peak_live} live"
    );
    Ok(())
}

/// wgpu's default limits: 128 MiB bindings, 256-byte alignment.
const DEFAULT_PROPS: MemoryDeviceProperties = MemoryDeviceProperties {
    max_buffer_size: 256 * MIB,
    max_binding_size: 128 * MIB,
    alignment: 256,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, max_shrink_iters: 64, ..ProptestConfig::default() })]

    /// Mixed sizes, 256 B .. 64 MiB, through the default configuration
    /// (32 MiB / 2 MiB sliced, 128 MiB / 64 MiB sliced, exclusive).
    #[test]
    fn mixed_sizes_through_the_default_pools(ops in ops(256, MAX_SIZE, 300)) {
        run(&MemoryConfiguration::Default, DEFAULT_PROPS, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Small sizes through small pages, so many slices share a page and
    /// every routing boundary is crossed: 1 B .. 64 KiB over 16 KiB / 2 KiB
    /// sliced, 64 KiB / 16 KiB sliced and exclusive pages.
    #[test]
    fn small_sizes_through_small_pages(ops in ops(1, 64 << 10, 400)) {
        let sliced = |page_size, max_slice| MemoryPoolOptions {
            kind: PoolKind::Sliced { page_size, max_slice },
            max_reserved: None,
        };
        let config = MemoryConfiguration::Custom(vec![
            sliced(16 << 10, 2 << 10),
            sliced(64 << 10, 16 << 10),
            MemoryPoolOptions { kind: PoolKind::Exclusive { max_slice: 64 << 10 }, max_reserved: None },
        ]);
        let props = MemoryDeviceProperties {
            max_buffer_size: 1 << 20,
            max_binding_size: 64 << 10,
            alignment: 256,
        };
        run(&config, props, &ops)?;
    }
}
