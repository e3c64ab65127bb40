//! The device-address rewrite and the struct padding, on kernels shaped as
//! cubecl-spirv writes them.

use rspirv::dr::{Builder, Instruction, Module, Operand};
use rspirv::spirv::{
    AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel,
    FunctionControl, MemoryAccess, MemoryModel, Op, StorageClass,
};

use super::*;

/// `out[idx] = a[idx] + b[idx]` with the three buffers reached as
/// cubecl-spirv reaches them: device addresses in a push-constant block,
/// each loaded once, loads and stores with an `Aligned` memory operand.
fn device_address_kernel() -> Module {
    let mut b = Builder::new();
    b.set_version(1, 5);
    b.capability(Capability::Shader);
    b.capability(Capability::PhysicalStorageBufferAddresses);
    b.extension("SPV_KHR_physical_storage_buffer");
    b.memory_model(
        AddressingModel::PhysicalStorageBuffer64,
        MemoryModel::GLSL450,
    );
    let void = b.type_void();
    let u32_t = b.type_int(32, 0);
    let array = b.type_runtime_array(u32_t);
    b.decorate(array, Decoration::ArrayStride, [Operand::LiteralBit32(4)]);
    let buffer = b.type_struct([array]);
    b.member_decorate(buffer, 0, Decoration::Offset, [Operand::LiteralBit32(0)]);
    b.decorate(buffer, Decoration::Block, []);
    let address = b.type_pointer(None, StorageClass::PhysicalStorageBuffer, buffer);
    let params = b.type_struct([address, address, address]);
    for (k, offset) in [0, 8, 16].into_iter().enumerate() {
        b.member_decorate(
            params,
            k as u32,
            Decoration::Offset,
            [Operand::LiteralBit32(offset)],
        );
    }
    b.decorate(params, Decoration::Block, []);
    let block = b.type_pointer(None, StorageClass::PushConstant, params);
    let var = b.variable(block, None, StorageClass::PushConstant, None);
    let in_block = b.type_pointer(None, StorageClass::PushConstant, address);
    let elem = b.type_pointer(None, StorageClass::PhysicalStorageBuffer, u32_t);
    let idx_ptr = b.type_pointer(None, StorageClass::Input, u32_t);
    let idx_var = b.variable(idx_ptr, None, StorageClass::Input, None);
    b.decorate(
        idx_var,
        Decoration::BuiltIn,
        [Operand::BuiltIn(BuiltIn::LocalInvocationIndex)],
    );
    let c: Vec<_> = (0..3).map(|k| b.constant_bit32(u32_t, k)).collect();
    let fn_ty = b.type_function(void, []);
    let f = b
        .begin_function(void, None, FunctionControl::NONE, fn_ty)
        .expect("function");
    b.begin_block(None).expect("block");
    let idx = b.load(u32_t, None, idx_var, None, []).expect("load");
    let mut pointers = Vec::new();
    for k in &c {
        let at = b.access_chain(in_block, None, var, [*k]).expect("chain");
        pointers.push(b.load(address, None, at, None, []).expect("load"));
    }
    let aligned = Some(MemoryAccess::ALIGNED);
    let four = || [Operand::LiteralBit32(4)];
    let mut values = Vec::new();
    for p in &pointers[..2] {
        let e = b
            .in_bounds_access_chain(elem, None, *p, [c[0], idx])
            .expect("chain");
        values.push(b.load(u32_t, None, e, aligned, four()).expect("load"));
    }
    let sum = op(&mut b, Op::IAdd, u32_t, &values);
    let e = b
        .in_bounds_access_chain(elem, None, pointers[2], [c[0], idx])
        .expect("chain");
    b.store(e, sum, aligned, four()).expect("store");
    b.ret().expect("return");
    b.end_function().expect("end");
    b.entry_point(ExecutionModel::GLCompute, f, "main", [idx_var, var]);
    b.execution_mode(f, ExecutionMode::LocalSize, [64, 1, 1]);
    b.module()
}

#[test]
fn device_addresses_become_storage_buffer_bindings() {
    let (fixed, wgsl) = bridged(&device_address_kernel());
    let classes: Vec<StorageClass> = fixed
        .all_inst_iter()
        .filter(|i| matches!(i.class.opcode, Op::TypePointer | Op::Variable))
        .filter_map(|i| match i.operands.first() {
            Some(Operand::StorageClass(s)) => Some(*s),
            _ => None,
        })
        .collect();
    assert!(
        !classes.iter().any(|s| matches!(
            s,
            StorageClass::PhysicalStorageBuffer | StorageClass::PushConstant
        )),
        "{classes:?}"
    );
    let bindings: Vec<u32> = fixed
        .annotations
        .iter()
        .filter_map(|a| match a.operands.as_slice() {
            [
                _,
                Operand::Decoration(Decoration::Binding),
                Operand::LiteralBit32(j),
            ] => Some(*j),
            _ => None,
        })
        .collect();
    assert_eq!(bindings, [0, 1, 2]);
    assert!(
        fixed
            .memory_model
            .as_ref()
            .is_some_and(|m| m.operands[0] == Operand::AddressingModel(AddressingModel::Logical))
    );
    // Memory operands gone: naga reads at most one memory-access word.
    for i in fixed.functions.iter().flat_map(|f| f.all_inst_iter()) {
        match i.class.opcode {
            Op::Load => assert_eq!(i.operands.len(), 1),
            Op::Store => assert_eq!(i.operands.len(), 2),
            _ => {}
        }
    }
    let wgsl = shape(&wgsl);
    assert!(
        wgsl.contains("binding_2_.member[_] = (binding_0_.member[_] + binding_1_.member[_]);")
            || wgsl.contains("binding_2_.member[_] = (_ + _);"),
        "{wgsl}"
    );
}

#[test]
fn structs_laid_out_wider_than_wgsl_get_padding() {
    // cubecl's metadata shape: members at 8-byte offsets.
    let m = kernel(&[u32s], u32s, |b, ctx, _| {
        let info = b.type_struct([ctx.u32, ctx.u32]);
        for (k, offset) in [0, 8].into_iter().enumerate() {
            b.member_decorate(
                info,
                k as u32,
                Decoration::Offset,
                [Operand::LiteralBit32(offset)],
            );
        }
        b.decorate(info, Decoration::Block, []);
        let ptr = b.type_pointer(None, StorageClass::StorageBuffer, info);
        let var = b.id();
        b.module_mut().types_global_values.push(Instruction::new(
            Op::Variable,
            Some(ptr),
            Some(var),
            vec![Operand::StorageClass(StorageClass::StorageBuffer)],
        ));
        b.decorate(var, Decoration::DescriptorSet, [Operand::LiteralBit32(0)]);
        b.decorate(var, Decoration::Binding, [Operand::LiteralBit32(2)]);
        let member = b.type_pointer(None, StorageClass::StorageBuffer, ctx.u32);
        let one = b.constant_bit32(ctx.u32, 1);
        let p = b
            .in_bounds_access_chain(member, None, var, [one])
            .expect("chain");
        b.load(ctx.u32, None, p, None, []).expect("load")
    });
    let (fixed, wgsl) = bridged(&m);
    let padded = fixed
        .types_global_values
        .iter()
        .find(|t| t.class.opcode == Op::TypeStruct && t.operands.len() == 3);
    assert!(padded.is_some(), "the struct has a padding member");
    // The second member is read from byte 8: after a one-word pad.
    assert!(wgsl.contains("array<u32, 1>"), "{wgsl}");
    assert!(wgsl.contains(".member_2"), "{wgsl}");
}
