//! The allowlist: what naga's SPIR-V front end (naga 30.0.2,
//! `front/spv/`) is known to read right, for the operand types the bridge
//! hands it after its rewrites.
//!
//! naga's front end reads a module without the SPIR-V validator's
//! checks, and some of its readings are wrong without any error: it takes
//! an operation's signedness from the operand or result types rather than
//! the opcode (an `OpSDiv` of two `u32` divides unsigned), reads `OpSMod`
//! through floats, drops a barrier whose execution scope is not the
//! workgroup's or the subgroup's, ignores decorations it does not know,
//! reads a 64-bit `OpSwitch` literal as two cases. So every instruction of
//! the rewritten module is checked here against an explicit list (each
//! entry checked in naga's source; the subtle ones say why), with the
//! operand types the entry needs, and anything else fails the kernel's
//! compilation: "unsupported SPIR-V instruction OpX (naga's SPIR-V front
//! end misreads or lacks it)". The decorations, built-ins, storage classes
//! and GLSL.std.450 instructions are listed the same way, and every explicit
//! layout must be WGSL's natural one (`layout::check_layouts`).

use rspirv::dr::Module;
use rspirv::spirv::{BuiltIn, Decoration, Op, StorageClass};

use super::special::{Facts, special};

/// The error for an instruction the list refuses, `why` (when not empty)
/// saying what about it.
pub fn refusal(op: Op, why: &str) -> String {
    let why = if why.is_empty() {
        String::new()
    } else {
        format!(": {why}")
    };
    format!(
        "unsupported SPIR-V instruction Op{op:?} (naga's SPIR-V front end misreads or lacks it){why}"
    )
}

/// What an allowed instruction needs of its operand types. Operand
/// indices count rspirv's operands (after the result type and id).
pub(super) enum Rule {
    /// Nothing: naga's reading does not depend on the operand types (or
    /// its validator refuses a mismatch).
    Free,
    /// The listed operands are signed integers (scalars or vectors), and
    /// so is the result when `result`.
    Signed(&'static [usize], bool),
    /// The same, unsigned.
    Unsigned(&'static [usize], bool),
    /// Checked by [`special`].
    Special,
}

fn rule(op: Op) -> Option<Rule> {
    use Rule::*;
    Some(match op {
        // Debug information, the module's header, types and constants.
        // naga parses `OpTypeInt` of any width; its validator refuses the
        // widths WGSL lacks (8 bits), as it refuses a bool in a buffer.
        Op::Source
        | Op::SourceContinued
        | Op::SourceExtension
        | Op::String
        | Op::Name
        | Op::MemberName
        | Op::ModuleProcessed
        | Op::Line
        | Op::NoLine
        | Op::Capability
        | Op::TypeVoid
        | Op::TypeBool
        | Op::TypeInt
        | Op::TypeVector
        | Op::TypeArray
        | Op::TypeRuntimeArray
        | Op::TypeStruct
        | Op::TypeFunction
        | Op::Constant
        | Op::ConstantComposite
        | Op::ConstantTrue
        | Op::ConstantFalse
        | Op::ConstantNull => Free,
        // Module-level only (`polyfills` hoists the function-level ones):
        // naga makes it a zero, one of the values an undef may take.
        Op::Undef => Free,
        Op::Extension
        | Op::ExtInstImport
        | Op::MemoryModel
        | Op::EntryPoint
        | Op::ExecutionMode
        | Op::Decorate
        | Op::MemberDecorate
        | Op::TypeFloat
        | Op::TypePointer
        | Op::Variable => Special,
        // Structured control flow. `OpSwitch` is special: naga reads one
        // word per case literal.
        Op::Function
        | Op::FunctionEnd
        | Op::Label
        | Op::Branch
        | Op::BranchConditional
        | Op::SelectionMerge
        | Op::LoopMerge
        | Op::Return
        | Op::Unreachable
        | Op::Phi => Free,
        Op::Switch => Special,
        // Memory. Out-of-bounds indices are undefined in SPIR-V and
        // clamped in WGSL; memory operands are gone (`descriptors`).
        // `OpArrayLength` is not listed: WGSL's `arrayLength` counts the
        // binding, which the bridge widens to whole words (cubecl-spirv
        // reads lengths from the metadata instead).
        Op::Load
        | Op::Store
        | Op::AccessChain
        | Op::InBoundsAccessChain
        | Op::CopyObject
        | Op::CopyMemory => Free,
        // Composites. naga makes the dynamic ones selects (extract) or
        // composes (insert) over every lane.
        Op::CompositeConstruct
        | Op::CompositeExtract
        | Op::CompositeInsert
        | Op::VectorExtractDynamic
        | Op::VectorInsertDynamic
        | Op::VectorShuffle => Free,
        // Sign-agnostic integer arithmetic: naga bitcasts the operands to
        // the result's kind (`parse_expr_binary_op_sign_adjusted`), and
        // two's complement makes the bits the same either way. The
        // equalities anchor on the first operand instead; the left shift
        // casts its amount to u32. `OpBitFieldInsert` casts offset and
        // count to u32.
        Op::IAdd
        | Op::ISub
        | Op::IMul
        | Op::BitwiseAnd
        | Op::BitwiseOr
        | Op::BitwiseXor
        | Op::Not
        | Op::ShiftLeftLogical
        | Op::BitFieldInsert
        | Op::BitReverse
        | Op::BitCount
        | Op::IEqual
        | Op::INotEqual => Free,
        // Signed: naga takes the kind from the types, so they must be
        // signed (`signed_ops` bitcasts cubecl-spirv's unsigned values).
        // WGSL's `%` is the truncated remainder, `OpSRem`'s (the
        // dividend's sign); `OpSMod` is rewritten away (`signed_mod`).
        Op::SDiv | Op::SRem => Signed(&[0, 1], true),
        Op::SNegate | Op::ShiftRightArithmetic | Op::BitFieldSExtract | Op::SConvert => {
            Signed(&[0], true)
        }
        Op::ConvertSToF => Signed(&[0], false),
        Op::ConvertFToS => Signed(&[], true),
        Op::SLessThan | Op::SLessThanEqual | Op::SGreaterThan | Op::SGreaterThanEqual => {
            Signed(&[0, 1], false)
        }
        // Unsigned: naga reads `OpUDiv`, `OpUMod`, the logical right shift
        // and the conversions by the operand kind, signed if signed.
        Op::UDiv | Op::UMod => Unsigned(&[0, 1], true),
        Op::ShiftRightLogical | Op::BitFieldUExtract => Unsigned(&[0], true),
        Op::UConvert | Op::ConvertUToF => Unsigned(&[0], false),
        Op::ConvertFToU => Unsigned(&[], true),
        Op::ULessThan | Op::ULessThanEqual | Op::UGreaterThan | Op::UGreaterThanEqual => {
            Unsigned(&[0, 1], false)
        }
        // Floats. `OpFRem` is WGSL's `%` (truncated, the dividend's sign),
        // `OpFMod` naga writes as `x - y * floor(x / y)`, the precision
        // Vulkan gives both.
        Op::FAdd
        | Op::FSub
        | Op::FMul
        | Op::FDiv
        | Op::FRem
        | Op::FMod
        | Op::FNegate
        | Op::FConvert
        | Op::VectorTimesScalar
        | Op::Dot => Free,
        // Ordered comparisons are WGSL's. `OpFOrdNotEqual` is read as WGSL's
        // `!=`, which is true on a NaN where SPIR-V's ordered one is false:
        // cubecl-spirv emits it for cubecl's float `!=`, whose meaning on
        // every other cubecl backend (and Rust's) is WGSL's, so the reading
        // keeps cubecl's meaning. The other unordered comparisons naga reads
        // as ordered ones: not listed (cubecl-spirv emits none).
        Op::FOrdEqual
        | Op::FOrdNotEqual
        | Op::FOrdLessThan
        | Op::FOrdLessThanEqual
        | Op::FOrdGreaterThan
        | Op::FOrdGreaterThanEqual
        | Op::FUnordNotEqual => Free,
        // Booleans. Vector `OpLogicalAnd`/`OpLogicalOr` are selects by now
        // (`polyfills`); a scalar one is WGSL's `&&`/`||` (special).
        Op::LogicalNot | Op::LogicalEqual | Op::LogicalNotEqual | Op::Any | Op::All => Free,
        Op::Select => Free,
        Op::LogicalAnd | Op::LogicalOr | Op::Bitcast => Special,
        // Barriers: naga drops one whose execution scope is neither the
        // workgroup's nor the subgroup's, and makes a subgroup-scope one
        // a workgroup barrier (special).
        Op::ControlBarrier => Special,
        // Atomics. Scopes and memory semantics are dropped: WGSL's atomics
        // are relaxed, as in cubecl-wgpu's own WGSL. A compare-exchange is
        // WGSL's `atomicCompareExchangeWeak`, which naga's SPIR-V writer
        // (this server's Vulkan path) emits as the strong one. Min and max
        // take their signedness from the memory's type (special; signed
        // ones get signed memory from `signed_atomics`).
        Op::AtomicLoad
        | Op::AtomicStore
        | Op::AtomicExchange
        | Op::AtomicCompareExchange
        | Op::AtomicIAdd
        | Op::AtomicISub
        | Op::AtomicAnd
        | Op::AtomicOr
        | Op::AtomicXor => Free,
        Op::AtomicSMin | Op::AtomicSMax | Op::AtomicUMin | Op::AtomicUMax | Op::AtomicFAddEXT => {
            Special
        }
        // Subgroup operations: naga requires the subgroup scope (an error
        // otherwise) and reads reduce, inclusive and exclusive scans (an
        // error for clustered ones). Min and max take their kind from the
        // value, hence signed (`signed_ops`) or unsigned by opcode.
        // `OpGroupNonUniformElect` naga lacks (an error, and not listed).
        Op::GroupNonUniformAll
        | Op::GroupNonUniformAny
        | Op::GroupNonUniformBallot
        | Op::GroupNonUniformBroadcast
        | Op::GroupNonUniformBroadcastFirst
        | Op::GroupNonUniformShuffle
        | Op::GroupNonUniformShuffleXor
        | Op::GroupNonUniformShuffleUp
        | Op::GroupNonUniformShuffleDown
        | Op::GroupNonUniformIAdd
        | Op::GroupNonUniformFAdd
        | Op::GroupNonUniformIMul
        | Op::GroupNonUniformFMul
        | Op::GroupNonUniformFMin
        | Op::GroupNonUniformFMax
        | Op::GroupNonUniformBitwiseAnd
        | Op::GroupNonUniformBitwiseOr
        | Op::GroupNonUniformBitwiseXor => Free,
        Op::GroupNonUniformSMin | Op::GroupNonUniformSMax => Signed(&[2], true),
        Op::GroupNonUniformUMin | Op::GroupNonUniformUMax => Unsigned(&[2], true),
        Op::ExtInst => Special,
        _ => return None,
    })
}

/// GLSL.std.450 instructions naga maps to the WGSL builtin of the same
/// meaning, by number, and what they need of their operands. `Round`
/// becomes WGSL's `round` (half to even), one of the directions GLSL
/// leaves to the implementation. The NaN-aware `NMin`/`NMax`/`NClamp` are
/// not listed (WGSL's `min` says nothing of NaN), nor the struct-returning
/// `Modf`/`Frexp` ones.
pub(super) fn glsl_rule(n: u32) -> Option<Rule> {
    use Rule::*;
    Some(match n {
        1 | 2 | 3 | 4 | 6 | 8 | 9 | 10 => Free, // Round, RoundEven, Trunc, FAbs, FSign, Floor, Ceil, Fract
        11..=25 => Free,                        // Radians, Degrees, Sin..Atanh, Atan2
        26..=32 => Free,                        // Pow, Exp, Log, Exp2, Log2, Sqrt, InverseSqrt
        37 | 40 | 43 => Free,                   // FMin, FMax, FClamp
        46 | 48 | 49 | 50 | 53 => Free,         // FMix, Step, SmoothStep, Fma, Ldexp
        66..=69 => Free,                        // Length, Distance, Cross, Normalize
        73 => Free, // FindILsb: WGSL's firstTrailingBit is sign-agnostic
        5 | 7 | 39 | 42 | 45 | 74 => Signed(&[2, 3, 4], true), // SAbs, SSign, SMin, SMax, SClamp, FindSMsb
        38 | 41 | 44 => Unsigned(&[2, 3, 4], true),            // UMin, UMax, UClamp
        75 => Unsigned(&[2], false),                           // FindUMsb
        _ => return None,
    })
}

/// Decorations naga reads, or may ignore without changing a result:
/// `Uniform` (a uniformity hint), `NoSignedWrap`/`NoUnsignedWrap` (promises
/// WGSL's wrapping keeps), `RelaxedPrecision` and `FPFastMathMode`
/// (permissions to be less exact: ignored, the result is exact).
/// `NonWritable`/`NonReadable` are restated on the globals by the bridge.
pub(super) fn decoration_allowed(d: Decoration) -> bool {
    matches!(
        d,
        Decoration::Block
            | Decoration::DescriptorSet
            | Decoration::Binding
            | Decoration::Offset
            | Decoration::ArrayStride
            | Decoration::BuiltIn
            | Decoration::NonWritable
            | Decoration::NonReadable
            | Decoration::Uniform
            | Decoration::NoSignedWrap
            | Decoration::NoUnsignedWrap
            | Decoration::RelaxedPrecision
            | Decoration::FPFastMathMode
    )
}

/// The compute built-ins naga maps to WGSL's.
pub(super) fn builtin_allowed(b: u32) -> bool {
    [
        BuiltIn::GlobalInvocationId,
        BuiltIn::LocalInvocationId,
        BuiltIn::LocalInvocationIndex,
        BuiltIn::WorkgroupId,
        BuiltIn::NumWorkgroups,
        BuiltIn::SubgroupId,
        BuiltIn::NumSubgroups,
        BuiltIn::SubgroupSize,
        BuiltIn::SubgroupLocalInvocationId,
    ]
    .iter()
    .any(|x| *x as u32 == b)
}

/// Storage classes of pointers and variables: buffers (`descriptors`),
/// shared memory, locals, built-in inputs.
pub(super) fn storage_allowed(s: StorageClass) -> bool {
    matches!(
        s,
        StorageClass::StorageBuffer
            | StorageClass::Workgroup
            | StorageClass::Function
            | StorageClass::Private
            | StorageClass::Input
    )
}

/// Checks every instruction of `m`; the first refused one is the error.
pub fn check(m: &Module) -> Result<(), String> {
    let facts = Facts::new(m);
    for i in m.all_inst_iter() {
        let op = i.class.opcode;
        let Some(rule) = rule(op) else {
            return Err(refusal(op, ""));
        };
        match rule {
            Rule::Free => {}
            Rule::Signed(args, result) => facts.signedness(i, args, result, true)?,
            Rule::Unsigned(args, result) => facts.signedness(i, args, result, false)?,
            Rule::Special => special(&facts, i)?,
        }
    }
    super::layout::check_layouts(m)
}
