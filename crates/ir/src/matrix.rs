//! Cooperative matrices: square tiles a whole subgroup holds together, the
//! operands of the device's matrix units (`C = A * B + C`).
//!
//! A kernel declares its matrices like registers ([`MatrixDecl`], zero at
//! the start of each invocation) and works on them with statements
//! ([`MatrixStmt`]): load a tile from a buffer or a workgroup array, store
//! one, multiply-add, zero. Each statement is a subgroup collective: every
//! invocation of the subgroup runs it, in uniform control flow, with the
//! same index and stride (the interpreter checks both). Which part of a
//! tile an invocation holds is the device's business; the IR has no way to
//! address one element of a matrix, so no kernel can depend on it.
//!
//! The element at row `r`, column `c` of a tile loaded from `array` at
//! `index` with `stride` is `array[index + r * stride + c]` row-major and
//! `array[index + c * stride + r]` column-major. A multiply-add takes the
//! product of an `A` and a `B` of one element type and adds a `C` of its
//! accumulator type; products and sums are the device's (the interpreter
//! sums in f64 and rounds once, so a device differs by its own rounding of
//! the `size` partial sums: compare within `size` ulps of the accumulator
//! type, relative to the sum of the products' magnitudes).

use crate::ir::{Access, ArrayRef, KernelDef, ValueId};
use crate::typeck::array_elem;
use crate::{IrError, Scalar, Type};

/// Which operand of a multiply-add a matrix is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixRole {
    /// The left factor (`M x K`).
    A,
    /// The right factor (`K x N`).
    B,
    /// The accumulator and result (`M x N`).
    C,
}

/// How a tile lies in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Rows `stride` elements apart.
    RowMajor,
    /// Columns `stride` elements apart.
    ColumnMajor,
}

/// A declared matrix: its role, element type and edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixDecl {
    /// Its operand role.
    pub role: MatrixRole,
    /// `f16` or `f32`.
    pub elem: Scalar,
    /// The edge: 8 or 16 (WGSL's `coop_mat8x8`, `coop_mat16x16`).
    pub size: u8,
}

/// A matrix of the kernel, by declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixId(pub u32);

/// A statement on matrices (a subgroup collective).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatrixStmt {
    /// Every element of the matrix set to zero.
    Zero(MatrixId),
    /// The matrix loaded from `array` (a buffer or workgroup array of its
    /// element type, or of vectors of it whose lanes divide the edge) at
    /// `index` (`u32`) with `stride` (`u32`), both counted in the array's
    /// elements: row (column) `r` starts at the first lane of element
    /// `index + r * stride` and runs across consecutive lanes.
    Load {
        /// The destination.
        m: MatrixId,
        /// The source.
        array: ArrayRef,
        /// Where its first element is.
        index: ValueId,
        /// Elements between rows (row-major) or columns.
        stride: ValueId,
        /// Which of the two.
        layout: Layout,
    },
    /// The matrix stored to a writable `array`, as [`MatrixStmt::Load`]
    /// reads one.
    Store {
        /// The source.
        m: MatrixId,
        /// The destination.
        array: ArrayRef,
        /// Where its first element goes.
        index: ValueId,
        /// Elements between rows (row-major) or columns.
        stride: ValueId,
        /// Which of the two.
        layout: Layout,
    },
    /// `d = a * b + c` (`d` may be `c`).
    MultiplyAdd {
        /// The result, a `C`.
        d: MatrixId,
        /// An `A`.
        a: MatrixId,
        /// A `B` of `a`'s element type and size.
        b: MatrixId,
        /// A `C` of `d`'s element type.
        c: MatrixId,
    },
}

impl MatrixStmt {
    /// The builder method's name, for errors.
    pub const fn name(&self) -> &'static str {
        match self {
            MatrixStmt::Zero(_) => "matrix_zero",
            MatrixStmt::Load { .. } => "matrix_load",
            MatrixStmt::Store { .. } => "matrix_store",
            MatrixStmt::MultiplyAdd { .. } => "matrix_multiply_add",
        }
    }

    /// The values it reads.
    pub fn operands(&self) -> Vec<ValueId> {
        match self {
            MatrixStmt::Zero(_) | MatrixStmt::MultiplyAdd { .. } => vec![],
            MatrixStmt::Load { index, stride, .. } | MatrixStmt::Store { index, stride, .. } => {
                vec![*index, *stride]
            }
        }
    }
}

/// Checks declaration `i`.
pub(crate) fn check_decl(i: usize, m: &MatrixDecl) -> Result<(), IrError> {
    if !matches!(m.elem, Scalar::F16 | Scalar::F32) {
        return Err(IrError::ty(
            "matrix",
            format!("matrix {i}: elements are f16 or f32, not {}", m.elem),
        ));
    }
    if !matches!(m.size, 8 | 16) {
        return Err(IrError::ty(
            "matrix",
            format!("matrix {i}: the edge is 8 or 16, not {}", m.size),
        ));
    }
    Ok(())
}

fn decl(def: &KernelDef, op: &'static str, m: MatrixId) -> Result<MatrixDecl, IrError> {
    def.matrices
        .get(m.0 as usize)
        .copied()
        .ok_or_else(|| IrError::structure(op, format!("matrix {} does not exist", m.0)))
}

/// Checks `s` against the kernel's declarations; `ty` gives an operand's
/// type (and says whether it is in scope).
pub(crate) fn check_stmt(
    def: &KernelDef,
    s: &MatrixStmt,
    ty: impl Fn(&'static str, ValueId) -> Result<Type, IrError>,
) -> Result<(), IrError> {
    let op = s.name();
    match *s {
        MatrixStmt::Zero(m) => decl(def, op, m).map(|_| ()),
        MatrixStmt::Load {
            m,
            array,
            index,
            stride,
            ..
        }
        | MatrixStmt::Store {
            m,
            array,
            index,
            stride,
            ..
        } => {
            let d = decl(def, op, m)?;
            let (elem, atomic) = array_elem(def, op, array)?;
            if atomic
                || matches!(array, ArrayRef::Local(_))
                || elem.scalar != d.elem
                || d.size % elem.lanes != 0
            {
                return Err(IrError::ty(
                    op,
                    format!(
                        "a {}x{} {} matrix moves to and from a non-atomic buffer or workgroup \
                         array of {} or of vectors of {} whose lanes divide {}, not {elem}{}",
                        d.size,
                        d.size,
                        d.elem,
                        d.elem,
                        d.elem,
                        d.size,
                        if atomic { " atomics" } else { "" }
                    ),
                ));
            }
            if let (MatrixStmt::Store { .. }, ArrayRef::Global(b)) = (s, array)
                && def.buffers[b as usize].access != Access::ReadWrite
            {
                return Err(IrError::structure(op, format!("buffer {b} is read-only")));
            }
            for v in [index, stride] {
                let t = ty(op, v)?;
                if t != Type::U32 {
                    return Err(IrError::ty(
                        op,
                        format!("index and stride are u32, got {t}"),
                    ));
                }
            }
            Ok(())
        }
        MatrixStmt::MultiplyAdd { d, a, b, c } => {
            let [dd, da, db, dc] = [d, a, b, c].map(|m| decl(def, op, m));
            let (dd, da, db, dc) = (dd?, da?, db?, dc?);
            let roles = [dd.role, da.role, db.role, dc.role];
            if roles != [MatrixRole::C, MatrixRole::A, MatrixRole::B, MatrixRole::C] {
                return Err(IrError::ty(
                    op,
                    format!("operands are d: C, a: A, b: B, c: C, got {roles:?}"),
                ));
            }
            if [dd.size, db.size, dc.size].iter().any(|&s| s != da.size)
                || da.elem != db.elem
                || dd.elem != dc.elem
            {
                return Err(IrError::ty(
                    op,
                    format!(
                        "a and b of one element type, c and d of one, all of one size: got \
                         a {}x{}, b {}x{}, c {}x{}, d {}x{}",
                        da.elem, da.size, db.elem, db.size, dc.elem, dc.size, dd.elem, dd.size
                    ),
                ));
            }
            Ok(())
        }
    }
}
