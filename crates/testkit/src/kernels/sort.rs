//! A least-significant-digit radix sort of `u32` keys, 8 bits per pass:
//! per pass, [`radix_count`] counts each block's digits, the scan kernels
//! turn the digit-major counts into every (digit, block)'s first output
//! position, and [`radix_scatter`] sorts each block by the digit in shared
//! memory (stably, a one-bit split per digit bit) and writes its keys
//! there. Stable per pass, so four passes sort. Needs `SUBGROUP` (the
//! split's scans).

use compute_ir::{IrError, Kernel, KernelBuilder, Scalar, Shared, Val};

use super::scan::workgroup_exclusive;

/// Keys per block (per workgroup of the sort kernels).
pub const RADIX_BLOCK: u32 = 1024;
/// Digit bits per pass.
pub const RADIX_BITS: u32 = 8;
const WG: u32 = 256;
const PER: u32 = RADIX_BLOCK / WG;
const DIGITS: u32 = 1 << RADIX_BITS;

/// The scalars both kernels take, in order: `n` keys, the pass's `shift`,
/// and `blocks` (`ceil(n / RADIX_BLOCK)`).
struct Pass {
    n: Val,
    shift: Val,
    blocks: Val,
    block: Val,
}

impl Pass {
    fn new(k: &KernelBuilder) -> Pass {
        Pass {
            n: k.scalar_arg(Scalar::U32),
            shift: k.scalar_arg(Scalar::U32),
            blocks: k.scalar_arg(Scalar::U32),
            block: k.x(k.workgroup_id()),
        }
    }

    fn digit(&self, k: &KernelBuilder, key: Val) -> Val {
        k.and(k.shr(key, self.shift), DIGITS - 1)
    }

    /// Position `q` of this invocation's run in the input, and whether a
    /// key is there.
    fn key_at(&self, k: &KernelBuilder, q: u32) -> (Val, Val) {
        let at = k.add(
            k.mul(self.block, RADIX_BLOCK),
            k.add(k.mul(k.local_index(), PER), q),
        );
        (at, k.lt(at, self.n))
    }

    /// The block's digit counts in `bins` (zeroed here), valid keys only.
    fn count(&self, k: &KernelBuilder, keys: compute_ir::Buf, bins: compute_ir::AtomicShared) {
        k.atomic_store(bins, k.local_index(), 0u32);
        k.barrier();
        for q in 0..PER {
            let (at, valid) = self.key_at(k, q);
            k.if_(valid, |k| {
                k.atomic_add(bins, self.digit(k, k.load(keys, at)), 1u32);
            });
        }
        k.barrier();
    }
}

/// `counts[d * blocks + b]` = the keys of block `b` whose digit at
/// `shift` is `d`.
///
/// Bindings: 0 `keys: u32` (read), 1 `counts: u32` (read-write, `256 *
/// blocks`). Scalars: `n, shift, blocks: u32`. Dispatch `blocks`
/// workgroups along x.
pub fn radix_count() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("radix_count", [WG, 1, 1]);
    let keys = k.input(Scalar::U32);
    let counts = k.output(Scalar::U32);
    let p = Pass::new(&k);
    let bins = k.atomic_shared(Scalar::U32, DIGITS);
    p.count(&k, keys, bins);
    let l = k.local_index();
    k.store(
        counts,
        k.add(k.mul(l, p.blocks), p.block),
        k.atomic_load(bins, l),
    );
    k.build()
}

/// One stable split of the block in `sorted` on bit `bit` of the digit:
/// keys with the bit clear first, each side in its order.
fn split(k: &KernelBuilder, p: &Pass, sorted: Shared, totals: Shared, bit: u32) {
    let l = k.local_index();
    let keys: Vec<Val> = (0..PER)
        .map(|q| k.load(sorted, k.add(k.mul(l, PER), q)))
        .collect();
    let clear: Vec<Val> = keys
        .iter()
        .map(|&key| {
            let b = k.and(k.shr(p.digit(k, key), bit), 1u32);
            k.sub(1u32, b)
        })
        .collect();
    let mine = clear.iter().fold(k.u32(0), |s, &c| k.add(s, c));
    let (before, zeros) = workgroup_exclusive(k, mine, totals);
    let mut zeros_before = before;
    for (q, (&key, &c)) in keys.iter().zip(&clear).enumerate() {
        let at = k.add(k.mul(l, PER), q as u32);
        let ones_before = k.sub(at, zeros_before);
        let to = k.select(k.eq(c, 1u32), zeros_before, k.add(zeros, ones_before));
        // Every invocation has read its keys (the scan's barriers) before
        // any writes here.
        k.store(sorted, to, key);
        zeros_before = k.add(zeros_before, c);
    }
    k.barrier();
}

/// Block `b`'s keys written to `out` in digit order: key of digit `d` at
/// local rank `r` among the block's keys of that digit goes to
/// `offsets[d * blocks + b] + r`.
///
/// Bindings: 0 `keys: u32` (read), 1 `offsets: u32` (read, the exclusive
/// scan of [`radix_count`]'s counts), 2 `out: u32` (read-write). Scalars
/// and dispatch as [`radix_count`].
pub fn radix_scatter() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("radix_scatter", [WG, 1, 1]);
    let keys = k.input(Scalar::U32);
    let offsets = k.input(Scalar::U32);
    let out = k.output(Scalar::U32);
    let p = Pass::new(&k);
    let bins = k.atomic_shared(Scalar::U32, DIGITS);
    let starts = k.shared(Scalar::U32, DIGITS);
    let sorted = k.shared(Scalar::U32, RADIX_BLOCK);
    let totals = k.shared(Scalar::U32, WG + 1);
    let l = k.local_index();
    p.count(&k, keys, bins);
    // Past the end, keys of the largest digit: a stable sort leaves them
    // after every real key, where nothing reads them.
    for q in 0..PER {
        let (at, valid) = p.key_at(&k, q);
        let key = k.var(k.u32(u32::MAX));
        k.if_(valid, |k| k.set(key, k.load(keys, at)));
        k.store(sorted, k.add(k.mul(l, PER), q), k.get(key));
    }
    let (start, _) = workgroup_exclusive(&k, k.atomic_load(bins, l), totals);
    k.store(starts, l, start);
    // Every invocation done reading `totals` before the splits reuse it;
    // the scan's barriers already ordered the stores to `sorted`.
    k.barrier();
    for bit in 0..RADIX_BITS {
        split(&k, &p, sorted, totals, bit);
    }
    let valid = k.sub(p.n, k.mul(p.block, RADIX_BLOCK));
    for q in 0..PER {
        let at = k.add(k.mul(l, PER), q);
        k.if_(k.lt(at, valid), |k| {
            let key = k.load(sorted, at);
            let d = p.digit(k, key);
            let rank = k.sub(at, k.load(starts, d));
            let first = k.load(offsets, k.add(k.mul(d, p.blocks), p.block));
            k.store(out, k.add(first, rank), key);
        });
    }
    k.build()
}
