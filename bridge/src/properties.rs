//! What the device offers, in cubecl's words: the `DeviceProperties` every
//! cubecl kernel and test reads its feature checks from.
//!
//! The same answers cubecl-wgpu gives for its WGSL compiler on the same
//! adapter (types, atomics, limits), so a test that returns early for a
//! missing feature does so on both runtimes alike. With the probe on
//! ([`PROBE_ENV`]), every type and plane feature is claimed instead: what
//! `cargo xtask cubecl` uses to tell a test that returned early for a
//! missing feature from one that needs no kernel (docs/cubecl.md).

use cubecl_common::profile::TimingMethod;
use cubecl_ir::features::{AtomicUsage, EnumSet, MmaConfig, Plane, TypeUsage};
use cubecl_ir::{
    AddressType, DeviceIdentity, DeviceProperties, ElemType, FloatKind, HardwareProperties,
    IntKind, MemoryDeviceProperties, Type, UIntKind,
};

/// Set (to anything) to claim every type and plane feature, whatever the
/// adapter has. Launches are then refused (see `launch.rs`): the probe only
/// counts which tests would have launched a kernel.
pub const PROBE_ENV: &str = "CUBECL_BRIDGE_PROBE";

/// Set to `on` to claim plane operations where the device has subgroups
/// (off CPU adapters, as cubecl-wgpu does). Not the default: on the H100
/// it made burn's training step 3.5x slower (docs/burn.md, "Plane
/// operations"). A measuring switch until that is understood.
pub const PLANES_ENV: &str = "CUBECL_BRIDGE_PLANES";

/// Whether this process runs as the feature probe.
pub fn probing() -> bool {
    std::env::var_os(PROBE_ENV).is_some()
}

/// The properties of the device `adapter` opened as `device`.
pub fn device_properties(adapter: &wgpu::Adapter, device: &wgpu::Device) -> DeviceProperties {
    let limits = device.limits();
    let adapter_limits = adapter.limits();
    let info = adapter.get_info();
    // WebGPU may report no subgroup sizes; cubecl's algorithms read them even
    // without plane ops, so cubecl-wgpu states the widest range possible.
    let (plane_min, plane_max) = match (info.subgroup_min_size, info.subgroup_max_size) {
        (0, 0) => (8, 128),
        sizes => sizes,
    };
    // The server binds at most one more storage buffer than the kernel's
    // own (the packed scalars and shapes), so a kernel may have one less.
    let memory = MemoryDeviceProperties::new(
        limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size),
        u64::from(
            limits
                .min_uniform_buffer_offset_alignment
                .max(limits.min_storage_buffer_offset_alignment),
        ),
    );
    let max_count = adapter_limits.max_compute_workgroups_per_dimension;
    let hardware = HardwareProperties {
        load_width: 128,
        vector_register_count: None,
        plane_size_min: plane_min,
        plane_size_max: plane_max,
        max_bindings: limits
            .max_storage_buffers_per_shader_stage
            .saturating_sub(1),
        max_shared_memory_size: limits.max_compute_workgroup_storage_size as usize,
        max_cube_count: (max_count, max_count, max_count),
        // The WGSL compiler may lay a cube out as one row along x, so a cube
        // holds no more units than that row does (cubecl-wgpu's rule).
        max_units_per_cube: adapter_limits
            .max_compute_invocations_per_workgroup
            .min(adapter_limits.max_compute_workgroup_size_x),
        max_cube_dim: (
            adapter_limits.max_compute_workgroup_size_x,
            adapter_limits.max_compute_workgroup_size_y,
            adapter_limits.max_compute_workgroup_size_z,
        ),
        num_streaming_multiprocessors: None,
        num_cpu_cores: None,
        last_level_cache_size: None,
        num_tensor_cores: None,
        min_tensor_cores_dim: None,
        max_vector_size: 4,
        cube_mma_reserved_shared_memory: 0,
    };
    // The device's features, not the adapter's: what the server asked for
    // when it opened the device is all a kernel may use.
    let features = device.features();
    let timing = if features.contains(wgpu::Features::TIMESTAMP_QUERY) {
        TimingMethod::Device
    } else {
        TimingMethod::System
    };
    let identity = DeviceIdentity {
        name: info.name.clone(),
        fingerprint: format!("wgpu-server_{}_{}", info.vendor, info.device),
        physical: None,
    };
    let mut props = DeviceProperties::new(Default::default(), memory, hardware, timing, identity);
    register_types(&mut props, features);
    register_planes(&mut props, features, info.device_type);
    if probing() {
        claim_everything(&mut props);
    }
    props
}

/// cubecl-wgpu's WGSL type registration (`backend/wgsl.rs`), read off the
/// adapter's features.
fn register_types(props: &mut DeviceProperties, features: wgpu::Features) {
    props.register_address_type(AddressType::U32);
    for ty in [
        ElemType::Index,
        ElemType::UInt(UIntKind::U32),
        ElemType::Int(IntKind::I32),
        ElemType::Float(FloatKind::F32),
        ElemType::Float(FloatKind::Flex32),
        ElemType::Bool,
    ] {
        props.register_type_usage(ty, TypeUsage::all());
    }
    // Converted through cubecl's software polyfill, packed four to a u32.
    for ty in [FloatKind::E4M3, FloatKind::E5M2, FloatKind::UE8M0] {
        props.register_type_usage(ElemType::Float(ty), TypeUsage::Conversion);
    }
    // Every WGSL atomic on 32-bit integers (load/store, exchange, add/sub,
    // min/max, and/or/xor, compare-exchange): core WGSL, so claimed, where
    // cubecl-wgpu claims the first three only.
    for ty in [ElemType::Int(IntKind::I32), ElemType::UInt(UIntKind::U32)] {
        props.register_atomic_type_usage(Type::atomic(ty), AtomicUsage::all());
        props.register_shared_atomic_type_usage(Type::atomic(ty), AtomicUsage::all());
    }
    let atomic = AtomicUsage::LoadStore | AtomicUsage::Exchange | AtomicUsage::Add;
    if features.contains(wgpu::Features::SHADER_INT64) {
        props.register_type_usage(ElemType::Int(IntKind::I64), TypeUsage::all());
        props.register_type_usage(ElemType::UInt(UIntKind::U64), TypeUsage::all());
    }
    if features.contains(wgpu::Features::SHADER_F64) {
        props.register_type_usage(ElemType::Float(FloatKind::F64), TypeUsage::all());
    }
    if features.contains(wgpu::Features::SHADER_F16) {
        props.register_type_usage(ElemType::Float(FloatKind::F16), TypeUsage::all());
    }
    if features.contains(wgpu::Features::SHADER_FLOAT32_ATOMIC) {
        props.register_atomic_type_usage(Type::atomic(ElemType::Float(FloatKind::F32)), atomic);
    }
}

/// Plane operations, claimed only under [`PLANES_ENV`]`=on`, where the
/// device has subgroups, off CPU adapters (cubecl-wgpu's rule). Never
/// `Plane::Sync` (naga writes a workgroup barrier for a subgroup one) nor
/// `Plane::NonUniformControlFlow` (WGSL asks for subgroup operations in
/// uniform control flow): without it cubek's reductions mask idle planes
/// instead of ending them, which is right either way. On the H100 cubecl's
/// plane suites pass under the claim but for `plane_elect` (naga has no
/// `OpGroupNonUniformElect`) and a plane position in a 2-D workgroup (naga
/// refuses `subgroup_id` there); burn's training step is 3.5x slower with
/// it (docs/burn.md), hence off by default.
fn register_planes(props: &mut DeviceProperties, features: wgpu::Features, kind: wgpu::DeviceType) {
    let on = std::env::var(PLANES_ENV).is_ok_and(|v| v == "on");
    if on && features.contains(wgpu::Features::SUBGROUP) && kind != wgpu::DeviceType::Cpu {
        props.features.plane.insert(Plane::Ops);
    }
}

/// Every element type for every use, every atomic, every plane feature.
fn claim_everything(props: &mut DeviceProperties) {
    let floats = [
        FloatKind::F16,
        FloatKind::BF16,
        FloatKind::F32,
        FloatKind::F64,
        FloatKind::Flex32,
        FloatKind::TF32,
        FloatKind::E4M3,
        FloatKind::E5M2,
        FloatKind::UE8M0,
    ];
    let ints = [IntKind::I8, IntKind::I16, IntKind::I32, IntKind::I64];
    let uints = [UIntKind::U8, UIntKind::U16, UIntKind::U32, UIntKind::U64];
    let all: Vec<ElemType> = floats
        .into_iter()
        .map(ElemType::Float)
        .chain(ints.into_iter().map(ElemType::Int))
        .chain(uints.into_iter().map(ElemType::UInt))
        .collect();
    for ty in all {
        props.register_type_usage(ty, TypeUsage::all());
        props.register_atomic_type_usage(Type::atomic(ty), AtomicUsage::all());
        props.register_shared_atomic_type_usage(Type::atomic(ty), AtomicUsage::all());
    }
    props.register_address_type(AddressType::U64);
    props.features.plane = Plane::Ops | Plane::Sync | Plane::NonUniformControlFlow;
    let f = &mut props.features;
    f.cube_cluster = true;
    f.memory_reinterpret = true;
    f.alignment = true;
    f.copy_async = true;
    f.device_memory_scope = true;
    f.unaligned_io = true;
    f.tma = EnumSet::all();
    f.matmul.cmma_tensor_addressing = true;
    // Matrix-multiply shapes over the types tensor cores take: the sizes
    // cubecl's tests ask for (m, n in 8..32, k in 4..32).
    let mma_types: Vec<ElemType> = [
        FloatKind::F16,
        FloatKind::BF16,
        FloatKind::F32,
        FloatKind::TF32,
    ]
    .into_iter()
    .chain([FloatKind::E4M3, FloatKind::E5M2])
    .map(ElemType::Float)
    .chain([
        ElemType::Int(IntKind::I8),
        ElemType::UInt(UIntKind::U8),
        ElemType::Int(IntKind::I32),
    ])
    .collect();
    for &a_type in &mma_types {
        for &b_type in &mma_types {
            for &cd_type in &mma_types {
                for (m, n, k) in shapes() {
                    let config = MmaConfig {
                        a_type,
                        b_type,
                        cd_type,
                        m,
                        n,
                        k,
                    };
                    f.matmul.cmma.insert(config);
                    f.matmul.mma.insert(config);
                }
            }
        }
        f.matmul.ldmatrix.insert(a_type);
        f.matmul.stmatrix.insert(a_type);
    }
}

fn shapes() -> impl Iterator<Item = (u32, u32, u32)> {
    [8u32, 16, 32].into_iter().flat_map(|m| {
        [8u32, 16, 32]
            .into_iter()
            .flat_map(move |n| [4u32, 8, 16, 32].into_iter().map(move |k| (m, n, k)))
    })
}
