//! An exclusive prefix sum of `u32` in one pass: each workgroup scans its
//! tile, publishes the tile's sum, looks back over its predecessors'
//! published sums (decoupled look-back, one subgroup-wide window of
//! predecessors per poll), publishes its inclusive sum and writes its
//! outputs. The input is read once, where [`super::scan`]'s
//! three launches read it twice.
//!
//! **Progress.** A workgroup takes its tile by ticket (an atomic counter),
//! so it only ever waits on tiles whose workgroups have started. Neither
//! WGSL nor Vulkan promises that a started workgroup progresses while
//! another spins, so a predecessor that has published nothing after
//! `limit` polls is reduced by the waiting workgroup's first subgroup,
//! from the input: no workgroup's result depends on another's progress.
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
/// Invocation `l` of a tile holds rows `j = 0..per` (`per` a multiple of 4) of one
/// `vec4<u32>` each, row `j` at vector `tile * WG * per + j * WG + l`, so
/// every load and store is coalesced; four rows are scanned at once as the
/// lanes of one subgroup scan.
///
/// Bindings: 0 `x: vec4<u32>` (read), 1 `state: atomic<u32>` (read-write,
/// [`scan_single_state_words`]`(tiles)` words or more, zeroed before the
/// first launch), 2 `y: vec4<u32>` (read-write). Scalars: `n4: u32` (the
/// vectors to scan), `tiles: u32` (`ceil(n4 * 4 / scan_single_tile(per))`).
/// Dispatch `tiles` workgroups along x. Needs `SUBGROUP`. A `per` that
/// is not a positive multiple of 4 is [`IrError::Structure`].
pub fn scan_single_pass(per: u32, limit: u32) -> Result<Kernel, IrError> {
    if per == 0 || !per.is_multiple_of(4) {
        // Rows are scanned four at a time, as the lanes of one vector.
        return Err(IrError::Structure {
            op: "scan_single_pass",
            reason: format!("per must be a positive multiple of 4, got {per}"),
        });
    }
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
        k.set(before, s.look_back(tile, tag, own, limit))
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
    /// of one vector), the subgroups' totals scanned by subgroup 0.
    fn tile_prefixes(&self, rows: &[Var]) -> (Vec<Val>, Val) {
        let k = self.k;
        let groups = rows.len() as u32 / 4;
        // Slot `g * SLOTS + s`: subgroup `s`'s totals of row group `g`
        // (then their exclusive scan); slot `g * SLOTS + nsg`: the group's.
        let totals = k.shared_vec(Scalar::U32, 4, groups * SLOTS);
        let sg = k.subgroup_id();
        let last = k.eq(k.add(k.subgroup_invocation_id(), 1u32), k.subgroup_size());
        let scans: Vec<(Val, Val)> = rows
            .chunks(4)
            .enumerate()
            .map(|(g, four)| {
                let sums: Vec<Val> = four.iter().map(|r| hsum(k, k.get(*r))).collect();
                let t = k.vec(&sums);
                let incl = k.subgroup_inclusive_add(t);
                k.if_(last, |k| {
                    k.store(totals, k.add(g as u32 * SLOTS, sg), incl);
                });
                (t, incl)
            })
            .collect();
        k.barrier();
        k.if_(k.eq(sg, 0u32), |_| {
            for g in 0..groups {
                self.spine(totals, g * SLOTS);
            }
        });
        k.barrier();
        let nsg = k.num_subgroups();
        let mut carry = k.u32(0);
        let mut prefixes = Vec::new();
        for (g, (t, incl)) in (0u32..).zip(scans) {
            let before = k.load(totals, k.add(g * SLOTS, sg));
            let total = k.load(totals, k.add(g * SLOTS, nsg));
            for c in 0..4u8 {
                let within = k.add(
                    k.sub(k.extract(incl, c), k.extract(t, c)),
                    k.extract(before, c),
                );
                prefixes.push(k.add(carry, within));
                carry = k.add(carry, k.extract(total, c));
            }
        }
        (prefixes, carry)
    }

    /// Subgroup 0: the exclusive scan of the `num_subgroups` vectors of
    /// `totals` from slot `first`, a subgroup's width at a time, their sum
    /// after them.
    fn spine(&self, totals: Shared, first: u32) {
        let k = self.k;
        let lane = k.subgroup_invocation_id();
        let nsg = k.num_subgroups();
        let run = k.var(k.splat(k.u32(0), 4));
        k.for_range_step(0u32, nsg, k.subgroup_size(), |k, b| {
            let s = k.add(b, lane);
            let v = k.var(k.splat(k.u32(0), 4));
            k.if_(k.lt(s, nsg), |k| k.set(v, k.load(totals, k.add(first, s))));
            let before = k.subgroup_exclusive_add(k.get(v));
            k.if_(k.lt(s, nsg), |k| {
                k.store(totals, k.add(first, s), k.add(k.get(run), before))
            });
            k.set(run, k.add(k.get(run), k.subgroup_add(k.get(v))));
        });
        k.if_(k.eq(lane, 0u32), |k| {
            k.store(totals, k.add(first, nsg), k.get(run))
        });
    }

    /// `value` as tile `tile`'s word pair, tagged `tag` (invocation 0).
    fn publish(&self, tile: Val, value: Val, tag: Val) {
        let k = self.k;
        let high = k.shl(tag, 16u32);
        let at = k.add(HEAD, k.mul(tile, 2u32));
        k.atomic_store(self.state, at, k.or(high, k.and(value, 0xffffu32)));
        k.atomic_store(self.state, k.add(at, 1u32), k.or(high, k.shr(value, 16u32)));
    }

    /// The sum of every tile before `tile`, told to the whole workgroup
    /// (uniform control flow). Subgroup 0 walks back a window at a time,
    /// lane `i` reading tile `top - i` (past tile 0: an inclusive zero):
    /// the window counts up to its nearest inclusive sum (done), or up to
    /// its nearest tile with nothing published, which it polls, reducing
    /// it after `limit` polls. Its lane 0 then publishes the tile's
    /// inclusive sum, `own` more.
    fn look_back(&self, tile: Val, tag: Val, own: Val, limit: u32) -> Val {
        let k = self.k;
        let lane = k.subgroup_invocation_id();
        let size = k.subgroup_size();
        k.if_(k.eq(k.subgroup_id(), 0u32), |k| {
            let sum = k.var(k.u32(0));
            let top = k.var(k.sub(tile, 1u32));
            let polls = k.var(k.u32(0));
            // The sum of the window's lanes where `counted` holds.
            let count = |k: &KernelBuilder, counted: Val, value: Val| {
                let v = k.subgroup_add(k.select(counted, value, 0u32));
                k.set(sum, k.add(k.get(sum), v));
            };
            k.loop_(|k| {
                let seen = k.var(k.vec(&[k.u32(INCLUSIVE), k.u32(0)]));
                k.if_(k.le(lane, k.get(top)), |k| {
                    let (flag, value) = self.read(k.sub(k.get(top), lane), tag);
                    k.set(seen, k.vec(&[flag, value]));
                });
                let (flag, value) = (k.extract(k.get(seen), 0), k.extract(k.get(seen), 1));
                let inclusive = k.subgroup_min(k.select(k.eq(flag, INCLUSIVE), lane, size));
                let missing = k.subgroup_min(k.select(k.eq(flag, 0u32), lane, size));
                k.if_(k.lt(inclusive, missing), |k| {
                    count(k, k.le(lane, inclusive), value);
                    k.break_();
                });
                count(k, k.lt(lane, missing), value);
                k.if_(k.ne(missing, 0u32), |k| {
                    k.set(top, k.sub(k.get(top), missing));
                    k.set(polls, k.u32(0));
                    k.continue_();
                });
                k.set(polls, k.add(k.get(polls), 1u32));
                k.if_(k.ge(k.get(polls), limit), |k| {
                    k.set(sum, k.add(k.get(sum), self.reduce(k.get(top))));
                    k.if_(k.eq(k.get(top), 0u32), |k| k.break_());
                    k.set(top, k.sub(k.get(top), 1u32));
                    k.set(polls, k.u32(0));
                });
            });
            k.if_(k.eq(lane, 0u32), |k| {
                self.publish(tile, k.add(k.get(sum), own), k.or(tag, INCLUSIVE));
                k.store(self.cast, 0u32, k.splat(k.get(sum), 2));
            });
        });
        k.extract(k.uniform_load(self.cast, 0u32), 0)
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

    /// The sum of tile `tile`'s input, by one subgroup.
    fn reduce(&self, tile: Val) -> Val {
        let k = self.k;
        let base = k.mul(tile, WG * self.per);
        let t = k.var(k.u32(0));
        let end = k.u32(WG * self.per);
        k.for_range_step(
            k.subgroup_invocation_id(),
            end,
            k.subgroup_size(),
            |k, v| {
                let at = k.add(base, v);
                k.if_(k.lt(at, self.n4), |k| {
                    k.set(t, k.add(k.get(t), hsum(k, k.load(self.x, at))));
                });
            },
        );
        k.subgroup_add(k.get(t))
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
