//! The fold kernels of device collectives: `dst = ((x0 op x1) op x2) ...`
//! over the ranks' pieces in rank order, the host's order
//! (`compute_collective::reduce`), so both paths give the same bits.
//!
//! One kernel reads up to [`INPUTS`] ranks' pieces (and, after the first
//! pass, `dst` itself as the accumulator), so any rank count takes
//! `ceil(ranks / INPUTS)` passes without passing the per-stage limit of
//! storage buffers. Elements are 32-bit words: `u32`, `i32` (wrapping, as
//! the host's) and `f32`. Float `Min`/`Max` compare ordered integer keys
//! (exact on every device, denormals too, NaN as the host's canonical
//! NaN, equal zeros keeping the accumulator); a float `Sum` adds tiny
//! operands scaled (`FADD`), so it is the host's on devices that flush
//! denormals too; a float `Prod` is the device's multiply, which equals
//! the host's only where the device keeps denormals
//! (`device_call::exact_floats` measures that at `comm_init`; a group
//! whose devices flush them multiplies floats on the host).
//! What the device path does not fold (64- and 16-bit types, `Mean`) goes
//! through host staging (`device_call::eligible`).

use std::sync::Mutex;

use compute_runtime::{DType, ReduceOp, Reduction, ServerError};
use hashbrown::HashMap;

use crate::device::faults::scoped;

/// Ranks' pieces one pass reads.
pub(crate) const INPUTS: usize = 4;

/// Threads per workgroup.
const GROUP: u64 = 256;

/// Workgroups one pass launches at most (each thread strides).
const MAX_GROUPS: u64 = 8192;

/// A binding's bytes: `len` bytes of `buffer` from `offset`.
#[derive(Clone, Debug)]
pub(crate) struct Span {
    pub buffer: wgpu::Buffer,
    pub offset: u64,
    pub len: u64,
}

/// Whether the fold kernels cover `reduction` (floats' sums and products
/// only where `exact_floats`).
pub(crate) fn covers(reduction: Reduction, exact_floats: bool) -> bool {
    match (reduction.dtype, reduction.op) {
        (DType::U32 | DType::I32, op) => op != ReduceOp::Mean,
        (DType::F32, ReduceOp::Min | ReduceOp::Max) => true,
        (DType::F32, ReduceOp::Sum) => true,
        (DType::F32, ReduceOp::Prod) => exact_floats,
        _ => false,
    }
}

/// One device's fold pipelines (and the shifting copy), made as calls
/// need them.
#[derive(Debug)]
pub(crate) struct Folds {
    device: wgpu::Device,
    pipelines: Mutex<HashMap<(Reduction, usize, u32), wgpu::ComputePipeline>>,
    shift: Mutex<Option<wgpu::ComputePipeline>>,
}

/// Copies words that start mid-word in the source: word `i` of `dst` is
/// bytes `4 i + shift ..` of the source from word `src_at` (`shift` in
/// 1..=3; a copy command moves whole words only).
const SHIFT: &str = "struct Params { words: u32, src_at: u32, shift: u32, pad: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;
@group(0) @binding(2) var<storage, read> src: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * 256u;
    let low = 8u * params.shift;
    for (var i = id.x; i < params.words; i = i + stride) {
        let at = params.src_at + i;
        dst[i] = (src[at] >> low) | (src[at + 1u] << (32u - low));
    }
}
";

impl Folds {
    pub fn new(device: wgpu::Device) -> Self {
        Folds {
            device,
            pipelines: Mutex::new(HashMap::new()),
            shift: Mutex::new(None),
        }
    }

    fn shift_pipeline(&self) -> Result<wgpu::ComputePipeline, ServerError> {
        let mut shift = self.shift.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = shift.as_ref() {
            return Ok(p.clone());
        }
        let pipeline = self.compile(SHIFT.to_string(), "collective shifted copy")?;
        *shift = Some(pipeline.clone());
        Ok(pipeline)
    }

    fn compile(&self, source: String, label: &str) -> Result<wgpu::ComputePipeline, ServerError> {
        let device = &self.device;
        scoped(device, || {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        })
    }

    /// Records one pass of `pipeline` over `entries` (group 0), `groups`
    /// workgroups along x.
    fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        pipeline: &wgpu::ComputePipeline,
        entries: &[wgpu::BindGroupEntry<'_>],
        groups: u32,
    ) -> Result<(), ServerError> {
        let device = &self.device;
        let group = scoped(device, || {
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("collective kernel"),
                layout: &pipeline.get_bind_group_layout(0),
                entries,
            })
        })?;
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("collective kernel"),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(groups, 1, 1);
        Ok(())
    }

    /// A uniform buffer of four words.
    fn params(&self, words: [u32; 4]) -> Result<wgpu::Buffer, ServerError> {
        let params = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("collective kernel params"),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM,
            mapped_at_creation: true,
        });
        {
            let mut view =
                params
                    .slice(..)
                    .get_mapped_range_mut()
                    .map_err(|e| ServerError::OutOfMemory {
                        size: 16,
                        reason: format!("a collective kernel's parameters: {e}"),
                    })?;
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            view.copy_from_slice(&bytes);
        }
        params.unmap();
        Ok(params)
    }

    /// Records a copy of `dst.len` bytes (whole words) from byte `from` of
    /// `src`, which need not be a word's start, into `dst` (at an offset
    /// the device can bind).
    pub fn encode_copy_from(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        from: u64,
        dst: &Span,
    ) -> Result<(), ServerError> {
        if from.is_multiple_of(4) {
            encoder.copy_buffer_to_buffer(src, from, &dst.buffer, dst.offset, dst.len);
            return Ok(());
        }
        let device = &self.device;
        let align = u64::from(device.limits().min_storage_buffer_offset_alignment.max(4));
        let base = from - from % align;
        // Through the word holding the last byte: the kernel reads one word
        // past each it writes.
        let end = (from + dst.len).next_multiple_of(4).min(src.size());
        let words = dst.len / 4;
        let src_at = ((from - base) / 4) as u32;
        let params = self.params([words as u32, src_at, (from % 4) as u32, 0])?;
        let pipeline = self.shift_pipeline()?;
        let entries = [
            entry(0, &dst.buffer, dst.offset, dst.len),
            wgpu::BindGroupEntry {
                binding: 1,
                resource: params.as_entire_binding(),
            },
            entry(2, src, base, end - base),
        ];
        let groups = words.div_ceil(GROUP).clamp(1, MAX_GROUPS) as u32;
        self.dispatch(encoder, &pipeline, &entries, groups)
    }

    fn pipeline(
        &self,
        reduction: Reduction,
        inputs: usize,
        lanes: u32,
    ) -> Result<wgpu::ComputePipeline, ServerError> {
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pipelines.get(&(reduction, inputs, lanes)) {
            return Ok(p.clone());
        }
        let source = wgsl(reduction, inputs, lanes).ok_or_else(|| {
            ServerError::unsupported(
                "a collective's fold on the device",
                "no kernel for this element type and operation",
            )
        })?;
        let pipeline = self.compile(source, "collective fold")?;
        pipelines.insert((reduction, inputs, lanes), pipeline.clone());
        Ok(pipeline)
    }

    /// Records the passes that fold `inputs` (one span per rank, in rank
    /// order, each `dst.len` bytes at an offset the device can bind) into
    /// `dst`.
    pub fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        reduction: Reduction,
        inputs: &[Span],
        dst: &Span,
    ) -> Result<(), ServerError> {
        let device = &self.device;
        let align = u64::from(device.limits().min_storage_buffer_offset_alignment.max(4));
        let base = dst.offset - dst.offset % align;
        // Four words per invocation where `dst` and the length allow (the
        // inputs start at bindable offsets, multiples of 16).
        let lanes: u64 = match (dst.offset - base).is_multiple_of(16) && dst.len.is_multiple_of(16)
        {
            true => 4,
            false => 1,
        };
        let dst_at = u32::try_from((dst.offset - base) / 4 / lanes).unwrap_or(u32::MAX);
        let count = dst.len / 4 / lanes;
        let dst_len = (dst.offset - base + dst.len).next_multiple_of(4 * lanes);
        let groups = count.div_ceil(GROUP).clamp(1, MAX_GROUPS) as u32;
        for (pass, chunk) in inputs.chunks(INPUTS).enumerate() {
            let pipeline = self.pipeline(reduction, chunk.len(), lanes as u32)?;
            let params = self.params([count as u32, dst_at, u32::from(pass == 0), 0])?;
            let mut entries = vec![
                entry(0, &dst.buffer, base, dst_len),
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: params.as_entire_binding(),
                },
            ];
            for (i, x) in chunk.iter().enumerate() {
                entries.push(entry(2 + i as u32, &x.buffer, x.offset, dst.len));
            }
            self.dispatch(encoder, &pipeline, &entries, groups)?;
        }
        Ok(())
    }
}

fn entry(binding: u32, buffer: &wgpu::Buffer, offset: u64, len: u64) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset,
            size: std::num::NonZeroU64::new(len.max(4)),
        }),
    }
}

/// The combine of two elements' bits, as WGSL.
fn combine(reduction: Reduction) -> Option<&'static str> {
    Some(match (reduction.dtype, reduction.op) {
        (DType::U32, ReduceOp::Sum) => "return a + b;",
        (DType::U32, ReduceOp::Prod) => "return a * b;",
        (DType::U32, ReduceOp::Min) => "return min(a, b);",
        (DType::U32, ReduceOp::Max) => "return max(a, b);",
        (DType::I32, ReduceOp::Sum) => "return bitcast<u32>(bitcast<i32>(a) + bitcast<i32>(b));",
        (DType::I32, ReduceOp::Prod) => "return bitcast<u32>(bitcast<i32>(a) * bitcast<i32>(b));",
        (DType::I32, ReduceOp::Min) => {
            "return bitcast<u32>(min(bitcast<i32>(a), bitcast<i32>(b)));"
        }
        (DType::I32, ReduceOp::Max) => {
            "return bitcast<u32>(max(bitcast<i32>(a), bitcast<i32>(b)));"
        }
        (DType::F32, ReduceOp::Sum) => "return fadd(a, b);",
        (DType::F32, ReduceOp::Prod) => "return bitcast<u32>(bitcast<f32>(a) * bitcast<f32>(b));",
        (DType::F32, ReduceOp::Min) => {
            "if nan(a) || nan(b) { return 0x7fc00000u; }\n    \
             if ((a | b) & 0x7fffffffu) == 0u { return a; }\n    \
             return select(a, b, key(b) < key(a));"
        }
        (DType::F32, ReduceOp::Max) => {
            "if nan(a) || nan(b) { return 0x7fc00000u; }\n    \
             if ((a | b) & 0x7fffffffu) == 0u { return a; }\n    \
             return select(a, b, key(b) > key(a));"
        }
        _ => return None,
    })
}

/// An `f32` sum with the host's bits on a device that flushes denormals
/// (on the H100 the float probe, then of sums and products, did not match
/// the host's bits): where an
/// operand is 2^-100 or more (exponent field 27), the device's add is the
/// host's (a denormal other operand is under an eighth of its ulp, and the
/// sum cannot be a denormal); else both operands are scaled by 2^64 (from
/// their bits: a denormal's mantissa times 2^-85), added (exactly where
/// the sum is a denormal, rounded as the host rounds where it is not), and
/// scaled back from the bits.
const FADD: &str = "fn up(x: u32) -> f32 {
    if (x & 0x7f800000u) == 0u {
        let m = f32(x & 0x7fffffu) * bitcast<f32>(0x15000000u);
        return select(m, -m, (x & 0x80000000u) != 0u);
    }
    return bitcast<f32>(x + 0x20000000u);
}
fn down(s: f32) -> u32 {
    let bits = bitcast<u32>(s);
    if (bits & 0x7f800000u) >= 0x20800000u { return bits - 0x20000000u; }
    return (bits & 0x80000000u) | u32(abs(s) * bitcast<f32>(0x6a000000u));
}
fn fadd(a: u32, b: u32) -> u32 {
    if max(a & 0x7f800000u, b & 0x7f800000u) >= 0x0d800000u {
        return bitcast<u32>(bitcast<f32>(a) + bitcast<f32>(b));
    }
    return down(up(a) + up(b));
}
";

/// The fold kernel of `reduction` over `inputs` ranks' pieces, `lanes`
/// (1 or 4) words per element of its arrays.
fn wgsl(reduction: Reduction, inputs: usize, lanes: u32) -> Option<String> {
    let body = combine(reduction)?;
    let word = if lanes == 4 { "vec4<u32>" } else { "u32" };
    let mut s = format!(
        "struct Params {{ count: u32, dst_at: u32, first: u32, pad: u32 }}\n\
         @group(0) @binding(0) var<storage, read_write> dst: array<{word}>;\n\
         @group(0) @binding(1) var<uniform> params: Params;\n"
    );
    for i in 0..inputs {
        s += &format!(
            "@group(0) @binding({}) var<storage, read> x{i}: array<{word}>;\n",
            2 + i
        );
    }
    s += "fn nan(x: u32) -> bool { return (x & 0x7fffffffu) > 0x7f800000u; }\n\
          // Orders floats' bits as their values: negatives reversed below positives.\n\
          fn key(x: u32) -> u32 { return select(~x, x | 0x80000000u, (x & 0x80000000u) == 0u); }\n";
    s += FADD;
    s += &format!("fn comb1(a: u32, b: u32) -> u32 {{\n    {body}\n}}\n");
    s += &match lanes {
        4 => format!(
            "fn comb(a: {word}, b: {word}) -> {word} {{\n    \
             return vec4<u32>(comb1(a.x, b.x), comb1(a.y, b.y), comb1(a.z, b.z), comb1(a.w, b.w));\n}}\n"
        ),
        _ => "fn comb(a: u32, b: u32) -> u32 { return comb1(a, b); }\n".to_string(),
    };
    s += "@compute @workgroup_size(256)\n\
          fn main(@builtin(global_invocation_id) id: vec3<u32>, \
          @builtin(num_workgroups) groups: vec3<u32>) {\n\
          \x20   let stride = groups.x * 256u;\n\
          \x20   for (var i = id.x; i < params.count; i = i + stride) {\n\
          \x20       var acc = x0[i];\n\
          \x20       if params.first == 0u { acc = comb(dst[params.dst_at + i], acc); }\n";
    for i in 1..inputs {
        s += &format!("        acc = comb(acc, x{i}[i]);\n");
    }
    s += "        dst[params.dst_at + i] = acc;\n    }\n}\n";
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_the_device_path_covers_passes_naga() {
        let dtypes = [DType::U32, DType::I32, DType::F32, DType::F16, DType::I64];
        for dtype in dtypes {
            for op in ReduceOp::ALL {
                let r = Reduction::new(op, dtype);
                assert_eq!(combine(r).is_some(), covers(r, true), "{r:?}");
                for (inputs, lanes) in (1..=INPUTS).flat_map(|i| [(i, 1), (i, 4)]) {
                    let Some(src) = wgsl(r, inputs, lanes) else {
                        continue;
                    };
                    let module = naga::front::wgsl::parse_str(&src)
                        .unwrap_or_else(|e| panic!("{r:?} x{inputs}: {e}\n{src}"));
                    naga::valid::Validator::new(
                        naga::valid::ValidationFlags::all(),
                        naga::valid::Capabilities::empty(),
                    )
                    .validate(&module)
                    .unwrap_or_else(|e| panic!("{r:?} x{inputs}: {e:?}"));
                }
            }
        }
    }
}
