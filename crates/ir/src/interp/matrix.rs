//! Cooperative-matrix statements over one subgroup, once every invocation
//! of it waits at the statement: the subgroup's matrices are one value, so
//! the statement runs once (on the first invocation's copy) and its result
//! is every invocation's.
//!
//! Refused: a subgroup that is not whole (the last subgroup of a workgroup
//! whose size is not a multiple of the subgroup size, or one whose
//! invocations ended or branched apart), an index or stride that differs
//! between invocations, an element out of the array's bounds (as any
//! access), and a stride shorter than a row, which would make a store's
//! elements overlap.

use super::exec::Invocation;
use super::memory::{Memory, read_global, write_global};
use super::value;
use crate::Scalar;
use crate::error::RunError;
use crate::ir::{ArrayRef, KernelDef, Layout, MatrixDecl, MatrixId, MatrixStmt};

/// Where the subgroup is, for errors.
pub(crate) struct At {
    pub workgroup: [u32; 3],
    pub subgroup: u32,
}

impl At {
    /// The error of `s` reached by `here` invocations of a subgroup of
    /// `size`.
    pub fn not_whole(&self, s: &MatrixStmt, here: usize, size: usize) -> RunError {
        self.fail(
            s.name(),
            format!(
                "a cooperative-matrix operation needs the whole subgroup: {here} of {size} \
                 invocations are here"
            ),
        )
    }

    fn fail(&self, op: &'static str, problem: String) -> RunError {
        RunError::SubgroupLane {
            op,
            workgroup: self.workgroup,
            subgroup: self.subgroup,
            problem,
        }
    }
}

/// Runs `s` for the subgroup `members` (every one of its invocations, in
/// lane order; the caller checked they are the whole subgroup).
pub(crate) fn execute(
    def: &KernelDef,
    mem: &mut Memory<'_>,
    members: &mut [Invocation<'_>],
    s: &MatrixStmt,
    at: &At,
) -> Result<(), RunError> {
    let op = s.name();
    let uniform = |v| {
        let first = members[0].value(v);
        if members.iter().any(|m| m.value(v) != first) {
            return Err(at.fail(op, "index or stride differs between invocations".into()));
        }
        Ok(first.bits() as u32)
    };
    let result = match *s {
        MatrixStmt::Zero(m) => Some((m, vec![0.0; tile(def, m)])),
        MatrixStmt::Load {
            m,
            array,
            index,
            stride,
            layout,
        } => {
            let (index, stride) = (uniform(index)?, uniform(stride)?);
            let d = def.matrices[m.0 as usize];
            let from = Place::of(def, array, op)?;
            let place = Footprint::new(at, op, d, (index, stride, from.lanes()), layout)?;
            let mut tile = Vec::with_capacity(place.elements());
            for i in place.offsets() {
                tile.push(value::to_f(d.elem, from.read(mem, i, op)?));
            }
            Some((m, tile))
        }
        MatrixStmt::Store {
            m,
            array,
            index,
            stride,
            layout,
        } => {
            let (index, stride) = (uniform(index)?, uniform(stride)?);
            let d = def.matrices[m.0 as usize];
            let to = Place::of(def, array, op)?;
            let place = Footprint::new(at, op, d, (index, stride, to.lanes()), layout)?;
            let tile = members[0].matrix(m).to_vec();
            for (i, x) in place.offsets().zip(tile) {
                to.write(mem, i, value::from_f(d.elem, x), op)?;
            }
            None
        }
        MatrixStmt::MultiplyAdd { d, a, b, c } => {
            let decl = def.matrices[d.0 as usize];
            let n = usize::from(decl.size);
            let first = &members[0];
            let (a, b, c) = (first.matrix(a), first.matrix(b), first.matrix(c));
            let mut out = Vec::with_capacity(n * n);
            for i in 0..n {
                for j in 0..n {
                    let sum = (0..n).fold(f64::from(c[i * n + j]), |s, k| {
                        s + f64::from(a[i * n + k]) * f64::from(b[k * n + j])
                    });
                    out.push(round(decl.elem, sum));
                }
            }
            Some((d, out))
        }
    };
    if let Some((m, tile)) = result {
        for member in members.iter_mut() {
            member.set_matrix(m, tile.clone());
        }
    }
    for member in members.iter_mut() {
        member.resume();
    }
    Ok(())
}

fn tile(def: &KernelDef, m: MatrixId) -> usize {
    let n = usize::from(def.matrices[m.0 as usize].size);
    n * n
}

/// `x` rounded once to `elem` (f16 or f32), as an f32.
fn round(elem: Scalar, x: f64) -> f32 {
    match elem {
        Scalar::F16 => value::to_f(elem, value::from_f(elem, x as f32)),
        _ => x as f32,
    }
}

/// The scalars a tile occupies, in row-major order of the tile: row (or
/// column) `r` starts at the first lane of element `index + r * stride` of
/// an array of `lanes`-lane elements and runs across consecutive lanes.
struct Footprint {
    index: u64,
    stride: u64,
    lanes: u64,
    size: u64,
    layout: Layout,
}

impl Footprint {
    fn new(
        at: &At,
        op: &'static str,
        d: MatrixDecl,
        (index, stride, lanes): (u32, u32, u8),
        layout: Layout,
    ) -> Result<Self, RunError> {
        let (size, lanes) = (u64::from(d.size), u64::from(lanes));
        if u64::from(stride) * lanes < size {
            return Err(at.fail(
                op,
                format!("stride {stride} of {lanes}-lane elements is shorter than a row of {size}"),
            ));
        }
        Ok(Footprint {
            index: u64::from(index),
            stride: u64::from(stride),
            lanes,
            size,
            layout,
        })
    }

    fn elements(&self) -> usize {
        (self.size * self.size) as usize
    }

    fn offsets(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.size).flat_map(move |r| {
            (0..self.size).map(move |c| match self.layout {
                Layout::RowMajor => (self.index + r * self.stride) * self.lanes + c,
                Layout::ColumnMajor => (self.index + c * self.stride) * self.lanes + r,
            })
        })
    }
}

/// A buffer or workgroup array a tile moves to or from, addressed by
/// scalar (lane) offsets.
enum Place {
    Global(usize, Scalar, u8),
    Shared(usize, u8),
}

impl Place {
    fn of(def: &KernelDef, array: ArrayRef, op: &'static str) -> Result<Place, RunError> {
        match array {
            ArrayRef::Global(b) => {
                let d = def.buffers[b as usize];
                Ok(Place::Global(b as usize, d.elem, d.lanes))
            }
            ArrayRef::Shared(s) => Ok(Place::Shared(s as usize, def.shared[s as usize].lanes)),
            // The type check refuses matrices on local arrays.
            ArrayRef::Local(l) => Err(RunError::Interface(format!("`{op}` on local array {l}"))),
        }
    }

    /// Lanes per element of the array.
    fn lanes(&self) -> u8 {
        match *self {
            Place::Global(_, _, lanes) | Place::Shared(_, lanes) => lanes,
        }
    }

    /// Scalar `at`, checked against the array's length in scalars.
    fn element(&self, mem: &Memory<'_>, at: u64, op: &'static str) -> Result<usize, RunError> {
        let len = match *self {
            Place::Global(b, elem, _) => (mem.globals[b].len() / elem.size()) as u64,
            Place::Shared(s, _) => mem.shared[s].len() as u64,
        };
        if at >= len {
            return Err(RunError::OutOfBounds {
                op,
                index: i64::try_from(at).unwrap_or(i64::MAX),
                len,
            });
        }
        Ok(at as usize)
    }

    fn read(&self, mem: &Memory<'_>, at: u64, op: &'static str) -> Result<u64, RunError> {
        let i = self.element(mem, at, op)?;
        Ok(match *self {
            Place::Global(b, elem, _) => read_global(&mem.globals[b], elem, i),
            Place::Shared(s, _) => mem.shared[s][i],
        })
    }

    fn write(
        &self,
        mem: &mut Memory<'_>,
        at: u64,
        bits: u64,
        op: &'static str,
    ) -> Result<(), RunError> {
        let i = self.element(mem, at, op)?;
        match *self {
            Place::Global(b, elem, _) => write_global(&mut mem.globals[b], elem, i, bits),
            Place::Shared(s, _) => mem.shared[s][i] = bits,
        }
        Ok(())
    }
}
