//! Cooperative matrices in the builder: declare one, load, store,
//! multiply-add, zero (see [`crate::ir::MatrixStmt`] for the semantics).

use super::{ArrayLike, KernelBuilder, Operand};
use crate::ir::{Layout, MatrixDecl, MatrixId, MatrixRole, MatrixStmt, Stmt};
use crate::{Scalar, Type};

/// A cooperative matrix of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Matrix {
    /// Its id.
    pub id: MatrixId,
    /// Its role, element type and edge.
    pub decl: MatrixDecl,
}

impl KernelBuilder {
    /// A `size x size` matrix of `elem` for operand `role`, zero at the
    /// start of each invocation. Needs the device's cooperative-matrix
    /// feature with this shape (see `compute-wgsl`).
    ///
    /// ```
    /// use compute_ir::{interp, KernelBuilder, Layout, MatrixRole, Scalar};
    ///
    /// // c = a * b for one 8x8 tile of f32, by a subgroup of 8.
    /// let k = KernelBuilder::new("tile", [8, 1, 1]);
    /// let (a, b, c) = (k.input(Scalar::F32), k.input(Scalar::F32), k.output(Scalar::F32));
    /// let (ma, mb) = (k.matrix(MatrixRole::A, Scalar::F32, 8), k.matrix(MatrixRole::B, Scalar::F32, 8));
    /// let mc = k.matrix(MatrixRole::C, Scalar::F32, 8);
    /// k.matrix_load(ma, a, 0u32, 8u32, Layout::RowMajor);
    /// k.matrix_load(mb, b, 0u32, 8u32, Layout::RowMajor);
    /// k.matrix_multiply_add(mc, ma, mb, mc);
    /// k.matrix_store(mc, c, 0u32, 8u32, Layout::RowMajor);
    /// let kernel = k.build()?;
    /// let identity: Vec<f32> = (0..64).map(|i| if i % 9 == 0 { 1.0 } else { 0.0 }).collect();
    /// let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    /// let mut buffers = vec![bytes(&identity), bytes(&x), vec![0; 256]];
    /// interp::run_with_subgroup(&kernel, [1, 1, 1], &mut buffers, &[], 8)?;
    /// assert_eq!(buffers[2], bytes(&x));
    /// # fn bytes(v: &[f32]) -> Vec<u8> { v.iter().flat_map(|f| f.to_le_bytes()).collect() }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn matrix(&self, role: MatrixRole, elem: Scalar, size: u8) -> Matrix {
        let decl = MatrixDecl { role, elem, size };
        let id = self.with(|s| {
            s.def.matrices.push(decl);
            MatrixId(s.def.matrices.len() as u32 - 1)
        });
        Matrix { id, decl }
    }

    /// Every element of `m` set to zero.
    #[track_caller]
    pub fn matrix_zero(&self, m: Matrix) {
        self.matrix_stmt(MatrixStmt::Zero(m.id));
    }

    /// `m` loaded from `array` at `index` with `stride` elements between
    /// rows (`RowMajor`) or columns. From an array of vectors
    /// ([`KernelBuilder::shared_vec`], `input_vec`), `index` and `stride`
    /// count vectors and a row runs across consecutive lanes: a 16-wide
    /// row of f16 is four `vec4<f16>`.
    #[track_caller]
    pub fn matrix_load(
        &self,
        m: Matrix,
        array: impl ArrayLike,
        index: impl Operand,
        stride: impl Operand,
        layout: Layout,
    ) {
        let (index, stride) = (
            self.operand(index, Some(Type::U32)),
            self.operand(stride, Some(Type::U32)),
        );
        self.matrix_stmt(MatrixStmt::Load {
            m: m.id,
            array: array.array_ref(),
            index: index.id,
            stride: stride.id,
            layout,
        });
    }

    /// `m` stored to `array` at `index`, as [`KernelBuilder::matrix_load`]
    /// reads one.
    #[track_caller]
    pub fn matrix_store(
        &self,
        m: Matrix,
        array: impl ArrayLike,
        index: impl Operand,
        stride: impl Operand,
        layout: Layout,
    ) {
        let (index, stride) = (
            self.operand(index, Some(Type::U32)),
            self.operand(stride, Some(Type::U32)),
        );
        self.matrix_stmt(MatrixStmt::Store {
            m: m.id,
            array: array.array_ref(),
            index: index.id,
            stride: stride.id,
            layout,
        });
    }

    /// `d = a * b + c` (`d` may be `c`).
    #[track_caller]
    pub fn matrix_multiply_add(&self, d: Matrix, a: Matrix, b: Matrix, c: Matrix) {
        self.matrix_stmt(MatrixStmt::MultiplyAdd {
            d: d.id,
            a: a.id,
            b: b.id,
            c: c.id,
        });
    }

    /// Checks `s` where the caller built it, then appends it.
    #[track_caller]
    fn matrix_stmt(&self, s: MatrixStmt) {
        let checked = self.with(|st| {
            let def = &st.def;
            crate::matrix::check_stmt(def, &s, |op, v| {
                def.values.get(v.0 as usize).copied().ok_or_else(|| {
                    crate::IrError::structure(op, format!("value %{} does not exist", v.0))
                })
            })
        });
        if let Err(e) = checked {
            self.fail(e);
        }
        self.push(Stmt::Matrix(s));
    }
}
