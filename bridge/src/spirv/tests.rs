//! The rewrites and the allowlist on small modules built with rspirv's
//! builder, each run through naga's SPIR-V front end, its validator and
//! its WGSL writer, as `compile.rs` does.

use std::collections::HashMap;

use rspirv::binary::Assemble;
use rspirv::dr::{Builder, Instruction, Module, Operand};
use rspirv::spirv::{
    AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel,
    FunctionControl, MemoryModel, Op, StorageClass, Word,
};

use super::for_naga;

mod allow;
mod layouts;
mod rewrites;

/// What a kernel body gets: common types and ids.
pub(super) struct Ctx {
    pub u32: Word,
    pub bool: Word,
    pub glsl: Word,
    /// The invocation index (`LocalInvocationIndex`), a u32.
    pub idx: Word,
    /// The buffers: (variable, element pointer type), by binding.
    pub buffers: Vec<(Word, Word)>,
    /// The constant 0u.
    pub zero: Word,
}

/// An element type of a buffer: (type, array stride).
pub(super) type Elem = fn(&mut Builder) -> (Word, u32);

/// A compute kernel with `inputs.len()` input buffers and one output
/// buffer (bindings in that order), each a runtime array of the given
/// element type. `body` gets the builder, inside the entry function's
/// block, and the loaded `input[idx]` values; it returns the value stored
/// to `output[idx]`.
pub(super) fn kernel(
    inputs: &[Elem],
    output: Elem,
    body: impl FnOnce(&mut Builder, &Ctx, &[Word]) -> Word,
) -> Module {
    kernel_with(inputs, &[output], |b, ctx, v| vec![body(b, ctx, v)])
}

/// [`kernel`] with any number of outputs, stored in order from what `body`
/// returns (fewer values than outputs: the rest are left alone).
pub(super) fn kernel_with(
    inputs: &[Elem],
    outputs: &[Elem],
    body: impl FnOnce(&mut Builder, &Ctx, &[Word]) -> Vec<Word>,
) -> Module {
    let mut b = Builder::new();
    b.set_version(1, 3);
    b.capability(Capability::Shader);
    b.capability(Capability::Int64);
    b.capability(Capability::Float16);
    b.capability(Capability::Float64);
    b.capability(Capability::GroupNonUniformArithmetic);
    b.memory_model(AddressingModel::Logical, MemoryModel::GLSL450);
    let glsl = b.ext_inst_import("GLSL.std.450");
    let void = b.type_void();
    let u32_t = b.type_int(32, 0);
    let bool_t = b.type_bool();
    let mut structs: HashMap<Word, (Word, Word)> = HashMap::new();
    let mut buffers = Vec::new();
    let mut elems = Vec::new();
    for (binding, ty) in inputs.iter().chain(outputs).enumerate() {
        let (elem, stride) = ty(&mut b);
        let (ptr, elem_ptr) = *structs.entry(elem).or_insert_with(|| {
            let array = b.type_runtime_array(elem);
            b.decorate(
                array,
                Decoration::ArrayStride,
                [Operand::LiteralBit32(stride)],
            );
            let st = b.type_struct([array]);
            b.member_decorate(st, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
            b.decorate(st, Decoration::Block, []);
            let ptr = b.type_pointer(None, StorageClass::StorageBuffer, st);
            let elem_ptr = b.type_pointer(None, StorageClass::StorageBuffer, elem);
            (ptr, elem_ptr)
        });
        let var = b.variable(ptr, None, StorageClass::StorageBuffer, None);
        b.decorate(var, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
        b.decorate(
            var,
            Decoration::Binding,
            [Operand::LiteralBit32(binding as u32)],
        );
        b.name(var, format!("binding_{binding}"));
        buffers.push((var, elem_ptr));
        elems.push(elem);
    }
    let idx_ptr = b.type_pointer(None, StorageClass::Input, u32_t);
    let idx_var = b.variable(idx_ptr, None, StorageClass::Input, None);
    b.decorate(
        idx_var,
        Decoration::BuiltIn,
        [Operand::BuiltIn(BuiltIn::LocalInvocationIndex)],
    );
    let zero = b.constant_bit32(u32_t, 0);
    let fn_ty = b.type_function(void, []);
    let f = b
        .begin_function(void, None, FunctionControl::NONE, fn_ty)
        .expect("function");
    b.begin_block(None).expect("block");
    let idx = b.load(u32_t, None, idx_var, None, []).expect("load");
    let mut values = Vec::new();
    for (k, (var, elem_ptr)) in buffers.iter().take(inputs.len()).enumerate() {
        let p = b
            .in_bounds_access_chain(*elem_ptr, None, *var, [zero, idx])
            .expect("chain");
        values.push(b.load(elems[k], None, p, None, []).expect("load"));
    }
    let ctx = Ctx {
        u32: u32_t,
        bool: bool_t,
        glsl,
        idx,
        buffers: buffers.clone(),
        zero,
    };
    let stores = body(&mut b, &ctx, &values);
    for (value, (out_var, out_ptr)) in stores.into_iter().zip(&buffers[inputs.len()..]) {
        let p = b
            .in_bounds_access_chain(*out_ptr, None, *out_var, [zero, idx])
            .expect("chain");
        b.store(p, value, None, []).expect("store");
    }
    b.ret().expect("return");
    b.end_function().expect("end");
    b.entry_point(ExecutionModel::GLCompute, f, "main", [idx_var]);
    b.execution_mode(f, ExecutionMode::LocalSize, [64, 1, 1]);
    b.module()
}

/// Element types of buffers.
pub(super) fn u32s(b: &mut Builder) -> (Word, u32) {
    (b.type_int(32, 0), 4)
}
pub(super) fn u64s(b: &mut Builder) -> (Word, u32) {
    (b.type_int(64, 0), 8)
}
pub(super) fn f32s(b: &mut Builder) -> (Word, u32) {
    (b.type_float(32, None), 4)
}
pub(super) fn i32s(b: &mut Builder) -> (Word, u32) {
    (b.type_int(32, 1), 4)
}
pub(super) fn u32x4s(b: &mut Builder) -> (Word, u32) {
    let u = b.type_int(32, 0);
    (b.type_vector(u, 4), 16)
}

/// Appends `op` with id operands `args` and a result of type `ty`.
pub(super) fn op(b: &mut Builder, op: Op, ty: Word, args: &[Word]) -> Word {
    let id = b.id();
    let operands = args.iter().map(|a| Operand::IdRef(*a)).collect();
    b.insert_into_block(
        rspirv::dr::InsertPoint::End,
        Instruction::new(op, Some(ty), Some(id), operands),
    )
    .expect("an instruction in the block");
    id
}

/// Appends the GLSL.std.450 instruction `n` on `args`.
pub(super) fn glsl(b: &mut Builder, ctx: &Ctx, n: u32, ty: Word, args: &[Word]) -> Word {
    b.ext_inst(
        ty,
        None,
        ctx.glsl,
        n,
        args.iter().map(|a| Operand::IdRef(*a)),
    )
    .expect("an extended instruction")
}

/// naga's reading of `m`: parsed, validated (every capability), written
/// as WGSL.
pub(super) fn naga_wgsl(m: &Module) -> Result<String, String> {
    let words = m.assemble();
    let options = naga::front::spv::Options {
        adjust_coordinate_space: false,
        strict_capabilities: false,
        block_ctx_dump_prefix: None,
    };
    let module = naga::front::spv::Frontend::new(words.iter().copied(), &options)
        .parse()
        .map_err(|e| format!("spv-in: {e}"))?;
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| format!("validation: {e:?}"))?;
    naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
        .map_err(|e| format!("wgsl-out: {e}"))
}

/// `m` through the bridge's rewrite and allowlist, then naga: the module
/// and its WGSL.
pub(super) fn bridged(m: &Module) -> (Module, String) {
    let fixed = for_naga(m).unwrap_or_else(|e| panic!("the rewrite refused the module: {e}"));
    let wgsl = naga_wgsl(&fixed).unwrap_or_else(|e| panic!("naga refused the rewrite: {e}"));
    (fixed, wgsl)
}

/// How many instructions of `m`'s functions are `op`.
pub(super) fn count(m: &Module, op: Op) -> usize {
    m.functions
        .iter()
        .flat_map(|f| f.all_inst_iter())
        .filter(|i| i.class.opcode == op)
        .count()
}

/// `wgsl` with naga's expression names (`_e12`) as `_`, so a test can
/// look for an expression's shape.
pub(super) fn shape(wgsl: &str) -> String {
    let bytes = wgsl.as_bytes();
    let mut out = String::with_capacity(wgsl.len());
    let mut k = 0;
    while k < bytes.len() {
        out.push(bytes[k] as char);
        if bytes[k] == b'_' && bytes.get(k + 1) == Some(&b'e') {
            let digits = bytes[k + 2..]
                .iter()
                .take_while(|d| d.is_ascii_digit())
                .count();
            if digits > 0 {
                k += 2 + digits;
                continue;
            }
        }
        k += 1;
    }
    out
}

/// A pointer to `buffer[idx]` (binding `buffer`).
pub(super) fn element(b: &mut Builder, ctx: &Ctx, buffer: usize) -> Word {
    let (var, ptr) = ctx.buffers[buffer];
    b.in_bounds_access_chain(ptr, None, var, [ctx.zero, ctx.idx])
        .expect("chain")
}
