//! Report numbers against hand-computed values for small scripts of
//! allocations. The arithmetic is in the comments, next to each check.

use compute_memory::{BytesStorage, MemoryManagement};
use compute_runtime::{
    MemoryAllocationMode, MemoryConfiguration, MemoryDeviceProperties, MemoryId, MemoryPoolOptions,
    PoolKind, PoolReport,
};

const PROPS: MemoryDeviceProperties = MemoryDeviceProperties {
    max_buffer_size: 1 << 20,
    max_binding_size: 1 << 16,
    alignment: 256,
};

const SLICED: PoolKind = PoolKind::Sliced {
    page_size: 4096,
    max_slice: 1024,
};
const EXCLUSIVE: PoolKind = PoolKind::Exclusive { max_slice: 1 << 20 };

fn config() -> MemoryConfiguration {
    MemoryConfiguration::Custom(vec![
        MemoryPoolOptions {
            kind: SLICED,
            max_reserved: None,
        },
        MemoryPoolOptions {
            kind: EXCLUSIVE,
            max_reserved: None,
        },
    ])
}

/// `[allocations, in_use, reserved, padding, pages, peak_in_use,
/// peak_reserved, peak_pages]`.
fn line(p: &PoolReport) -> [u64; 8] {
    [
        p.allocations,
        p.bytes_in_use,
        p.bytes_reserved,
        p.bytes_padding,
        p.pages,
        p.peak_bytes_in_use,
        p.peak_bytes_reserved,
        p.peak_pages,
    ]
}

#[test]
fn report_follows_a_script_of_allocations() {
    let mut m =
        MemoryManagement::new(BytesStorage::new(256), PROPS, &config()).expect("valid config");
    let ids: Vec<MemoryId> = (0..8).map(|_| MemoryId::next()).collect();
    let [a, b, c, d, e, f, g, h] = ids[..] else {
        panic!("eight ids")
    };

    // Nothing yet: both pools listed, in routing order, all zero; the
    // implicit persistent pool is not listed in Auto mode while empty.
    let r = m.report();
    assert_eq!(r.pools.len(), 2);
    assert_eq!((r.pools[0].kind, r.pools[1].kind), (SLICED, EXCLUSIVE));
    assert_eq!(line(&r.pools[0]), [0; 8]);

    // a: 100 B -> sliced, 256 B slice at offset 0 of page P1.
    // b: 1000 B -> sliced, 1024 B slice at 256.
    // c: 3000 B -> over the sliced max slice (1024): exclusive, page 3072.
    // d: 1024 B -> sliced, 1024 B slice at 1280.
    let ha = m.bind(a, 100).expect("a");
    let hb = m.bind(b, 1000).expect("b");
    let hc = m.bind(c, 3000).expect("c");
    let hd = m.bind(d, 1024).expect("d");
    assert_eq!((ha.offset, ha.size), (0, 256));
    assert_eq!((hb.id, hb.offset, hb.size), (ha.id, 256, 1024));
    assert_eq!((hc.offset, hc.size), (0, 3072));
    assert_eq!((hd.id, hd.offset), (ha.id, 1280));
    let r = m.report();
    // sliced: 3 live; in use 100 + 1000 + 1024 = 2124; one 4096 page;
    // padding (256-100) + (1024-1000) + 0 = 156 + 24 = 180.
    assert_eq!(line(&r.pools[0]), [3, 2124, 4096, 180, 1, 2124, 4096, 1]);
    // exclusive: 1 live, 3000 in use, 3072 reserved, 72 padding.
    assert_eq!(line(&r.pools[1]), [1, 3000, 3072, 72, 1, 3000, 3072, 1]);
    assert_eq!((r.bytes_in_use(), r.bytes_reserved()), (5124, 7168));
    assert_eq!(m.storage().allocated(), 7168);

    // Free b: sliced in use 2124 - 1000 = 1124, padding 180 - 24 = 156;
    // the page stays; peaks stay.
    m.release(b);
    // e: 2000 B -> exclusive; needs 2048; nothing kept: new page.
    // exclusive: 2 live, 3000 + 2000 = 5000 in use, 3072 + 2048 = 5120
    // reserved, padding 72 + 48 = 120.
    let he = m.bind(e, 2000).expect("e");
    assert_eq!(he.size, 2048);
    let r = m.report();
    assert_eq!(line(&r.pools[0]), [2, 1124, 4096, 156, 1, 2124, 4096, 1]);
    assert_eq!(line(&r.pools[1]), [2, 5000, 5120, 120, 2, 5000, 5120, 2]);

    // Free c: its 3072 page is kept (reserved unchanged).
    // f: 1600 B -> exclusive; needs 1792 (7 * 256); the kept 3072 page is
    // within 2 x 1792 = 3584: reused. In use 2000 + 1600 = 3600, padding
    // 48 + (3072 - 1600 = 1472) = 1520.
    m.release(c);
    let hf = m.bind(f, 1600).expect("f");
    assert_eq!((hf.id, hf.size), (hc.id, 3072));
    assert_eq!(m.size_of(f), Some(1600));
    let r = m.report();
    assert_eq!(line(&r.pools[1]), [2, 3600, 5120, 1520, 2, 5000, 5120, 2]);

    // Cleanup with every page holding something live gives nothing back.
    assert!(m.cleanup().is_empty());

    // b's 1024 hole at 256 is best fit for g (900 B -> 1024): reused.
    let hg = m.bind(g, 900).expect("g");
    assert_eq!((hg.id, hg.offset), (ha.id, 256));
    // sliced: 3 live, 1124 + 900 = 2024 in use, padding 156 + 124 = 280.
    assert_eq!(
        line(&m.report().pools[0]),
        [3, 2024, 4096, 280, 1, 2124, 4096, 1]
    );

    // Free every sliced slice and e: P1 is empty, e's 2048 page is kept.
    for id in [a, d, g, e] {
        m.release(id);
    }
    let gone = m.cleanup();
    assert_eq!(gone, vec![ha.id, he.id]);
    let r = m.report();
    // sliced: nothing left; peaks remain.
    assert_eq!(line(&r.pools[0]), [0, 0, 0, 0, 0, 2124, 4096, 1]);
    // exclusive: f alone, 1600 in 3072, padding 1472.
    assert_eq!(line(&r.pools[1]), [1, 1600, 3072, 1472, 1, 5000, 5120, 2]);
    assert_eq!(m.storage().allocated(), 3072);

    // Persistent mode: the persistent pool is listed last.
    // h: 100 B -> persistent page of 256.
    m.set_mode(MemoryAllocationMode::Persistent);
    let r = m.report();
    assert_eq!(r.pools.len(), 3);
    assert_eq!(r.pools[2].kind, PoolKind::Persistent);
    let hh = m.bind(h, 100).expect("h");
    assert_eq!((hh.offset, hh.size), (0, 256));
    assert_eq!(
        line(&m.report().pools[2]),
        [1, 100, 256, 156, 1, 100, 256, 1]
    );
    m.release(h);
    // Cleanup in persistent mode keeps the persistent page.
    assert!(m.cleanup().is_empty());
    assert_eq!(line(&m.report().pools[2]), [0, 0, 256, 0, 1, 100, 256, 1]);
    // Back in Auto mode the page is still listed (it is held) until
    // cleanup gives it back; then the line goes.
    m.set_mode(MemoryAllocationMode::Auto);
    assert_eq!(m.report().pools.len(), 3);
    assert_eq!(m.cleanup(), vec![hh.id]);
    assert_eq!(m.report().pools.len(), 2);

    m.release(f);
    assert_eq!(m.cleanup(), vec![hf.id]);
    assert_eq!(m.report().bytes_reserved(), 0);
    assert_eq!(m.storage().allocated(), 0);
}

#[test]
fn default_configuration_shape_and_first_page() {
    // wgpu's default limits: 128 MiB bindings, 256-byte alignment.
    let props = MemoryDeviceProperties {
        max_buffer_size: 256 << 20,
        max_binding_size: 128 << 20,
        alignment: 256,
    };
    let mut m = MemoryManagement::new(
        BytesStorage::phantom(256),
        props,
        &MemoryConfiguration::Default,
    )
    .expect("default");
    let kinds: Vec<PoolKind> = m.report().pools.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        vec![
            PoolKind::Sliced {
                page_size: 32 << 20,
                max_slice: 2 << 20
            },
            PoolKind::Sliced {
                page_size: 128 << 20,
                max_slice: 64 << 20
            },
            PoolKind::Exclusive {
                max_slice: 256 << 20
            },
        ]
    );
    // 2 MiB -> small pool; 2 MiB + 1 -> large pool (2 MiB + 256 slice);
    // 64 MiB + 1 -> exclusive (64 MiB + 256 page).
    m.bind(MemoryId::next(), 2 << 20).expect("small");
    m.bind(MemoryId::next(), (2 << 20) + 1).expect("large");
    m.bind(MemoryId::next(), (64 << 20) + 1).expect("exclusive");
    let r = m.report();
    let reserved: Vec<u64> = r.pools.iter().map(|p| p.bytes_reserved).collect();
    assert_eq!(reserved, vec![32 << 20, 128 << 20, (64 << 20) + 256]);
    let padding: Vec<u64> = r.pools.iter().map(|p| p.bytes_padding).collect();
    assert_eq!(padding, vec![0, 255, 255]);
}

#[test]
fn exclusive_pages_is_one_pool() {
    let mut m = MemoryManagement::new(
        BytesStorage::new(256),
        PROPS,
        &MemoryConfiguration::ExclusivePages,
    )
    .expect("config");
    let a = m.bind(MemoryId::next(), 10).expect("a");
    let b = m.bind(MemoryId::next(), 10).expect("b");
    assert_ne!(a.id, b.id);
    let r = m.report();
    assert_eq!(r.pools.len(), 1);
    assert_eq!(r.pools[0].kind, EXCLUSIVE);
    // Two pages of 256 for 10 B each: 20 in use, 512 reserved, 492 padding.
    assert_eq!(line(&r.pools[0]), [2, 20, 512, 492, 2, 20, 512, 2]);
}

#[test]
fn a_configured_persistent_pool_is_listed_in_its_place() {
    let cfg = MemoryConfiguration::Custom(vec![
        MemoryPoolOptions {
            kind: PoolKind::Persistent,
            max_reserved: None,
        },
        MemoryPoolOptions {
            kind: EXCLUSIVE,
            max_reserved: None,
        },
    ]);
    let mut m = MemoryManagement::new(BytesStorage::new(256), PROPS, &cfg).expect("config");
    let kinds: Vec<PoolKind> = m.report().pools.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, vec![PoolKind::Persistent, EXCLUSIVE]);
    // Auto mode skips it in routing.
    m.bind(MemoryId::next(), 100).expect("auto");
    let r = m.report();
    assert_eq!((r.pools[0].allocations, r.pools[1].allocations), (0, 1));
    m.set_mode(MemoryAllocationMode::Persistent);
    m.bind(MemoryId::next(), 100).expect("persistent");
    assert_eq!(m.report().pools[0].allocations, 1);
}
