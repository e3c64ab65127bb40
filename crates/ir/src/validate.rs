//! The validator: types, scopes and structure of a whole [`KernelDef`].
//!
//! The builder checks types as it goes; this pass re-checks everything, so a
//! kernel assembled by hand (or by a generator) is held to the same rules:
//! every value defined once and used only where it is in scope, `break` and
//! `continue` only inside loops, stores only to writable, non-atomic arrays.

use crate::ir::{Access, ArrayRef, KernelDef, Stmt, ValueId, VarId};
use crate::typeck::{array_elem, check_type, op_name, op_type};
use crate::{IrError, Scalar, Type};

/// Checks `def`; the first problem found is the error.
pub fn validate(def: &KernelDef) -> Result<(), IrError> {
    interface(def)?;
    let mut v = Checker {
        def,
        value_live: vec![false; def.values.len()],
        value_seen: vec![false; def.values.len()],
        var_live: vec![false; def.vars.len()],
        loops: 0,
    };
    v.block(&def.body)?;
    crate::uniformity::check(def)
}

fn interface(def: &KernelDef) -> Result<(), IrError> {
    if def.workgroup_size.contains(&0) {
        return Err(IrError::structure(
            "workgroup_size",
            "every dimension must be at least 1",
        ));
    }
    for (i, b) in def.buffers.iter().enumerate() {
        if b.elem == Scalar::Bool {
            return Err(IrError::ty(
                "buffer",
                format!("buffer {i}: bool is not host-shareable"),
            ));
        }
        if !matches!(b.lanes, 1 | 2 | 4) {
            return Err(IrError::ty(
                "buffer",
                format!(
                    "buffer {i}: {} lanes; a buffer holds scalars or vectors of 2 or 4 \
                     (a vec3's storage stride is 16 bytes)",
                    b.lanes
                ),
            ));
        }
        if b.atomic && b.lanes != 1 {
            return Err(IrError::ty(
                "atomic_buffer",
                format!("buffer {i}: atomics are on scalars"),
            ));
        }
        if b.atomic && !matches!(b.elem, Scalar::I32 | Scalar::U32) {
            return Err(IrError::ty(
                "atomic_buffer",
                format!("buffer {i}: atomics are on i32 or u32, not {}", b.elem),
            ));
        }
        if b.atomic && b.access != Access::ReadWrite {
            return Err(IrError::structure(
                "atomic_buffer",
                format!("buffer {i} must be read-write"),
            ));
        }
    }
    for (i, s) in def.scalars.iter().enumerate() {
        if !matches!(s, Scalar::I32 | Scalar::U32 | Scalar::F32) {
            return Err(IrError::ty(
                "scalar_arg",
                format!("argument {i}: scalar arguments are 4-byte i32, u32 or f32, not {s}"),
            ));
        }
    }
    for (i, s) in def.shared.iter().enumerate() {
        if s.len == 0 {
            return Err(IrError::structure(
                "shared",
                format!("shared array {i} has no elements"),
            ));
        }
        if !matches!(s.lanes, 1 | 2 | 4) || (s.lanes > 1 && (s.atomic || s.elem == Scalar::Bool)) {
            return Err(IrError::ty(
                "shared_vec",
                format!(
                    "shared array {i}: elements are scalars or vectors of 2 or 4 non-bool \
                     lanes, not {} lanes of {}{}",
                    s.lanes,
                    s.elem,
                    if s.atomic { " atomics" } else { "" }
                ),
            ));
        }
        if s.atomic && !matches!(s.elem, Scalar::I32 | Scalar::U32) {
            return Err(IrError::ty(
                "atomic_shared",
                format!(
                    "shared array {i}: atomics are on i32 or u32, not {}",
                    s.elem
                ),
            ));
        }
    }
    for (i, l) in def.locals.iter().enumerate() {
        if l.len == 0 {
            return Err(IrError::structure(
                "local_array",
                format!("local array {i} has no elements"),
            ));
        }
        if l.ty.scalar == Scalar::Bool {
            return Err(IrError::ty(
                "local_array",
                format!("local array {i}: elements are numbers, not bool"),
            ));
        }
        check_type("local_array", l.ty)?;
    }
    for (i, m) in def.matrices.iter().enumerate() {
        crate::matrix::check_decl(i, m)?;
    }
    for t in def.values.iter().chain(def.vars.iter()) {
        check_type("type", *t)?;
    }
    Ok(())
}

struct Checker<'a> {
    def: &'a KernelDef,
    value_live: Vec<bool>,
    value_seen: Vec<bool>,
    var_live: Vec<bool>,
    loops: u32,
}

impl Checker<'_> {
    fn use_value(&self, op: &'static str, v: ValueId) -> Result<Type, IrError> {
        match self.value_live.get(v.0 as usize) {
            Some(true) => Ok(self.def.values[v.0 as usize]),
            Some(false) => Err(IrError::structure(
                op,
                format!("value %{} is used outside the block that defines it", v.0),
            )),
            None => Err(IrError::structure(
                op,
                format!("value %{} does not exist", v.0),
            )),
        }
    }

    fn define(
        &mut self,
        op: &'static str,
        v: ValueId,
        scope: &mut Vec<ValueId>,
    ) -> Result<(), IrError> {
        let i = v.0 as usize;
        if i >= self.value_seen.len() {
            return Err(IrError::structure(
                op,
                format!("value %{} has no type", v.0),
            ));
        }
        if self.value_seen[i] {
            return Err(IrError::structure(
                op,
                format!("value %{} is defined twice", v.0),
            ));
        }
        self.value_seen[i] = true;
        self.value_live[i] = true;
        scope.push(v);
        Ok(())
    }

    fn block(&mut self, stmts: &[Stmt]) -> Result<(), IrError> {
        let mut values = Vec::new();
        let mut vars = Vec::new();
        let r = self.stmts(stmts, &mut values, &mut vars);
        for v in values {
            self.value_live[v.0 as usize] = false;
        }
        for v in vars {
            self.var_live[v] = false;
        }
        r
    }

    fn stmts(
        &mut self,
        stmts: &[Stmt],
        values: &mut Vec<ValueId>,
        vars: &mut Vec<usize>,
    ) -> Result<(), IrError> {
        for s in stmts {
            self.stmt(s, values, vars)?;
        }
        Ok(())
    }

    fn array_store(
        &self,
        op: &'static str,
        a: ArrayRef,
        idx: ValueId,
        value: ValueId,
        atomic: bool,
    ) -> Result<(), IrError> {
        let (elem, is_atomic) = array_elem(self.def, op, a)?;
        if is_atomic != atomic {
            return Err(IrError::ty(
                op,
                if atomic {
                    "not an atomic array"
                } else {
                    "an atomic array is written with `atomic_store`"
                },
            ));
        }
        if let ArrayRef::Global(b) = a
            && self.def.buffers[b as usize].access != Access::ReadWrite
        {
            return Err(IrError::structure(op, format!("buffer {b} is read-only")));
        }
        let ti = self.use_value(op, idx)?;
        if ti != Type::U32 && ti != Type::I32 {
            return Err(IrError::ty(
                op,
                format!("index must be u32 or i32, got {ti}"),
            ));
        }
        let tv = self.use_value(op, value)?;
        if tv != elem {
            return Err(IrError::ty(op, format!("value must be {elem}, got {tv}")));
        }
        Ok(())
    }

    fn stmt(
        &mut self,
        s: &Stmt,
        values: &mut Vec<ValueId>,
        vars: &mut Vec<usize>,
    ) -> Result<(), IrError> {
        match s {
            Stmt::Let(id, op) => {
                let name = op_name(op);
                for operand in operands(op) {
                    self.use_value(name, operand)?;
                }
                if let crate::ir::Op::Get(var) = op
                    && !self.var_live.get(var.0 as usize).copied().unwrap_or(false)
                {
                    return Err(IrError::structure(
                        name,
                        format!("variable {} is not in scope", var.0),
                    ));
                }
                let t = op_type(self.def, op)?;
                let declared = self.def.values.get(id.0 as usize).copied();
                if declared != Some(t) {
                    return Err(IrError::ty(
                        name,
                        format!(
                            "value %{} is declared {declared:?} but the operation yields {t}",
                            id.0
                        ),
                    ));
                }
                self.define(name, *id, values)
            }
            Stmt::Var(var, init) => {
                let t = self.use_value("var", *init)?;
                let i = var.0 as usize;
                match self.def.vars.get(i) {
                    None => {
                        return Err(IrError::structure(
                            "var",
                            format!("variable {i} has no type"),
                        ));
                    }
                    Some(vt) if *vt != t => {
                        return Err(IrError::ty(
                            "var",
                            format!("variable {i} is {vt}, initialised with {t}"),
                        ));
                    }
                    Some(_) => {}
                }
                if self.var_live[i] {
                    return Err(IrError::structure(
                        "var",
                        format!("variable {i} is declared twice"),
                    ));
                }
                self.var_live[i] = true;
                vars.push(i);
                Ok(())
            }
            Stmt::Set(var, v) => {
                let t = self.use_value("set", *v)?;
                let i = var.0 as usize;
                if !self.var_live.get(i).copied().unwrap_or(false) {
                    return Err(IrError::structure(
                        "set",
                        format!("variable {i} is not in scope"),
                    ));
                }
                if self.def.vars[i] != t {
                    return Err(IrError::ty(
                        "set",
                        format!("variable {i} is {}, assigned {t}", self.def.vars[i]),
                    ));
                }
                Ok(())
            }
            Stmt::Store(a, i, v) => self.array_store("store", *a, *i, *v, false),
            Stmt::AtomicStore(a, i, v) => self.array_store("atomic_store", *a, *i, *v, true),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let t = self.use_value("if", *cond)?;
                if t != Type::BOOL {
                    return Err(IrError::ty(
                        "if",
                        format!("condition must be bool, got {t}"),
                    ));
                }
                self.block(then)?;
                self.block(otherwise)
            }
            Stmt::IfFeature {
                then, otherwise, ..
            } => {
                self.block(then)?;
                self.block(otherwise)
            }
            Stmt::For {
                index,
                start,
                end,
                step,
                body,
            } => {
                let t = self.use_value("for_range", *start)?;
                if t != Type::U32 && t != Type::I32 {
                    return Err(IrError::ty(
                        "for_range",
                        format!("bounds must be u32 or i32, got {t}"),
                    ));
                }
                for v in [*end, *step] {
                    let tv = self.use_value("for_range", v)?;
                    if tv != t {
                        return Err(IrError::ty(
                            "for_range",
                            format!("start is {t} but end/step is {tv}"),
                        ));
                    }
                }
                if self.def.values.get(index.0 as usize) != Some(&t) {
                    return Err(IrError::ty(
                        "for_range",
                        "the index must have the type of the bounds",
                    ));
                }
                let mut scope = Vec::new();
                self.define("for_range", *index, &mut scope)?;
                self.loops += 1;
                let r = self.block(body);
                self.loops -= 1;
                self.value_live[index.0 as usize] = false;
                r
            }
            Stmt::Loop(body) => {
                self.loops += 1;
                let r = self.block(body);
                self.loops -= 1;
                r
            }
            Stmt::Break | Stmt::Continue => {
                if self.loops == 0 {
                    let op = if matches!(s, Stmt::Break) {
                        "break"
                    } else {
                        "continue"
                    };
                    return Err(IrError::structure(op, "not inside a loop"));
                }
                Ok(())
            }
            Stmt::Return | Stmt::Barrier(_) => Ok(()),
            Stmt::UniformLoad(var, array, index) => self.uniform_load(*var, *array, *index),
            Stmt::Matrix(m) => {
                crate::matrix::check_stmt(self.def, m, |op, v| self.use_value(op, v))
            }
        }
    }
}

impl Checker<'_> {
    /// `var = workgroupUniformLoad(&shared[index])`: a plain workgroup array,
    /// a `u32` index, a variable in scope of the array's element type.
    fn uniform_load(&mut self, var: VarId, array: u32, index: ValueId) -> Result<(), IrError> {
        const OP: &str = "uniform_load";
        let Some(decl) = self.def.shared.get(array as usize) else {
            return Err(IrError::structure(
                OP,
                format!("no workgroup array {array}"),
            ));
        };
        if decl.atomic {
            return Err(IrError::ty(
                OP,
                "the array is atomic: use atomic_load".to_string(),
            ));
        }
        let t = self.use_value(OP, index)?;
        if t != Type::U32 {
            return Err(IrError::ty(OP, format!("index must be u32, got {t}")));
        }
        let i = var.0 as usize;
        if !self.var_live.get(i).copied().unwrap_or(false) {
            return Err(IrError::structure(
                OP,
                format!("variable {i} is not in scope"),
            ));
        }
        let elem = decl.ty();
        if self.def.vars[i] != elem {
            return Err(IrError::ty(
                OP,
                format!(
                    "variable {i} is {}, the array holds {elem}",
                    self.def.vars[i]
                ),
            ));
        }
        Ok(())
    }
}

/// The values an operation reads.
pub fn operands(op: &crate::ir::Op) -> Vec<ValueId> {
    use crate::ir::Op;
    match op {
        Op::Lit(_) | Op::Arg(_) | Op::Builtin(_) | Op::Get(_) | Op::ArrayLength(_) => vec![],
        Op::Splat(v, _)
        | Op::Extract(v, _)
        | Op::Unary(_, v)
        | Op::Cast(v, _)
        | Op::Bitcast(v, _)
        | Op::Subgroup(_, v) => vec![*v],
        Op::Compose(vs) => vs.clone(),
        Op::Binary(_, a, b) => vec![*a, *b],
        Op::Select {
            cond,
            on_true,
            on_false,
        } => vec![*cond, *on_true, *on_false],
        Op::Clamp(a, b, c) | Op::Fma(a, b, c) | Op::ExtractBits(a, b, c) => vec![*a, *b, *c],
        Op::InsertBits(a, b, c, d) => vec![*a, *b, *c, *d],
        Op::Dot(a, b) | Op::Index(a, b) => vec![*a, *b],
        Op::WithLane(a, b, c) => vec![*a, *b, *c],
        Op::Load(_, i) | Op::AtomicLoad(_, i) => vec![*i],
        Op::Atomic(_, _, i, v) => vec![*i, *v],
        Op::CompareExchange(_, i, c, v) => vec![*i, *c, *v],
        Op::SubgroupShuffle(_, x, lane) => vec![*x, *lane],
    }
}
