//! Exclusive prefix sums of `u32` in three launches (reduce, spine,
//! down-sweep), with subgroup scans inside each workgroup.
//!
//! The input is cut into blocks of [`SCAN_BLOCK`] elements, one per
//! workgroup; invocation `l` of a block holds its `l`-th run of 16
//! consecutive elements (four `vec4<u32>`). [`scan_reduce`] writes each
//! block's sum, [`scan_spine`] turns those sums into the blocks' exclusive
//! offsets in place, and [`scan_down`] scans each block from its offset.
//! Sums wrap modulo 2^32, as `u32` addition does. All three need the
//! device's `SUBGROUP` feature.

use compute_ir::{Buf, IrError, Kernel, KernelBuilder, Scalar, Shared, Val, Var};

/// Invocations per workgroup of the scan kernels.
pub const SCAN_WORKGROUP: u32 = 256;
/// `vec4<u32>` each invocation holds.
const PER: u32 = 4;
/// Elements per block (per workgroup of [`scan_reduce`] and [`scan_down`]).
pub const SCAN_BLOCK: u32 = SCAN_WORKGROUP * PER * 4;

/// The exclusive prefix of `t` over the workgroup, in local-index order,
/// and the workgroup's total: a subgroup inclusive scan, the subgroups'
/// totals scanned by one invocation in `totals` (at least one more element
/// than `num_subgroups`), and each subgroup's offset added back. Two
/// barriers; call in uniform control flow. A second call on the same
/// `totals` needs a barrier between this call's reads and its writes.
pub(crate) fn workgroup_exclusive(k: &KernelBuilder, t: Val, totals: Shared) -> (Val, Val) {
    let incl = k.subgroup_inclusive_add(t);
    let sg = k.subgroup_id();
    let nsg = k.num_subgroups();
    let last = k.eq(k.add(k.subgroup_invocation_id(), 1u32), k.subgroup_size());
    k.if_(last, |k| k.store(totals, sg, incl));
    k.barrier();
    k.if_(k.eq(k.local_index(), 0u32), |k| {
        let run = k.var(k.u32(0));
        k.for_range(0u32, nsg, |k, i| {
            let v = k.load(totals, i);
            k.store(totals, i, k.get(run));
            k.set(run, k.add(k.get(run), v));
        });
        k.store(totals, nsg, k.get(run));
    });
    k.barrier();
    let excl = k.add(k.sub(incl, t), k.load(totals, sg));
    (excl, k.load(totals, nsg))
}

/// This invocation's run of `PER` vectors (zero past `n4`), one named
/// variable each (not a local array indexed by a loop counter, which
/// NVIDIA's compiler kept in local memory), and their sum.
fn held(k: &KernelBuilder, x: Buf, n4: Val) -> (Vec<Var>, Val) {
    let block = k.x(k.workgroup_id());
    let first = k.add(k.mul(block, SCAN_BLOCK / 4), k.mul(k.local_index(), PER));
    let zero = k.splat(k.u32(0), 4);
    let sum = k.var(k.u32(0));
    let regs = (0..PER)
        .map(|j| {
            let r = k.var(zero);
            let at = k.add(first, j);
            k.if_(k.lt(at, n4), |k| {
                let v = k.load(x, at);
                k.set(r, v);
                let s = k.add(k.add(k.x(v), k.y(v)), k.add(k.z(v), k.extract(v, 3)));
                k.set(sum, k.add(k.get(sum), s));
            });
            r
        })
        .collect();
    (regs, k.get(sum))
}

fn totals(k: &KernelBuilder) -> Shared {
    // One per subgroup at the smallest subgroup size, and the total.
    k.shared(Scalar::U32, SCAN_WORKGROUP + 1)
}

/// `sums[b]` = the sum of block `b` of `x`.
///
/// Bindings: 0 `x: vec4<u32>` (read), 1 `sums: u32` (read-write, one per
/// block). Scalars: `n4: u32`, the vectors of `x` to scan. Dispatch
/// `ceil(n4 * 4 / SCAN_BLOCK)` workgroups along x.
pub fn scan_reduce() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("scan_reduce", [SCAN_WORKGROUP, 1, 1]);
    let x = k.input_vec(Scalar::U32, 4);
    let sums = k.output(Scalar::U32);
    let n4 = k.scalar_arg(Scalar::U32);
    let totals = totals(&k);
    let (_, t) = held(&k, x, n4);
    let (_, total) = workgroup_exclusive(&k, t, totals);
    k.if_(k.eq(k.local_index(), 0u32), |k| {
        k.store(sums, k.x(k.workgroup_id()), total);
    });
    k.build()
}

/// `sums[..blocks]` replaced by its exclusive prefix sum, by one
/// workgroup: invocation `l` takes a run of `ceil(blocks / 256)`
/// consecutive sums.
///
/// Bindings: 0 `sums: u32` (read-write). Scalars: `blocks: u32`. Dispatch
/// one workgroup.
pub fn scan_spine() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("scan_spine", [SCAN_WORKGROUP, 1, 1]);
    let sums = k.output(Scalar::U32);
    let blocks = k.scalar_arg(Scalar::U32);
    let totals = totals(&k);
    let chunk = k.div(k.add(blocks, SCAN_WORKGROUP - 1), SCAN_WORKGROUP);
    let start = k.min(k.mul(k.local_index(), chunk), blocks);
    let end = k.min(k.add(start, chunk), blocks);
    let t = k.var(k.u32(0));
    k.for_range(start, end, |k, i| {
        k.set(t, k.add(k.get(t), k.load(sums, i)))
    });
    let (excl, _) = workgroup_exclusive(&k, k.get(t), totals);
    let run = k.var(excl);
    k.for_range(start, end, |k, i| {
        let v = k.load(sums, i);
        k.store(sums, i, k.get(run));
        k.set(run, k.add(k.get(run), v));
    });
    k.build()
}

/// `y` = the exclusive prefix sum of `x`, block `b` starting from
/// `offsets[b]` (the output of [`scan_spine`]).
///
/// Bindings: 0 `x: vec4<u32>` (read), 1 `offsets: u32` (read), 2 `y:
/// vec4<u32>` (read-write). Scalars: `n4: u32`. Dispatch as
/// [`scan_reduce`].
pub fn scan_down() -> Result<Kernel, IrError> {
    let k = KernelBuilder::new("scan_down", [SCAN_WORKGROUP, 1, 1]);
    let x = k.input_vec(Scalar::U32, 4);
    let offsets = k.input(Scalar::U32);
    let y = k.output_vec(Scalar::U32, 4);
    let n4 = k.scalar_arg(Scalar::U32);
    let totals = totals(&k);
    let (regs, t) = held(&k, x, n4);
    let (excl, _) = workgroup_exclusive(&k, t, totals);
    let block = k.x(k.workgroup_id());
    let run = k.var(k.add(excl, k.load(offsets, block)));
    let first = k.add(k.mul(block, SCAN_BLOCK / 4), k.mul(k.local_index(), PER));
    for (j, &r) in (0u32..).zip(&regs) {
        let at = k.add(first, j);
        k.if_(k.lt(at, n4), |k| {
            let v = k.get(r);
            let a = k.get(run);
            let b = k.add(a, k.x(v));
            let c = k.add(b, k.y(v));
            let d = k.add(c, k.z(v));
            k.store(y, at, k.vec(&[a, b, c, d]));
            k.set(run, k.add(d, k.extract(v, 3)));
        });
    }
    k.build()
}
