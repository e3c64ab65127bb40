//! The pools [`MemoryConfiguration::Default`] stands for, and why.
//!
//! [`MemoryConfiguration::Default`]: compute_runtime::MemoryConfiguration::Default

use compute_runtime::{MemoryDeviceProperties, MemoryPoolOptions, PoolKind};

use crate::pool::round_down;

/// Largest page of the default configuration's large sliced pool.
pub const DEFAULT_LARGE_PAGE: u64 = 128 << 20;
/// Smallest large page for which the default configuration has sliced
/// pools at all.
pub const MIN_DEFAULT_LARGE_PAGE: u64 = 1 << 20;

/// The pools [`MemoryConfiguration::Default`](compute_runtime::MemoryConfiguration::Default) stands for on a device, in
/// routing order; `alignment` is the slice alignment (see the module doc).
///
/// With `L = min(max_binding_size, max_buffer_size, 128 MiB)` rounded down
/// to the alignment:
/// 1. small sliced pool: pages of `L / 4`, max slice `L / 64` (32 MiB
///    pages, 2 MiB slices for `L = 128 MiB`);
/// 2. large sliced pool: pages of `L`, max slice `L / 2` (128 MiB pages,
///    64 MiB slices);
/// 3. exclusive pool: max slice `max_buffer_size`.
///
/// If `L` is under 1 MiB there are no sliced pools; the small one is left
/// out when its slices would be under the alignment.
///
/// Why this shape, measured on the benchmark trace family (see
/// `compute_testkit::trace`; 32 seeds, working sets of 128 to 512 handles,
/// means):
/// one 128 MiB / 32 MiB sliced pool plus exclusive pages ends at a peak
/// reserved / peak live of 1.45-1.65, because the largest octave of sizes
/// (32-64 MiB, about half of all bytes) then lives in exclusive pages that
/// are reused only when a freed page happens to fit. Sliced pages with
/// slices up to half a page reuse that memory through coalescing: 1.23-1.41
/// with one 128 MiB / 64 MiB pool. Keeping slices up to 2 MiB in their own
/// 32 MiB pages (small slices no longer pin big holes, and a small workload
/// reserves 32 MiB, not 128 MiB) gives 1.20-1.33. Further splits (a pool
/// per octave band) measured worse: every pool adds its own partly filled
/// pages.
pub fn default_pools(props: &MemoryDeviceProperties, alignment: u64) -> Vec<MemoryPoolOptions> {
    let alignment = alignment.max(1);
    let sliced = |page_size, max_slice| MemoryPoolOptions {
        kind: PoolKind::Sliced {
            page_size,
            max_slice,
        },
        max_reserved: None,
    };
    let mut pools = Vec::with_capacity(3);
    let large = round_down(
        props
            .max_binding_size
            .min(props.max_buffer_size)
            .min(DEFAULT_LARGE_PAGE),
        alignment,
    );
    if large >= MIN_DEFAULT_LARGE_PAGE {
        let small_page = round_down(large / 4, alignment);
        let small_slice = round_down(large / 64, alignment);
        if small_slice > 0 {
            pools.push(sliced(small_page, small_slice));
        }
        let large_slice = round_down(large / 2, alignment);
        if large_slice > 0 {
            pools.push(sliced(large, large_slice));
        }
    }
    pools.push(MemoryPoolOptions {
        kind: PoolKind::Exclusive {
            max_slice: props.max_buffer_size,
        },
        max_reserved: None,
    });
    pools
}
