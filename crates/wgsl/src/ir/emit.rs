//! IR to WGSL text.
//!
//! One `let` per IR value, in IR order, so the text reads like the builder
//! code that made it. Two rewrites keep naga's constant evaluator out of the
//! way: an operation whose operands are all constants is folded here with the
//! interpreter's own semantics (so `1i / 0i` is `1i`, as at run time, instead
//! of a shader-creation error), and a constant with a NaN or infinite lane is
//! produced at run time from its bits (WGSL has no such literal). Integer
//! division by anything but a non-zero constant is guarded (naga refuses a
//! divisor it can prove zero). Shift amounts are masked to the low 5 bits
//! (6 for 64-bit integers), the IR's rule. `i64::MIN` is spelled
//! `(-9223372036854775807li - 1li)` (no literal reads as it), a NaN or
//! infinite f64 comes from its `u64` bits.

use std::fmt::Write as _;

use compute_ir::interp::value::{Value, eval_pure};
use compute_ir::ir::{ArrayRef, Barrier, BinOp, Builtin, KernelDef, Op, Stmt, UnOp, ValueId};
use compute_ir::{Kernel, Scalar, Type};

use super::literal;

/// The entry point every IR kernel is emitted with.
pub const ENTRY_POINT: &str = "main";

/// The WGSL source of `kernel`: every storage buffer `read_write` (the
/// server's contract), scalars in one uniform struct after the buffers.
pub fn emit_wgsl(kernel: &Kernel) -> String {
    let def = kernel.def();
    let mut e = Emitter {
        def,
        consts: vec![None; def.values.len()],
        out: String::new(),
        indent: 1,
    };
    let mut head = String::new();
    // Nor for subgroups: naga 30 implements the builtins and functions
    // behind its SUBGROUP capability but refuses `enable subgroups;` as a
    // not-yet-implemented extension.
    // naga needs no `enable` for i64, u64 or f64 (only its SHADER_INT64 and
    // FLOAT64 validation capabilities, which wgpu derives from the device's
    // features).
    if def.uses_f16() {
        head.push_str("enable f16;\n\n");
    }
    for (i, b) in def.buffers.iter().enumerate() {
        let elem = if b.atomic {
            format!("atomic<{}>", b.elem.wgsl())
        } else {
            b.elem.wgsl().to_string()
        };
        let _ = writeln!(
            head,
            "@group(0) @binding({i}) var<storage, read_write> b{i}: array<{elem}>;"
        );
    }
    if !def.scalars.is_empty() {
        head.push_str("\nstruct Scalars {\n");
        for (i, s) in def.scalars.iter().enumerate() {
            let _ = writeln!(head, "    s{i}: {},", s.wgsl());
        }
        let _ = writeln!(
            head,
            "}}\n\n@group(0) @binding({}) var<uniform> scalars: Scalars;",
            def.buffers.len()
        );
    }
    for (i, s) in def.shared.iter().enumerate() {
        let _ = writeln!(
            head,
            "var<workgroup> sh{i}: array<{}, {}>;",
            s.elem.wgsl(),
            s.len
        );
    }
    let [x, y, z] = def.workgroup_size;
    let _ = write!(
        head,
        "\n@compute @workgroup_size({x}, {y}, {z})\nfn {ENTRY_POINT}(\n    \
         @builtin(global_invocation_id) gid: vec3<u32>,\n    \
         @builtin(local_invocation_id) lid: vec3<u32>,\n    \
         @builtin(workgroup_id) wid: vec3<u32>,\n    \
         @builtin(num_workgroups) nwg: vec3<u32>,\n    \
         @builtin(local_invocation_index) lidx: u32,\n{}) {{\n",
        if def.uses_subgroups() {
            "    @builtin(subgroup_invocation_id) sgid: u32,\n    \
             @builtin(subgroup_size) sgsize: u32,\n"
        } else {
            ""
        }
    );
    e.out = head;
    e.block(&def.body);
    e.out.push_str("}\n");
    e.out
}

struct Emitter<'k> {
    def: &'k KernelDef,
    /// Values known at compile time (naga would constant-evaluate them).
    consts: Vec<Option<Value>>,
    out: String,
    indent: usize,
}

fn v(id: ValueId) -> String {
    format!("v{}", id.0)
}

fn array(a: ArrayRef) -> String {
    match a {
        ArrayRef::Global(i) => format!("b{i}"),
        ArrayRef::Shared(i) => format!("sh{i}"),
    }
}

impl Emitter<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn block(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn nested(&mut self, stmts: &[Stmt]) {
        self.indent += 1;
        self.block(stmts);
        self.indent -= 1;
    }

    fn ty_of(&self, id: ValueId) -> Type {
        self.def.values[id.0 as usize]
    }

    fn let_(&mut self, id: ValueId, op: &Op) {
        let t = self.ty_of(id);
        let tys = literal::ty(t);
        let folded = match op {
            Op::Lit(_) => eval_pure(op, t, |_| Value::zero(t)),
            _ if compute_ir::operands(op)
                .iter()
                .all(|o| self.consts[o.0 as usize].is_some())
                && !compute_ir::operands(op).is_empty() =>
            {
                let consts = &self.consts;
                eval_pure(op, t, |o| consts[o.0 as usize].unwrap_or(Value::zero(t)))
            }
            _ => None,
        };
        if let Some(c) = folded {
            if literal::representable(&c) {
                self.consts[id.0 as usize] = Some(c);
                let text = format!("let {}: {tys} = {};", v(id), literal::value(&c));
                self.line(&text);
            } else {
                self.runtime_constant(id, &c);
            }
            return;
        }
        let text = format!("let {}: {tys} = {};", v(id), self.expr(t, op));
        self.line(&text);
    }

    /// A NaN or infinity: loaded from a variable holding its bits, so naga
    /// sees a run-time value.
    fn runtime_constant(&mut self, id: ValueId, c: &Value) {
        let t = c.ty;
        if t.scalar == Scalar::F64 {
            // Same as below with 64-bit bits: `bitcast<f64>(u64)`.
            let bits_t = literal::ty(t.with_scalar(Scalar::U64));
            let l: Vec<String> = (0..usize::from(t.lanes))
                .map(|i| format!("{}lu", c.lanes[i]))
                .collect();
            let init = if t.lanes == 1 {
                l[0].clone()
            } else {
                format!("{bits_t}({})", l.join(", "))
            };
            self.line(&format!("var {}_bits: {bits_t} = {init};", v(id)));
            let text = format!(
                "let {}: {} = bitcast<{}>({}_bits);",
                v(id),
                literal::ty(t),
                literal::ty(t),
                v(id)
            );
            self.line(&text);
            return;
        }
        let bits_t = literal::ty(t.with_scalar(Scalar::U32));
        let f32_t = literal::ty(t.with_scalar(Scalar::F32));
        let lanes: Vec<u32> = (0..usize::from(t.lanes))
            .map(|i| match t.scalar {
                Scalar::F16 => compute_ir::interp::f16::to_f32(c.lanes[i] as u16).to_bits(),
                _ => c.lanes[i] as u32,
            })
            .collect();
        let init = if t.lanes == 1 {
            format!("{}u", lanes[0])
        } else {
            let l: Vec<String> = lanes.iter().map(|b| format!("{b}u")).collect();
            format!("{bits_t}({})", l.join(", "))
        };
        let text = format!("var {}_bits: {bits_t} = {init};", v(id));
        self.line(&text);
        let value = if t.scalar == Scalar::F16 {
            format!("{}(bitcast<{f32_t}>({}_bits))", literal::ty(t), v(id))
        } else {
            format!("bitcast<{}>({}_bits)", literal::ty(t), v(id))
        };
        let text = format!("let {}: {} = {value};", v(id), literal::ty(t));
        self.line(&text);
    }

    fn expr(&self, t: Type, op: &Op) -> String {
        match op {
            Op::Lit(l) => literal::scalar(l.scalar(), l.bits()),
            Op::Arg(i) => format!("scalars.s{i}"),
            Op::Builtin(b) => match b {
                Builtin::GlobalId => "gid",
                Builtin::LocalId => "lid",
                Builtin::WorkgroupId => "wid",
                Builtin::NumWorkgroups => "nwg",
                Builtin::LocalIndex => "lidx",
                Builtin::SubgroupInvocationId => "sgid",
                Builtin::SubgroupSize => "sgsize",
            }
            .to_string(),
            Op::Splat(x, _) => format!("{}({})", literal::ty(t), v(*x)),
            Op::Compose(parts) => {
                let p: Vec<String> = parts.iter().map(|x| v(*x)).collect();
                format!("{}({})", literal::ty(t), p.join(", "))
            }
            Op::Extract(x, lane) => {
                format!("{}.{}", v(*x), ["x", "y", "z", "w"][usize::from(*lane)])
            }
            Op::Unary(u, x) => {
                let x = v(*x);
                match u {
                    UnOp::Neg => format!("-{x}"),
                    UnOp::Not => format!("!{x}"),
                    UnOp::BitNot => format!("~{x}"),
                    UnOp::Abs => format!("abs({x})"),
                    UnOp::Exp => format!("exp({x})"),
                    UnOp::Log => format!("log({x})"),
                    UnOp::Sqrt => format!("sqrt({x})"),
                    UnOp::InverseSqrt => format!("inverseSqrt({x})"),
                    UnOp::Tanh => format!("tanh({x})"),
                    UnOp::Sin => format!("sin({x})"),
                    UnOp::Cos => format!("cos({x})"),
                    UnOp::Floor => format!("floor({x})"),
                    UnOp::Ceil => format!("ceil({x})"),
                }
            }
            Op::Binary(op @ (BinOp::Div | BinOp::Rem), x, y)
                if self.ty_of(*x).scalar.is_int() && self.has_zero_lane(*y) =>
            {
                self.division_by_constant_zero(*op, t, *x, *y)
            }
            Op::Binary(op @ (BinOp::Div | BinOp::Rem), x, y)
                if self.ty_of(*x).scalar.is_int() && self.consts[y.0 as usize].is_none() =>
            {
                // naga refuses a divisor it can see is zero, and it sees
                // through more than literals (a vector built from a zero
                // constant and a run-time lane). A run-time divisor is
                // therefore guarded: `x / 0 == x`, `x % 0 == 0` spelled out.
                let zero = literal::value(&Value::zero(t));
                let mut one = Value::zero(t);
                one.lanes[..usize::from(t.lanes)].fill(1);
                let one = literal::value(&one);
                let (x, y) = (v(*x), v(*y));
                let (o, when_zero) = if *op == BinOp::Div {
                    ("/", x.clone())
                } else {
                    ("%", zero.clone())
                };
                format!(
                    "select({x} {o} select({y}, {one}, {y} == {zero}), {when_zero}, {y} == {zero})"
                )
            }
            Op::Binary(b, x, y) => {
                let xt = self.ty_of(*x);
                let (x, y) = (v(*x), v(*y));
                let infix = |o: &str| format!("{x} {o} {y}");
                match b {
                    BinOp::Add => infix("+"),
                    BinOp::Sub => infix("-"),
                    BinOp::Mul => infix("*"),
                    BinOp::Div => infix("/"),
                    BinOp::Rem => infix("%"),
                    BinOp::And => infix("&"),
                    BinOp::Or => infix("|"),
                    BinOp::Xor if xt.scalar == Scalar::Bool => infix("!="),
                    BinOp::Xor => infix("^"),
                    BinOp::Shl | BinOp::Shr => {
                        let o = if *b == BinOp::Shl { "<<" } else { ">>" };
                        let bits = if xt.scalar.is_64() { 63 } else { 31 };
                        let mask = if xt.lanes == 1 {
                            format!("{bits}u")
                        } else {
                            format!("vec{}<u32>({bits}u)", xt.lanes)
                        };
                        format!("{x} {o} ({y} & {mask})")
                    }
                    BinOp::Eq => infix("=="),
                    BinOp::Ne => infix("!="),
                    BinOp::Lt => infix("<"),
                    BinOp::Le => infix("<="),
                    BinOp::Gt => infix(">"),
                    BinOp::Ge => infix(">="),
                    BinOp::Min => format!("min({x}, {y})"),
                    BinOp::Max => format!("max({x}, {y})"),
                    BinOp::Pow => format!("pow({x}, {y})"),
                }
            }
            Op::Select {
                cond,
                on_true,
                on_false,
            } => {
                format!("select({}, {}, {})", v(*on_false), v(*on_true), v(*cond))
            }
            // min(max()) rather than clamp(): the IR's definition, also for lo > hi.
            Op::Clamp(x, lo, hi) => format!("min(max({}, {}), {})", v(*x), v(*lo), v(*hi)),
            Op::Fma(a, b, c) => format!("fma({}, {}, {})", v(*a), v(*b), v(*c)),
            Op::Cast(x, to) => {
                let from = self.ty_of(*x).scalar;
                let signed = |s: Scalar| matches!(s, Scalar::I32 | Scalar::I64);
                if from.is_int()
                    && to.is_int()
                    && from.size() != to.size()
                    && signed(from) != signed(*to)
                {
                    // Change the width first, keeping the source's
                    // signedness (so the extension is by it, the IR's rule
                    // and naga's SPIR-V `SConvert`/`UConvert` agree), then
                    // reinterpret.
                    let mid = match (signed(from), to.is_64()) {
                        (true, true) => Scalar::I64,
                        (true, false) => Scalar::I32,
                        (false, true) => Scalar::U64,
                        (false, false) => Scalar::U32,
                    };
                    format!(
                        "{}({}({}))",
                        literal::ty(t),
                        literal::ty(t.with_scalar(mid)),
                        v(*x)
                    )
                } else {
                    format!("{}({})", literal::ty(t), v(*x))
                }
            }
            Op::Bitcast(x, _) => format!("bitcast<{}>({})", literal::ty(t), v(*x)),
            Op::Get(var) => format!("x{}", var.0),
            Op::Load(a, i) => format!("{}[{}]", array(*a), v(*i)),
            Op::ArrayLength(b) => format!("arrayLength(&b{b})"),
            Op::AtomicLoad(b, i) => format!("atomicLoad(&b{b}[{}])", v(*i)),
            Op::Atomic(a, b, i, x) => format!("{}(&b{b}[{}], {})", a.wgsl(), v(*i), v(*x)),
            Op::Subgroup(o, x) => format!("{}({})", o.wgsl(), v(*x)),
        }
    }

    fn has_zero_lane(&self, id: ValueId) -> bool {
        self.consts[id.0 as usize].is_some_and(|c| c.lanes[..usize::from(c.ty.lanes)].contains(&0))
    }

    /// `x / d` or `x % d` for a constant `d` with a zero lane, which naga
    /// refuses to validate: WGSL's run-time rule (`x / 0 == x`, `x % 0 == 0`)
    /// spelled out, dividing by 1 in the zero lanes.
    fn division_by_constant_zero(&self, op: BinOp, t: Type, x: ValueId, d: ValueId) -> String {
        let c = self.consts[d.0 as usize].unwrap_or(Value::zero(t));
        let lanes = usize::from(t.lanes);
        let mut safe = c;
        let mut mask = Value::zero(t.with_scalar(Scalar::Bool));
        for i in 0..lanes {
            if c.lanes[i] == 0 {
                safe.lanes[i] = 1;
                mask.lanes[i] = 1;
            }
        }
        let o = if op == BinOp::Div { "/" } else { "%" };
        let when_zero = if op == BinOp::Div {
            v(x)
        } else {
            literal::value(&Value::zero(t))
        };
        format!(
            "select({} {o} {}, {when_zero}, {})",
            v(x),
            literal::value(&safe),
            literal::value(&mask)
        )
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let(id, op) => self.let_(*id, op),
            Stmt::Var(var, init) => {
                let t = literal::ty(self.def.vars[var.0 as usize]);
                self.line(&format!("var x{}: {t} = {};", var.0, v(*init)));
            }
            Stmt::Set(var, x) => self.line(&format!("x{} = {};", var.0, v(*x))),
            Stmt::Store(a, i, x) => self.line(&format!("{}[{}] = {};", array(*a), v(*i), v(*x))),
            Stmt::AtomicStore(b, i, x) => {
                self.line(&format!("atomicStore(&b{b}[{}], {});", v(*i), v(*x)))
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.line(&format!("if {} {{", v(*cond)));
                self.nested(then);
                if otherwise.is_empty() {
                    self.line("}");
                } else {
                    self.line("} else {");
                    self.nested(otherwise);
                    self.line("}");
                }
            }
            Stmt::For {
                index,
                start,
                end,
                step,
                body,
            } => {
                let t = literal::ty(self.ty_of(*index));
                let i = format!("loop{}", index.0);
                self.line(&format!(
                    "for (var {i}: {t} = {}; {i} < {}; {i} = {i} + {}) {{",
                    v(*start),
                    v(*end),
                    v(*step)
                ));
                self.indent += 1;
                self.line(&format!("let {}: {t} = {i};", v(*index)));
                self.block(body);
                self.indent -= 1;
                self.line("}");
            }
            Stmt::Loop(body) => {
                self.line("loop {");
                self.nested(body);
                self.line("}");
            }
            Stmt::Break => self.line("break;"),
            Stmt::Continue => self.line("continue;"),
            Stmt::Return => self.line("return;"),
            Stmt::Barrier(Barrier::Workgroup) => self.line("workgroupBarrier();"),
            Stmt::Barrier(Barrier::Storage) => self.line("storageBarrier();"),
        }
    }
}
