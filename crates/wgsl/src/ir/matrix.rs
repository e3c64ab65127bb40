//! Cooperative matrices in WGSL (naga's `wgpu_cooperative_matrix`
//! extension): declarations, statements, and the device check.
//!
//! `coop_mat{n}x{n}<{f16|f32}, {A|B|C}>` function variables, zero at the
//! start; `coopLoadT` / `coopStoreT` for row-major tiles (`coopLoad` /
//! `coopStore` column-major), `coopMultiplyAdd`. A load or store reaches
//! `size` rows of `stride` elements past its index, which no robust-access
//! clamp covers (naga clamps the index of the pointer, not the tile), so
//! every one is guarded here: a tile that does not fit its array (or whose
//! stride is shorter than a row, or 2^24 or more) loads as zero and stores
//! nothing, and under `BoundsChecks::Reported` is reported with the tile's
//! first index and the array's length. The guard is uniform when the index
//! and stride are, as the IR requires.

use compute_ir::ir::{ArrayRef, KernelDef, Layout, MatrixDecl, MatrixRole, MatrixStmt};
use compute_ir::{Kernel, Scalar};
use compute_runtime::ServerError;
use wgpu_types::{CooperativeScalarType, Features};

use super::emit::{Emitter, array, v};
use crate::{DeviceCaps, REPORT_SHARED_BIT};

/// The largest stride a guarded tile may have: keeps `(size - 1) *
/// stride` far from wrapping a `u32`.
const MAX_STRIDE: u32 = 1 << 24;

/// The WGSL type of `m`.
pub(super) fn ty(m: MatrixDecl) -> String {
    let role = match m.role {
        MatrixRole::A => "A",
        MatrixRole::B => "B",
        MatrixRole::C => "C",
    };
    format!("coop_mat{0}x{0}<{1},{role}>", m.size, m.elem.wgsl())
}

/// The declaration of every matrix, at the top of the entry point.
pub(super) fn declarations(e: &mut Emitter<'_>) {
    for (i, m) in e.def.matrices.iter().enumerate() {
        let t = ty(*m);
        e.line(&format!("var m{i}: {t} = {t}();"));
    }
}

impl Emitter<'_> {
    pub(super) fn matrix(&mut self, s: &MatrixStmt) {
        match *s {
            MatrixStmt::Zero(m) => {
                let t = ty(self.def.matrices[m.0 as usize]);
                self.line(&format!("m{} = {t}();", m.0));
            }
            MatrixStmt::Load {
                m,
                array: a,
                index,
                stride,
                layout,
            } => {
                let d = self.def.matrices[m.0 as usize];
                let f = if layout == Layout::RowMajor {
                    "coopLoadT"
                } else {
                    "coopLoad"
                };
                self.guarded(
                    d,
                    a,
                    (v(index), v(stride)),
                    &format!(
                        "m{} = {f}<{}>(&{}[{}], {});",
                        m.0,
                        ty(d),
                        array(a),
                        v(index),
                        v(stride)
                    ),
                    Some(&format!("m{} = {}();", m.0, ty(d))),
                );
            }
            MatrixStmt::Store {
                m,
                array: a,
                index,
                stride,
                layout,
            } => {
                let d = self.def.matrices[m.0 as usize];
                let f = if layout == Layout::RowMajor {
                    "coopStoreT"
                } else {
                    "coopStore"
                };
                self.guarded(
                    d,
                    a,
                    (v(index), v(stride)),
                    &format!("{f}(m{}, &{}[{}], {});", m.0, array(a), v(index), v(stride)),
                    None,
                );
            }
            MatrixStmt::MultiplyAdd { d, a, b, c } => self.line(&format!(
                "m{} = coopMultiplyAdd(m{}, m{}, m{});",
                d.0, a.0, b.0, c.0
            )),
        }
    }

    /// `access` where the tile of `d` at `index` with `stride` fits array
    /// `a`; `otherwise` (and a report, under reports) where it does not.
    fn guarded(
        &mut self,
        d: MatrixDecl,
        a: ArrayRef,
        (index, stride): (String, String),
        access: &str,
        otherwise: Option<&str>,
    ) {
        let (code, len, lanes) = match a {
            ArrayRef::Global(b) => (
                b,
                format!("arrayLength(&b{b})"),
                self.def.buffers[b as usize].lanes,
            ),
            ArrayRef::Shared(s) => {
                let decl = self.def.shared[s as usize];
                (s | REPORT_SHARED_BIT, format!("{}u", decl.len), decl.lanes)
            }
            // The IR refuses matrices on local arrays.
            ArrayRef::Local(l) => (l, format!("{}u", self.def.locals[l as usize].len), 1),
        };
        // In the array's elements: a row is `wide` of them (the IR makes
        // the lanes divide the edge), and the tile's last one is `wide - 1`
        // past the start of its last row.
        let wide = u32::from(d.size) / u32::from(lanes.max(1));
        let last = u32::from(d.size) - 1;
        self.line(&format!(
            "if {stride} >= {wide}u && {stride} < {MAX_STRIDE}u && {index} < {len} \
             && {len} - {index} > {last}u * {stride} + {}u {{",
            wide - 1
        ));
        self.indent += 1;
        self.line(access);
        self.indent -= 1;
        if otherwise.is_none() && !self.reports {
            self.line("}");
            return;
        }
        self.line("} else {");
        self.indent += 1;
        if let Some(o) = otherwise {
            self.line(o);
        }
        if self.reports {
            self.line(&format!("note_out_of_bounds({code}u, {index}, {len});"));
        }
        self.indent -= 1;
        self.line("}");
    }
}

fn scalar(t: CooperativeScalarType) -> Option<Scalar> {
    match t {
        CooperativeScalarType::F16 => Some(Scalar::F16),
        CooperativeScalarType::F32 => Some(Scalar::F32),
        CooperativeScalarType::I32 | CooperativeScalarType::U32 => None,
    }
}

/// Refuses a kernel with matrices the device cannot multiply: without the
/// feature at all, or with a matrix of a shape and type no configuration
/// the adapter reports has (`Adapter::cooperative_matrix_properties`).
pub(super) fn check_device(kernel: &Kernel, caps: &DeviceCaps) -> Result<(), ServerError> {
    let def: &KernelDef = kernel.def();
    if !def.uses_matrices() {
        return Ok(());
    }
    if !caps
        .features
        .contains(Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    {
        return Err(ServerError::unsupported(
            "cooperative matrices",
            "the kernel uses cooperative matrices and the device lacks \
             EXPERIMENTAL_COOPERATIVE_MATRIX (or the server was built without it)",
        ));
    }
    for m in &def.matrices {
        let size = u32::from(m.size);
        let fits = caps.cooperative_matrices.iter().any(|p| {
            let square = p.m_size == size && p.n_size == size && p.k_size == size;
            let t = match m.role {
                MatrixRole::A | MatrixRole::B => p.ab_type,
                MatrixRole::C => p.cr_type,
            };
            square && scalar(t) == Some(m.elem)
        });
        if !fits {
            return Err(ServerError::unsupported(
                "cooperative matrix shape",
                "the device reports no cooperative-matrix configuration of a matrix's edge, \
                 role and element type (Adapter::cooperative_matrix_properties)",
            ));
        }
    }
    Ok(())
}
