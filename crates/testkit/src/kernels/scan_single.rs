//! An exclusive prefix sum of `u32` in one pass: each workgroup scans its
//! tile, publishes the tile's sum, looks back over its predecessors'
//! published sums (decoupled look-back), publishes its inclusive sum and
//! writes its outputs. The input is read once, where [`super::scan`]'s
//! three launches read it twice.
//!
//! **Progress.** A workgroup takes its tile by ticket (an atomic counter),
//! so it only ever waits on tiles whose workgroups have started. Neither
//! WGSL nor Vulkan promises that a started workgroup progresses while
//! another spins, so a predecessor that has published nothing after
//! `limit` polls is reduced by the waiting workgroup itself, from the
//! input: no workgroup's result depends on another's progress.
//!
//! **State** (`atomic<u32>`, zeroed before the first launch, then reused
//! without clearing): `[0]` the ticket counter, `[1]` the finished count,
//! `[2]` the launch's generation, then two words per tile holding its
//! published sum in two 16-bit halves, each word tagged in its top 16 bits
//! with the generation (14 bits) and a flag (1: the tile's own sum, 2: its
//! inclusive sum). A reader takes a sum only when both halves carry the
//! same tag of its own generation, whatever order the two relaxed stores
//! land in. The last workgroup to finish resets the counters and moves the
//! generation on; every 16,384th generation it also clears every tile
//! word (the whole state array), so a word written 16,384 launches ago by a
//! launch with more tiles cannot pass for a current one.

use compute_ir::{AtomicBuf, Buf, IrError, Kernel, KernelBuilder, Scalar, Shared, Val, Var};

/// Invocations per workgroup of [`scan_single_pass`].
pub const SCAN_SINGLE_WORKGROUP: u32 = 256;
const WG: u32 = SCAN_SINGLE_WORKGROUP;
/// Tag bits of a published word: flags.
const OWN: u32 = 1;
const INCLUSIVE: u32 = 2;
/// Generations a tag tells apart.
const GENERATIONS: u32 = 1 << 14;
/// Words of the state before the tiles'.
const HEAD: u32 = 3;
/// Subgroup totals held per row group: one per subgroup down to subgroups
/// of 4, and the total.
const SLOTS: u32 = WG / 4 + 1;

/// Elements per tile of [`scan_single_pass`] with `per` rows.
pub const fn scan_single_tile(per: u32) -> u32 {
    WG * per * 4
}

/// Words of state [`scan_single_pass`] needs for `tiles` tiles.
pub const fn scan_single_state_words(tiles: u32) -> u32 {
    HEAD + 2 * tiles
}

/// `y` = the exclusive prefix sum of `x` (wrapping), in one launch.
///
/// Invocation `l` of a tile holds rows `j = 0..per` (`per` 4 or 8) of one
/// `vec4<u32>` each, row `j` at vector `tile * WG * per + j * WG + l`, so
/// every load and store is coalesced; four rows are scanned at once as the
/// lanes of one subgroup scan.
///
/// Bindings: 0 `x: vec4<u32>` (read), 1 `state: atomic<u32>` (read-write,
/// [`scan_single_state_words`]`(tiles)` words or more, zeroed before the
/// first launch), 2 `y: vec4<u32>` (read-write). Scalars: `n4: u32` (the
/// vectors to scan), `tiles: u32` (`ceil(n4 * 4 / scan_single_tile(per))`).
/// Dispatch `tiles` workgroups along x. Needs `SUBGROUP`.
pub fn scan_single_pass(per: u32, limit: u32) -> Result<Kernel, IrError> {
    let k = KernelBuilder::new(format!("scan_single_pass_{per}_{limit}"), [WG, 1, 1]);
    let x = k.input_vec(Scalar::U32, 4);
    let state = k.atomic_buffer(Scalar::U32);
    let y = k.output_vec(Scalar::U32, 4);
    let n4 = k.scalar_arg(Scalar::U32);
    let tiles = k.scalar_arg(Scalar::U32);
    let s = Scan {
        k: &k,
        x,
        state,
        n4,
        per,
        cast: k.shared_vec(Scalar::U32, 2, 1),
        sums: k.shared(Scalar::U32, WG / 4),
        first: k.eq(k.local_index(), 0u32),
    };
    k.if_(s.first, |k| {
        let ticket = k.atomic_add(state, 0u32, 1u32);
        k.store(s.cast, 0u32, k.vec(&[ticket, k.atomic_load(state, 2u32)]));
    });
    let cast = k.uniform_load(s.cast, 0u32);
    let (tile, generation) = (k.extract(cast, 0), k.extract(cast, 1));
    let tag = k.shl(k.and(generation, GENERATIONS - 1), 2u32);
    let base = k.mul(tile, WG * per);
    let rows: Vec<Var> = (0..per).map(|j| s.row(base, j)).collect();
    let (prefixes, own) = s.tile_prefixes(&rows);
    k.if_(s.first, |k| {
        let flag = k.select(k.eq(tile, 0u32), INCLUSIVE, OWN);
        s.publish(tile, own, k.or(tag, flag));
    });
    let before = k.var(k.u32(0));
    k.if_(k.ne(tile, 0u32), |k| {
        k.set(before, s.look_back(tile, tag, limit));
        let inclusive = k.add(k.get(before), own);
        k.if_(s.first, |k| {
            s.publish(tile, inclusive, k.or(tag, INCLUSIVE))
        });
    });
    for (j, (r, p)) in (0u32..).zip(rows.iter().zip(prefixes)) {
        let at = k.add(base, k.add(j * WG, k.local_index()));
        k.if_(k.lt(at, n4), |k| {
            let v = k.get(*r);
            let a = k.add(k.get(before), p);
            let b = k.add(a, k.x(v));
            let c = k.add(b, k.y(v));
            let d = k.add(c, k.z(v));
            k.store(y, at, k.vec(&[a, b, c, d]));
        });
    }
    k.if_(s.first, |_| s.finish(tiles, generation));
    k.build()
}

/// The parts of the kernel every step uses.
struct Scan<'k> {
    k: &'k KernelBuilder,
    x: Buf,
    state: AtomicBuf,
    n4: Val,
    per: u32,
    /// What invocation 0 tells the workgroup (by uniform loads of one
    /// `vec2`: two values for one barrier pair).
    cast: Shared,
    /// Subgroup sums of a fallback reduction.
    sums: Shared,
    first: Val,
}

impl Scan<'_> {
    /// Row `j` of the tile at vector `base`: zero past `n4`.
    fn row(&self, base: Val, j: u32) -> Var {
        let k = self.k;
        let r = k.var(k.splat(k.u32(0), 4));
        let at = k.add(base, k.add(j * WG, k.local_index()));
        k.if_(k.lt(at, self.n4), |k| k.set(r, k.load(self.x, at)));
        r
    }

    /// Each row's exclusive prefix within the tile at this invocation, and
    /// the tile's sum: four rows a subgroup scan (their sums as the lanes
    /// of one vector), the subgroups' totals scanned by invocation 0.
    fn tile_prefixes(&self, rows: &[Var]) -> (Vec<Val>, Val) {
        let k = self.k;
        let groups = rows.len() as u32 / 4;
        let totals = k.shared(Scalar::U32, groups * 4 * SLOTS);
        let sg = k.subgroup_id();
        let nsg = k.num_subgroups();
        let last = k.eq(k.add(k.subgroup_invocation_id(), 1u32), k.subgroup_size());
        let scans: Vec<(Val, Val)> = rows
            .chunks(4)
            .enumerate()
            .map(|(g, four)| {
                let sums: Vec<Val> = four.iter().map(|r| hsum(k, k.get(*r))).collect();
                let t = k.vec(&sums);
                let incl = k.subgroup_inclusive_add(t);
                let at = k.mul(k.add(k.mul(g as u32, SLOTS), sg), 4u32);
                k.if_(last, |k| {
                    for c in 0..4u8 {
                        k.store(totals, k.add(at, u32::from(c)), k.extract(incl, c));
                    }
                });
                (t, incl)
            })
            .collect();
        k.barrier();
        k.if_(self.first, |k| {
            k.for_range(0u32, groups * 4, |k, comp| {
                // Component `comp % 4` of group `comp / 4`'s slots.
                let first_slot = k.add(k.mul(k.div(comp, 4u32), SLOTS * 4), k.rem(comp, 4u32));
                let run = k.var(k.u32(0));
                k.for_range(0u32, nsg, |k, s| {
                    let at = k.add(first_slot, k.mul(s, 4u32));
                    let v = k.load(totals, at);
                    k.store(totals, at, k.get(run));
                    k.set(run, k.add(k.get(run), v));
                });
                k.store(totals, k.add(first_slot, k.mul(nsg, 4u32)), k.get(run));
            });
        });
        k.barrier();
        let mut carry = k.u32(0);
        let mut prefixes = Vec::new();
        for (g, (t, incl)) in scans.into_iter().enumerate() {
            let slot = |s: Val, c: u32| {
                let at = k.add(k.mul(k.add(k.mul(g as u32, SLOTS), s), 4u32), c);
                k.load(totals, at)
            };
            for c in 0..4u8 {
                let within = k.add(
                    k.sub(k.extract(incl, c), k.extract(t, c)),
                    slot(sg, c.into()),
                );
                prefixes.push(k.add(carry, within));
                carry = k.add(carry, slot(nsg, c.into()));
            }
        }
        (prefixes, carry)
    }

    /// `value` as tile `tile`'s word pair, tagged `tag` (invocation 0).
    fn publish(&self, tile: Val, value: Val, tag: Val) {
        let k = self.k;
        let high = k.shl(tag, 16u32);
        let at = k.add(HEAD, k.mul(tile, 2u32));
        k.atomic_store(self.state, at, k.or(high, k.and(value, 0xffffu32)));
        k.atomic_store(self.state, k.add(at, 1u32), k.or(high, k.shr(value, 16u32)));
    }

    /// The sum of every tile before `tile` (uniform control flow): walk
    /// back over published sums until an inclusive one, reducing a tile
    /// that has published nothing after `limit` polls.
    fn look_back(&self, tile: Val, tag: Val, limit: u32) -> Val {
        let k = self.k;
        let sum = k.var(k.u32(0));
        let at = k.var(k.sub(tile, 1u32));
        let polls = k.var(k.u32(0));
        // One tile's sum counted: leave at tile 0 (or on an inclusive sum).
        let take = |k: &KernelBuilder, v: Val, done: Val| {
            k.set(sum, k.add(k.get(sum), v));
            k.if_(k.or(done, k.eq(k.get(at), 0u32)), |k| k.break_());
            k.set(at, k.sub(k.get(at), 1u32));
            k.set(polls, k.u32(0));
        };
        k.loop_(|k| {
            k.if_(self.first, |k| {
                let (flag, value) = self.read(k.get(at), tag);
                k.store(self.cast, 0u32, k.vec(&[flag, value]));
            });
            // One barrier pair per poll: the flag and the sum in one vector.
            let cast = k.uniform_load(self.cast, 0u32);
            let (flag, value) = (k.extract(cast, 0), k.extract(cast, 1));
            k.if_(k.ne(flag, 0u32), |k| {
                take(k, value, k.eq(flag, INCLUSIVE));
                k.continue_();
            });
            k.set(polls, k.add(k.get(polls), 1u32));
            k.if_(k.ge(k.get(polls), limit), |k| {
                let v = self.reduce(k.get(at));
                take(k, v, k.bool(false));
            });
        });
        k.get(sum)
    }

    /// The flag (0: nothing this generation) and sum tile `tile` published.
    fn read(&self, tile: Val, tag: Val) -> (Val, Val) {
        let k = self.k;
        let at = k.add(HEAD, k.mul(tile, 2u32));
        let low = k.atomic_load(self.state, at);
        let high = k.atomic_load(self.state, k.add(at, 1u32));
        let t = k.shr(low, 16u32);
        let same = k.and(
            k.eq(t, k.shr(high, 16u32)),
            k.eq(k.shr(t, 2u32), k.shr(tag, 2u32)),
        );
        let flag = k.select(same, k.and(t, 3u32), 0u32);
        let value = k.or(k.shl(high, 16u32), k.and(low, 0xffffu32));
        (flag, value)
    }

    /// The sum of tile `tile`'s input, by the whole workgroup (uniform).
    fn reduce(&self, tile: Val) -> Val {
        let k = self.k;
        let base = k.mul(tile, WG * self.per);
        let t = k.var(k.u32(0));
        for j in 0..self.per {
            let r = self.row(base, j);
            k.set(t, k.add(k.get(t), hsum(k, k.get(r))));
        }
        let s = k.subgroup_add(k.get(t));
        k.barrier();
        k.if_(k.eq(k.subgroup_invocation_id(), 0u32), |k| {
            k.store(self.sums, k.subgroup_id(), s)
        });
        k.barrier();
        k.if_(self.first, |k| {
            let total = k.var(k.u32(0));
            k.for_range(0u32, k.num_subgroups(), |k, i| {
                k.set(total, k.add(k.get(total), k.load(self.sums, i)));
            });
            k.store(self.cast, 0u32, k.splat(k.get(total), 2));
        });
        k.extract(k.uniform_load(self.cast, 0u32), 0)
    }

    /// Invocation 0, last: count this workgroup finished; the last one
    /// resets the counters and moves the generation on (clearing every
    /// tile word when the tags' generations wrap).
    fn finish(&self, tiles: Val, generation: Val) {
        let k = self.k;
        let done = k.atomic_add(self.state, 1u32, 1u32);
        k.if_(k.eq(k.add(done, 1u32), tiles), |k| {
            k.atomic_store(self.state, 0u32, 0u32);
            k.atomic_store(self.state, 1u32, 0u32);
            let next = k.add(generation, 1u32);
            k.atomic_store(self.state, 2u32, next);
            k.if_(k.eq(k.and(next, GENERATIONS - 1), 0u32), |k| {
                k.for_range(HEAD, k.array_length(self.state), |k, i| {
                    k.atomic_store(self.state, i, 0u32);
                });
            });
        });
    }
}

fn hsum(k: &KernelBuilder, v: Val) -> Val {
    k.add(k.add(k.x(v), k.y(v)), k.add(k.z(v), k.extract(v, 3)))
}
