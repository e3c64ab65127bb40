//! IR to WGSL text.
//!
//! One `let` per IR value, in IR order, so the text reads like the builder
//! code that made it. Nothing is folded here: the interpreter is the oracle
//! the emitted code is tested against, so the emitter computes nothing the
//! interpreter computes. Instead every literal is bound through a function
//! variable (`var v3_lit: i32 = 7i;` at the top, `let v3: i32 = v3_lit;`
//! where the IR has it), which keeps
//! naga's constant evaluator out of the way: naga evaluates any expression
//! whose operands are all constant, and refuses there what WGSL's run-time
//! rules define (`1i / 0i`, overflow, a NaN result). With no constant
//! operand anywhere, every operation runs on the device under the run-time
//! rules, and the driver folds the variables away. A NaN or infinite
//! literal (WGSL has no such literal) is bitcast from its bits. Integer
//! division is guarded (`x / 0 == x`, `x % 0 == 0`, spelled out). Shift
//! amounts are masked to the low 5 bits (6 for 64-bit integers), the IR's
//! rule. `i64::MIN` is spelled `(-9223372036854775807li - 1li)` (no literal
//! reads as it).

use compute_ir::ir::{
    ArrayRef, Barrier, BinOp, Builtin, KernelDef, Op, Stmt, SubgroupOp, UnOp, ValueId,
};
use compute_ir::{Kernel, Lit, Scalar, Type};

use super::{head, literal, matrix};

/// The entry point every IR kernel is emitted with.
pub const ENTRY_POINT: &str = "main";

/// The WGSL source of `kernel` for a device with subgroups: storage
/// buffers `read` or `read_write` as the IR declares them, scalars in one
/// uniform struct after the buffers.
pub fn emit_wgsl(kernel: &Kernel) -> String {
    emit_wgsl_for(kernel, false, true)
}

/// [`emit_wgsl`] for a device with or without `subgroups` (which branch
/// of each `Stmt::IfFeature` is emitted), and with `reports`, every array
/// access preceded by a check that records the first one outside its array
/// in the report slot (`BoundsChecks::Reported`); the access itself stays
/// as wgpu's checks contain it. An access of a workgroup or per-invocation
/// array (or a vector's lane) whose index provably stays inside has no
/// check (`ranges.rs`).
pub fn emit_wgsl_for(kernel: &Kernel, reports: bool, subgroups: bool) -> String {
    let def = kernel.def();
    let mut e = Emitter {
        def,
        out: String::new(),
        literals: String::new(),
        indent: 1,
        reports,
        subgroups,
        ranges: super::ranges::Ranges::of(def),
    };
    e.out = head::head(def, reports, subgroups);
    for (i, l) in def.locals.iter().enumerate() {
        // Function variables start at zero, as the IR's local arrays do.
        e.line(&format!(
            "var l{i}: array<{}, {}>;",
            literal::ty(l.ty),
            l.len
        ));
    }
    matrix::declarations(&mut e);
    let body = e.out.len();
    e.block(&def.body);
    e.report_end();
    let literals = std::mem::take(&mut e.literals);
    e.out.insert_str(body, &literals);
    e.out.push_str("}\n");
    e.out
}

pub(super) struct Emitter<'k> {
    pub(super) def: &'k KernelDef,
    out: String,
    /// The literals' variables, declared at the top of the entry point
    /// whatever block uses them: declared in a loop, naga would store the
    /// initial value on every pass, and a variable with stores is no
    /// constant to the server's loop and index proofs.
    literals: String,
    pub(super) indent: usize,
    /// Whether accesses are reported (`BoundsChecks::Reported`).
    pub(super) reports: bool,
    /// Whether the device has subgroups: the branch of a
    /// `Stmt::IfFeature` on them that is emitted.
    subgroups: bool,
    /// The integer ranges that let a reported access of an array of known
    /// length skip its check, and a loop of a constant step count its
    /// trips (`ranges.rs`).
    pub(super) ranges: super::ranges::Ranges,
}

pub(super) fn v(id: ValueId) -> String {
    format!("v{}", id.0)
}

pub(super) fn array(a: ArrayRef) -> String {
    match a {
        ArrayRef::Global(i) => format!("b{i}"),
        ArrayRef::Shared(i) => format!("sh{i}"),
        ArrayRef::Local(i) => format!("l{i}"),
    }
}

impl Emitter<'_> {
    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    pub(super) fn block(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn nested(&mut self, stmts: &[Stmt]) {
        self.indent += 1;
        self.block(stmts);
        self.indent -= 1;
    }

    pub(super) fn ty_of(&self, id: ValueId) -> Type {
        self.def.values[id.0 as usize]
    }

    fn let_(&mut self, id: ValueId, op: &Op) {
        match op {
            Op::Load(a, i)
            | Op::AtomicLoad(a, i)
            | Op::Atomic(_, a, i, _)
            | Op::CompareExchange(a, i, ..) => self.bounds(*a, *i),
            Op::Index(x, i) | Op::WithLane(x, i, _) => self.lane_bounds(*x, *i),
            _ => {}
        }
        let t = self.ty_of(id);
        if let Op::Lit(l) = op {
            self.literal(id, t, *l);
            return;
        }
        if let Op::WithLane(x, i, lane) = op {
            // WGSL assigns a lane of a variable only.
            let tys = literal::ty(t);
            self.line(&format!("var {}_w: {tys} = {};", v(id), v(*x)));
            self.line(&format!("{}_w[{}] = {};", v(id), v(*i), v(*lane)));
            self.line(&format!("let {}: {tys} = {}_w;", v(id), v(id)));
            return;
        }
        if let Op::CompareExchange(a, i, cmp, x) = op {
            // The result struct, then the IR's `vec2`: the old value and
            // whether the exchange happened.
            let r = format!("{}_cx", v(id));
            self.line(&format!(
                "let {r} = atomicCompareExchangeWeak(&{}[{}], {}, {});",
                array(*a),
                v(*i),
                v(*cmp),
                v(*x)
            ));
            let (tys, elem) = (literal::ty(t), t.scalar.wgsl());
            self.line(&format!(
                "let {}: {tys} = {tys}({r}.old_value, {elem}({r}.exchanged));",
                v(id)
            ));
            return;
        }
        let text = format!("let {}: {} = {};", v(id), literal::ty(t), self.expr(t, op));
        self.line(&text);
    }

    /// A literal as a run-time value: read from a function variable, so no
    /// expression naga sees has a constant operand (see the module docs).
    fn literal(&mut self, id: ValueId, t: Type, l: Lit) {
        let (s, bits) = (l.scalar(), l.bits());
        if !literal::representable(s, bits) {
            self.non_finite(id, t, bits);
            return;
        }
        let tys = literal::ty(t);
        let text = format!(
            "    var {}_lit: {tys} = {};\n",
            v(id),
            literal::scalar(s, bits)
        );
        self.literals.push_str(&text);
        let text = format!("let {}: {tys} = {}_lit;", v(id), v(id));
        self.line(&text);
    }

    /// A NaN or infinity: loaded from a variable holding its bits (WGSL has
    /// no literal for it).
    fn non_finite(&mut self, id: ValueId, t: Type, bits: u64) {
        let (bits_t, bits, value) = match t.scalar {
            Scalar::F64 => (
                "u64",
                format!("{bits}lu"),
                format!("bitcast<f64>({}_bits)", v(id)),
            ),
            // Through f32: `bitcast` needs a 32-bit source, and every f16
            // is an f32.
            Scalar::F16 => (
                "u32",
                format!("{}u", literal::f16_to_f32(bits as u16).to_bits()),
                format!("f16(bitcast<f32>({}_bits))", v(id)),
            ),
            _ => (
                "u32",
                format!("{}u", bits as u32),
                format!("bitcast<f32>({}_bits)", v(id)),
            ),
        };
        self.line(&format!("var {}_bits: {bits_t} = {bits};", v(id)));
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
                Builtin::SubgroupId => "sgindex",
                Builtin::NumSubgroups => "nsg",
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
                    UnOp::Exp2
                    | UnOp::Log2
                    | UnOp::Trunc
                    | UnOp::Round
                    | UnOp::Fract
                    | UnOp::Sign
                    | UnOp::CountOneBits
                    | UnOp::CountLeadingZeros
                    | UnOp::CountTrailingZeros
                    | UnOp::ReverseBits => format!("{}({x})", u.name()),
                }
            }
            Op::Binary(op @ (BinOp::Div | BinOp::Rem), x, y) if self.ty_of(*x).scalar.is_int() => {
                // WGSL's run-time rule, `x / 0 == x` and `x % 0 == 0`,
                // spelled out: dividing by 1 where the divisor is 0.
                let zero = literal::splat(t, 0);
                let one = literal::splat(t, 1);
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
                    BinOp::Atan2 => format!("atan2({x}, {y})"),
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
            Op::ExtractBits(e, o, c) => {
                format!("extractBits({}, {}, {})", v(*e), v(*o), v(*c))
            }
            Op::InsertBits(e, n, o, c) => {
                format!("insertBits({}, {}, {}, {})", v(*e), v(*n), v(*o), v(*c))
            }
            Op::Dot(a, b) => format!("dot({}, {})", v(*a), v(*b)),
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
            Op::Index(x, i) => format!("{}[{}]", v(*x), v(*i)),
            // Emitted as three lines by `let_`.
            Op::WithLane(..) => String::new(),
            Op::ArrayLength(b) => format!("arrayLength(&b{b})"),
            Op::AtomicLoad(a, i) => format!("atomicLoad(&{}[{}])", array(*a), v(*i)),
            Op::Atomic(op, a, i, x) => {
                format!("{}(&{}[{}], {})", op.wgsl(), array(*a), v(*i), v(*x))
            }
            // Emitted as two lines by `let_`.
            Op::CompareExchange(..) => String::new(),
            // The lane of a broadcast is a constant expression in WGSL.
            Op::Subgroup(SubgroupOp::Broadcast(lane), x) => {
                format!("subgroupBroadcast({}, {lane}u)", v(*x))
            }
            Op::Subgroup(o, x) => format!("{}({})", o.wgsl(), v(*x)),
            Op::SubgroupShuffle(o, x, lane) => format!("{}({}, {})", o.wgsl(), v(*x), v(*lane)),
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let(id, op) => self.let_(*id, op),
            Stmt::Var(var, init) => {
                let t = literal::ty(self.def.vars[var.0 as usize]);
                self.line(&format!("var x{}: {t} = {};", var.0, v(*init)));
            }
            Stmt::Set(var, x) => self.line(&format!("x{} = {};", var.0, v(*x))),
            Stmt::Store(a, i, x) => {
                self.bounds(*a, *i);
                self.line(&format!("{}[{}] = {};", array(*a), v(*i), v(*x)))
            }
            Stmt::AtomicStore(a, i, x) => {
                self.bounds(*a, *i);
                self.line(&format!(
                    "atomicStore(&{}[{}], {});",
                    array(*a),
                    v(*i),
                    v(*x)
                ))
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
            // The branch this device runs, in a block of its own (each
            // branch's values are its own).
            Stmt::IfFeature {
                feature: compute_ir::Feature::Subgroups,
                then,
                otherwise,
            } => {
                self.line("{");
                self.nested(if self.subgroups { then } else { otherwise });
                self.line("}");
            }
            Stmt::For {
                index,
                start,
                end,
                step,
                body,
            } => self.for_loop(*index, (*start, *end, *step), body),
            Stmt::Loop(body) => {
                self.line("loop {");
                self.nested(body);
                self.line("}");
            }
            Stmt::Break => self.line("break;"),
            Stmt::Continue => self.line("continue;"),
            Stmt::Return => {
                self.report_end();
                self.line("return;");
            }
            Stmt::Barrier(Barrier::Workgroup) => self.line("workgroupBarrier();"),
            Stmt::Barrier(Barrier::Storage) => self.line("storageBarrier();"),
            Stmt::UniformLoad(var, array, i) => {
                self.bounds(ArrayRef::Shared(*array), *i);
                self.line(&format!(
                    "x{} = workgroupUniformLoad(&sh{array}[{}]);",
                    var.0,
                    v(*i)
                ));
            }
            Stmt::Matrix(m) => self.matrix(m),
        }
    }
}
