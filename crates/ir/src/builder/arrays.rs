//! The kernel's arrays for [`KernelBuilder`]: workgroup arrays (plain,
//! of vectors, atomic) and per-invocation arrays.

use super::{AtomicShared, KernelBuilder, Local, Shared};
use crate::ir::SharedDecl;
use crate::{Scalar, Type};

impl KernelBuilder {
    /// A workgroup-shared array of `len` elements, zero at workgroup start.
    /// Invocations of a workgroup see each other's stores after a
    /// [`barrier`](Self::barrier).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // out[0] = sum of a[0..4], through shared memory.
    /// let k = KernelBuilder::new("sum4", [4, 1, 1]);
    /// let (a, out) = (k.input(Scalar::U32), k.output(Scalar::U32));
    /// let tile = k.shared(Scalar::U32, 4);
    /// let l = k.local_index();
    /// let v = k.load(a, l);
    /// k.store(tile, l, v);
    /// k.barrier();
    /// let zero = k.u32(0);
    /// let first = k.eq(l, zero);
    /// k.if_(first, |k| {
    ///     let acc = k.var(zero);
    ///     let four = k.u32(4);
    ///     k.for_range(zero, four, |k, i| {
    ///         let (s, x) = (k.get(acc), k.load(tile, i));
    ///         let s = k.add(s, x);
    ///         k.set(acc, s);
    ///     });
    ///     let s = k.get(acc);
    ///     k.store(out, zero, s);
    /// });
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[1u32, 2, 3, 4]), vec![0; 4]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<u32>(&buffers[1])?, [10]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shared(&self, elem: Scalar, len: u32) -> Shared {
        self.shared_vec(elem, 1, len)
    }

    /// A workgroup array of `len` vectors of `lanes` (2 or 4) `elem`, zero
    /// at the start of each workgroup: staging that moves 8 or 16 bytes per
    /// access. A cooperative matrix loads from it with its index and stride
    /// counted in vectors, each row of the tile running across consecutive
    /// lanes (see [`KernelBuilder::matrix_load`]).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // Invocation i stages x[i] (a vec2), then reads its neighbour's.
    /// let k = KernelBuilder::new("swap", [2, 1, 1]);
    /// let (x, out) = (k.input_vec(Scalar::U32, 2), k.output_vec(Scalar::U32, 2));
    /// let s = k.shared_vec(Scalar::U32, 2, 2);
    /// let i = k.local_index();
    /// k.store(s, i, k.load(x, i));
    /// k.barrier();
    /// k.store(out, i, k.load(s, k.sub(1u32, i)));
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[1u32, 2, 3, 4]), vec![0; 16]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<u32>(&buffers[1])?, [3, 4, 1, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shared_vec(&self, elem: Scalar, lanes: u8, len: u32) -> Shared {
        let index = self.shared_decl(elem, lanes, len, false);
        Shared {
            index,
            elem,
            lanes,
            len,
        }
    }

    /// A workgroup array of `len` `atomic<i32|u32>`, zero at the start of
    /// each workgroup: a histogram or counter the workgroup's invocations
    /// update at once.
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, interp};
    /// use compute_runtime::pod;
    ///
    /// // Each workgroup counts its odd values, then one invocation adds
    /// // the count to the total: one global atomic per workgroup.
    /// let k = KernelBuilder::new("odd", [4, 1, 1]);
    /// let values = k.input(Scalar::U32);
    /// let total = k.atomic_buffer(Scalar::U32);
    /// let count = k.atomic_shared(Scalar::U32, 1);
    /// let gid = k.global_id();
    /// let v = k.load(values, k.x(gid));
    /// let odd = k.and(v, k.u32(1));
    /// k.atomic_add(count, k.u32(0), odd);
    /// k.barrier();
    /// let first = k.eq(k.local_index(), k.u32(0));
    /// k.if_(first, |k| {
    ///     let c = k.atomic_load(count, k.u32(0));
    ///     k.atomic_add(total, k.u32(0), c);
    /// });
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[1u32, 2, 3, 5, 8, 13, 21, 34]), vec![0; 4]];
    /// interp::run(&kernel, [2, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<u32>(&buffers[1])?, [5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn atomic_shared(&self, elem: Scalar, len: u32) -> AtomicShared {
        let index = self.shared_decl(elem, 1, len, true);
        AtomicShared { index, elem, len }
    }

    /// A per-invocation array of `len` elements of `ty` (a scalar or a
    /// vector), zero at the start of each invocation: what a kernel keeps in
    /// registers and indexes (a register tile), read and written with
    /// [`load`](Self::load) and [`store`](Self::store).
    ///
    /// ```
    /// use compute_ir::{KernelBuilder, Scalar, Type, interp};
    /// use compute_runtime::pod;
    ///
    /// // out[i] = x[i] + x[i + 1] + x[i + 2], through a window of 3 registers.
    /// let k = KernelBuilder::new("window", [4, 1, 1]);
    /// let (x, out) = (k.input(Scalar::F32), k.output(Scalar::F32));
    /// let w = k.local_array(Type::F32, 3);
    /// let i = k.x(k.global_id());
    /// k.for_range(0u32, 3u32, |k, j| k.store(w, j, k.load(x, k.add(i, j))));
    /// let sum = k.add(k.add(k.load(w, 0u32), k.load(w, 1u32)), k.load(w, 2u32));
    /// k.store(out, i, sum);
    /// let kernel = k.build()?;
    /// let mut buffers = vec![pod::to_bytes(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]), vec![0; 16]];
    /// interp::run(&kernel, [1, 1, 1], &mut buffers, &[])?;
    /// assert_eq!(pod::from_bytes::<f32>(&buffers[1])?, [6.0, 9.0, 12.0, 15.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn local_array(&self, ty: Type, len: u32) -> Local {
        let index = self.with(|s| {
            s.def.locals.push(crate::ir::LocalDecl { ty, len });
            s.def.locals.len() as u32 - 1
        });
        Local { index, ty, len }
    }

    fn shared_decl(&self, elem: Scalar, lanes: u8, len: u32, atomic: bool) -> u32 {
        self.with(|s| {
            s.def.shared.push(SharedDecl {
                elem,
                lanes,
                len,
                atomic,
            });
            s.def.shared.len() as u32 - 1
        })
    }
}
