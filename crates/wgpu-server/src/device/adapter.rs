//! Choosing and opening an adapter.
//!
//! `WGPU_SERVER_ADAPTER` picks one: a backend name (`vulkan`, `gl`, `metal`,
//! `dx12`) or a case-insensitive substring of the adapter's name
//! (`WGPU_SERVER_ADAPTER=llvmpipe`, `WGPU_SERVER_ADAPTER=h200`). Without it
//! adapters are ranked most capable first (discrete, integrated, virtual,
//! other, CPU; Vulkan before the other backends on ties) and `DeviceId(n)`
//! is the n-th of that ranking. The device is requested with the adapter's
//! own limits and the optional features the server uses when present
//! (timestamp queries, subgroups, f16, i64/u64, f64), and on Vulkan with
//! `VK_EXT_external_memory_host` where the adapter has it
//! (`host_import.rs`).

use std::sync::Mutex;

use compute_runtime::{AdapterSummary, DeviceId, MemoryDeviceProperties, ServerError};

/// The environment variable that picks an adapter.
pub const ADAPTER_ENV: &str = "WGPU_SERVER_ADAPTER";

/// Features the server asks for when the adapter has them.
pub const OPTIONAL_FEATURES: wgpu::Features = wgpu::Features::TIMESTAMP_QUERY
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
    .union(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES)
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::SHADER_INT64)
    .union(wgpu::Features::SHADER_F64)
    .union(wgpu::Features::SHADER_FLOAT32_ATOMIC)
    .union(wgpu::Features::SHADER_INT64_ATOMIC_MIN_MAX)
    .union(wgpu::Features::SHADER_INT64_ATOMIC_ALL_OPS);

fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let ty = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    };
    (ty, backend)
}

fn matches(info: &wgpu::AdapterInfo, wanted: &str) -> bool {
    let wanted = wanted.to_lowercase();
    let backend = format!("{:?}", info.backend).to_lowercase();
    backend == wanted || info.name.to_lowercase().contains(&wanted)
}

/// A summary of an adapter, for reports and the demo.
pub fn summary(info: &wgpu::AdapterInfo) -> AdapterSummary {
    AdapterSummary {
        name: info.name.clone(),
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        driver: info.driver.clone(),
        driver_info: info.driver_info.clone(),
    }
}

/// Every adapter of `instance`, most capable first, filtered by
/// `WGPU_SERVER_ADAPTER`.
pub fn ranked_adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    // Unresolved at once only on backends the server does not run on:
    // then no adapter is found, and the caller says so.
    let adapters = super::faults::ready(
        instance.enumerate_adapters(wgpu::Backends::all()),
        "enumerating adapters",
    )
    .unwrap_or_default();
    ranked(adapters)
}

/// `adapters` filtered by `WGPU_SERVER_ADAPTER`, most capable first.
fn ranked(mut adapters: Vec<wgpu::Adapter>) -> Vec<wgpu::Adapter> {
    if let Ok(wanted) = std::env::var(ADAPTER_ENV)
        && !wanted.trim().is_empty()
    {
        adapters.retain(|a| matches(&a.get_info(), wanted.trim()));
    }
    adapters.sort_by_key(|a| rank(&a.get_info()));
    adapters
}

/// The adapters of the process's instance of `backends`, enumerated once
/// and kept for the life of the process, ranked and filtered per call.
///
/// Why once: wgpu-hal's GL adapters all share their instance's one EGL
/// context, each adapter behind a lock of its own. Devices opened from two
/// enumerations of one GL adapter made that context current on two threads
/// at once (`eglMakeCurrent` failing with `EGL_BAD_ACCESS`, which wgpu-hal
/// unwraps: a panic on the poller thread, seen with several servers of the
/// GL fallback at work). One enumeration gives every device of an adapter
/// the same lock.
fn enumerated(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    static ADAPTERS: Mutex<Vec<(wgpu::Backends, Vec<wgpu::Adapter>)>> = Mutex::new(Vec::new());
    let mut made = ADAPTERS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, adapters)) = made.iter().find(|(b, _)| *b == backends) {
        return ranked(adapters.clone());
    }
    let adapters = super::faults::ready(
        instance(backends).enumerate_adapters(wgpu::Backends::all()),
        "enumerating adapters",
    )
    .unwrap_or_default();
    made.push((backends, adapters.clone()));
    ranked(adapters)
}

/// The process's instance of `backends` (narrowed by `WGPU_BACKEND`), flags
/// from the environment: made on first use and kept for the life of the
/// process, shared by every server.
///
/// Why it is never dropped: dropping the last instance (with the adapters
/// and devices made from it) has the Vulkan loader unload the driver, and
/// NVIDIA's driver (seen with 580.159.04 on an H200) leaves a thread-exit
/// destructor behind in the code it unloaded. Any thread that had used the
/// driver then jumps into unmapped memory when it ends: a SIGSEGV after
/// the work is done, on whichever thread dropped the last server, or a
/// test thread. A driver loaded once and never unloaded has no such exit.
pub fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    static INSTANCES: Mutex<Vec<(wgpu::Backends, wgpu::Instance)>> = Mutex::new(Vec::new());
    let backends = backends & wgpu::Backends::all().with_env();
    let mut made = INSTANCES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, instance)) = made.iter().find(|(b, _)| *b == backends) {
        return instance.clone();
    }
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = wgpu::InstanceFlags::from_build_config().with_env();
    let instance = wgpu::Instance::new(desc);
    made.push((backends, instance.clone()));
    instance
}

/// The adapters the server chooses from, ranked.
///
/// The primary backends (Vulkan, Metal, DX12) are asked first; GL only when
/// none of them has an adapter. GL is the fallback because it is the weakest
/// compute backend (on some drivers a GL 3.3 context with no compute at
/// all), and because initializing it probes the windowing system.
pub fn adapters() -> Vec<wgpu::Adapter> {
    let _one_at_a_time = driver_lock();
    enumerate()
}

/// Held while the driver enumerates adapters or creates a device (see
/// [`open`]).
fn driver_lock() -> std::sync::MutexGuard<'static, ()> {
    static DRIVER: Mutex<()> = Mutex::new(());
    DRIVER.lock().unwrap_or_else(|e| e.into_inner())
}

/// [`adapters`], with the driver lock held by the caller.
fn enumerate() -> Vec<wgpu::Adapter> {
    let primary = enumerated(wgpu::Backends::PRIMARY);
    if !primary.is_empty() {
        return primary;
    }
    enumerated(wgpu::Backends::all())
}

/// Opens device `id`: the adapter, its device and queue.
///
/// One thread at a time in the process: NVIDIA's Vulkan driver races
/// inside itself when threads create devices at once (upstream reports:
/// gfx-rs/wgpu#10010, #10234, kvark/blade#336, all parallel test
/// harnesses). On the H200 the GPU test binary on 4 threads died with
/// SIGSEGV 0 s after it started, while its first tests opened their
/// devices together, in 1 of 12 runs (`docs/bench/h200-tests.txt`).
/// Opening is rare (the pool keeps devices), so the lock costs nothing
/// that matters.
///
/// With `cooperative`, an adapter that has cooperative matrices is asked
/// for them too (an experimental wgpu feature); if that request fails, the
/// device is opened without them.
pub fn open(
    id: DeviceId,
    cooperative: bool,
) -> Result<(wgpu::Adapter, wgpu::Device, wgpu::Queue), ServerError> {
    let _one_at_a_time = driver_lock();
    let adapters = enumerate();
    let count = adapters.len();
    let adapter = usize::try_from(id.0)
        .ok()
        .and_then(|i| adapters.into_iter().nth(i))
        .ok_or_else(|| ServerError::DeviceLost {
            reason: if count == 0 {
                format!(
                    "no wgpu adapter found{}; on Debian/Ubuntu run `cargo xtask setup` \
                     (installs Mesa's lavapipe Vulkan driver and the Vulkan loader)",
                    std::env::var(ADAPTER_ENV)
                        .map(|v| format!(" matching {ADAPTER_ENV}={v}"))
                        .unwrap_or_default()
                )
            } else {
                format!("device {id} requested, but only {count} adapter(s) found")
            },
        })?;
    let features = adapter.features() & OPTIONAL_FEATURES;
    let matrices = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
    if cooperative && adapter.features().contains(matrices) {
        match request(&adapter, features | matrices, true)? {
            Ok((device, queue)) => return Ok((adapter, device, queue)),
            Err(e) => tracing::warn!(
                error = %e,
                "the adapter lists cooperative matrices but refused a device with them; \
                 opening it without"
            ),
        }
    }
    let (device, queue) =
        request(&adapter, features, false)?.map_err(|e| ServerError::DeviceLost {
            reason: format!("request_device failed: {e}"),
        })?;
    Ok((adapter, device, queue))
}

/// A device of `adapter` with `features`, experimental ones allowed with
/// `experimental`: the outer error is the wait for it, the inner wgpu's
/// refusal.
fn request(
    adapter: &wgpu::Adapter,
    features: wgpu::Features,
    experimental: bool,
) -> Result<Result<(wgpu::Device, wgpu::Queue), wgpu::RequestDeviceError>, ServerError> {
    let experimental_features = if experimental {
        // SAFETY: wgpu asks its caller to accept that experimental features
        // may have bugs. The only one requested is cooperative matrices,
        // used only by IR kernels whose every tile access the compiler
        // guards (`compute-wgsl`'s `ir/matrix.rs`).
        unsafe { wgpu::ExperimentalFeatures::enabled() }
    } else {
        wgpu::ExperimentalFeatures::disabled()
    };
    let desc = wgpu::DeviceDescriptor {
        label: Some("wgpu-server"),
        required_features: features,
        required_limits: adapter.limits(),
        experimental_features,
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    };
    if let Some(opened) = super::host_import::request_importing(adapter, &desc) {
        return Ok(opened);
    }
    super::faults::ready(adapter.request_device(&desc), "requesting a device")
}

/// The memory properties of a device, from its limits.
pub fn memory_properties(limits: &wgpu::Limits) -> MemoryDeviceProperties {
    MemoryDeviceProperties {
        max_buffer_size: limits.max_buffer_size,
        max_binding_size: limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size),
        alignment: u64::from(limits.min_storage_buffer_offset_alignment).max(4),
    }
}
