//! The memory a workgroup's invocations share: the launch's buffers and
//! the workgroup's shared arrays, and where atomics find their element.

use crate::Scalar;
use crate::error::RunError;
use crate::interp::value::Value;
use crate::ir::{ArrayRef, KernelDef};

/// Memory an invocation sees: the launch's buffers and its workgroup's arrays.
#[derive(Debug)]
pub(crate) struct Memory<'m> {
    pub globals: &'m mut [Vec<u8>],
    /// Each workgroup array's lanes, element after element.
    pub shared: Vec<Vec<u64>>,
}

/// Where an atomic's element is, once checked.
#[derive(Clone, Copy)]
pub(crate) enum AtomicAt {
    Global(usize, usize),
    Shared(usize, usize),
}

impl Memory<'_> {
    /// Where element `i` of atomic array `a` is: its type and place,
    /// checked against the array's length.
    pub(crate) fn atomic_at(
        &self,
        def: &KernelDef,
        a: ArrayRef,
        i: Value,
        what: &'static str,
    ) -> Result<(Scalar, AtomicAt), RunError> {
        match a {
            ArrayRef::Global(b) => {
                let (b, len) = (b as usize, (self.globals[b as usize].len() / 4) as u64);
                Ok((
                    def.buffers[b].elem,
                    AtomicAt::Global(b, index(what, i, len)?),
                ))
            }
            ArrayRef::Shared(s) => {
                let (s, len) = (s as usize, self.shared[s as usize].len() as u64);
                Ok((
                    def.shared[s].elem,
                    AtomicAt::Shared(s, index(what, i, len)?),
                ))
            }
            // The type check refuses atomics on local arrays.
            ArrayRef::Local(l) => Err(RunError::Interface(format!(
                "`{what}` on local array {l}, which is not atomic"
            ))),
        }
    }

    /// Element `i` of plain workgroup array `s`, checked against its length.
    pub(crate) fn shared_value(
        &self,
        def: &KernelDef,
        s: u32,
        i: Value,
        what: &'static str,
    ) -> Result<Value, RunError> {
        let (arr, decl) = (&self.shared[s as usize], def.shared[s as usize]);
        let lanes = usize::from(decl.lanes);
        let i = index(what, i, (arr.len() / lanes) as u64)?;
        let mut v = Value::zero(decl.ty());
        v.lanes[..lanes].copy_from_slice(&arr[i * lanes..][..lanes]);
        Ok(v)
    }

    /// `value` into element `i` of plain workgroup array `s`, checked
    /// against its length.
    pub(crate) fn set_shared(
        &mut self,
        def: &KernelDef,
        s: u32,
        i: Value,
        value: Value,
    ) -> Result<(), RunError> {
        let (arr, lanes) = (
            &mut self.shared[s as usize],
            usize::from(def.shared[s as usize].lanes),
        );
        let i = index("store", i, (arr.len() / lanes) as u64)?;
        arr[i * lanes..][..lanes].copy_from_slice(&value.lanes[..lanes]);
        Ok(())
    }

    pub(crate) fn atomic_get(&self, at: AtomicAt, elem: Scalar) -> u64 {
        match at {
            AtomicAt::Global(b, i) => read_global(&self.globals[b], elem, i),
            AtomicAt::Shared(s, i) => self.shared[s][i],
        }
    }

    pub(crate) fn atomic_set(&mut self, at: AtomicAt, elem: Scalar, bits: u64) {
        match at {
            AtomicAt::Global(b, i) => write_global(&mut self.globals[b], elem, i, bits),
            AtomicAt::Shared(s, i) => self.shared[s][i] = bits,
        }
    }
}

pub(crate) fn read_global(buf: &[u8], elem: Scalar, i: usize) -> u64 {
    let n = elem.size();
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&buf[i * n..i * n + n]);
    u64::from_le_bytes(b)
}

pub(crate) fn write_global(buf: &mut [u8], elem: Scalar, i: usize, bits: u64) {
    let n = elem.size();
    buf[i * n..i * n + n].copy_from_slice(&bits.to_le_bytes()[..n]);
}

pub(crate) fn index(op: &'static str, v: Value, len: u64) -> Result<usize, RunError> {
    let i = if v.ty.scalar == Scalar::I32 {
        i64::from(v.bits() as i32)
    } else {
        i64::from(v.bits() as u32)
    };
    if i < 0 || i as u64 >= len {
        return Err(RunError::OutOfBounds { op, index: i, len });
    }
    Ok(i as usize)
}
