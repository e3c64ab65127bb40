//! Declared buffer lengths for [`KernelBuilder`]: the length is a value of
//! the kernel (`n`, `k.mul(rows, cols)`), turned back into the expression
//! of scalar arguments it was built from, so [`Kernel::args`] can work it
//! out on the host (`length.rs`).
//!
//! [`Kernel::args`]: crate::Kernel::args

use super::{Buf, KernelBuilder, Operand};
use crate::ir::{BinOp, Op, Stmt};
use crate::{DeclaredLen, IrError, Len, Lit, Scalar, Type};

impl KernelBuilder {
    /// A read-only buffer of `elem` that holds at least `len` elements (a
    /// scalar argument, a literal, or `+ - * /`, `min`, `max` of them):
    /// a launch whose buffer is shorter is refused when its arguments are
    /// made ([`Kernel::args`](crate::Kernel::args),
    /// `ServerError::BindingLength`).
    #[track_caller]
    pub fn input_len(&self, elem: Scalar, len: impl Operand) -> Buf {
        let b = self.input(elem);
        self.require_len(b, len);
        b
    }

    /// A buffer of `elem` the kernel writes, holding at least `len`
    /// elements; see [`input_len`](Self::input_len).
    #[track_caller]
    pub fn output_len(&self, elem: Scalar, len: impl Operand) -> Buf {
        let b = self.output(elem);
        self.require_len(b, len);
        b
    }

    /// Declares that `buffer` holds at least `len` of its elements (vectors,
    /// for a buffer of vectors); see [`input_len`](Self::input_len).
    #[track_caller]
    pub fn require_len(&self, buffer: Buf, len: impl Operand) {
        let len = match len.as_val() {
            Some(v) => self.len_of(v.id, v.ty),
            None => match len.literal(Some(Type::U32)) {
                Lit::U32(c) => Ok(Len::Const(u64::from(c))),
                other => Err(format!("the literal {other:?} is not a u32")),
            },
        };
        match len {
            Ok(len) => {
                let elem_bytes = (buffer.elem.size() * usize::from(buffer.lanes)) as u64;
                self.with(|s| {
                    s.lengths.push(DeclaredLen {
                        binding: buffer.binding,
                        elem_bytes,
                        len,
                    })
                });
            }
            Err(why) => self.fail(IrError::structure(
                "require_len",
                format!(
                    "a declared length is scalar arguments and integer literals under + - * / \
                     min max: {why}"
                ),
            )),
        }
    }

    /// The expression value `id` was built as.
    fn len_of(&self, id: crate::ValueId, ty: Type) -> Result<Len, String> {
        if ty != Type::U32 && ty != Type::I32 {
            return Err(format!("%{} is {ty}, not an integer", id.0));
        }
        let op = self.with(|s| {
            s.blocks.iter().flatten().find_map(|st| match st {
                Stmt::Let(v, op) if *v == id => Some(op.clone()),
                _ => None,
            })
        });
        let two = |a: crate::ValueId, b: crate::ValueId| -> Result<(Box<Len>, Box<Len>), String> {
            Ok((Box::new(self.len_of(a, ty)?), Box::new(self.len_of(b, ty)?)))
        };
        match op {
            Some(Op::Arg(i)) => Ok(Len::Arg(i)),
            Some(Op::Lit(Lit::U32(c))) => Ok(Len::Const(u64::from(c))),
            Some(Op::Lit(Lit::I32(c))) if c >= 0 => Ok(Len::Const(c as u64)),
            Some(Op::Binary(op, a, b)) => {
                let (a, b) = two(a, b)?;
                Ok(match op {
                    BinOp::Add => Len::Add(a, b),
                    BinOp::Sub => Len::Sub(a, b),
                    BinOp::Mul => Len::Mul(a, b),
                    BinOp::Div => Len::Div(a, b),
                    BinOp::Min => Len::Min(a, b),
                    BinOp::Max => Len::Max(a, b),
                    other => return Err(format!("`{}` is not one of them", other.name())),
                })
            }
            Some(other) => Err(format!("%{} is `{}`", id.0, crate::op_name(&other))),
            None => Err(format!(
                "%{} is not a value of the kernel's top level",
                id.0
            )),
        }
    }
}
