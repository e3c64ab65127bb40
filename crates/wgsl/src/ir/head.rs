//! The declarations of an emitted kernel: enables, storage buffers, the
//! scalar block, workgroup arrays, the bounds-report slot, and the entry
//! point's signature (its builtins).

use std::fmt::Write as _;

use compute_ir::ir::{Access, KernelDef};

use super::emit::ENTRY_POINT;
use crate::{REPORT_GROUP, REPORT_PRESENT_BIT};

/// Everything before the entry point's body.
pub(super) fn head(def: &KernelDef, reports: bool, subgroups: bool) -> String {
    let mut head = String::new();
    // Nor for subgroups: naga 30 implements the builtins and functions
    // behind its SUBGROUP capability but refuses `enable subgroups;` as a
    // not-yet-implemented extension.
    // naga needs no `enable` for i64, u64 or f64 (only its SHADER_INT64 and
    // FLOAT64 validation capabilities, which wgpu derives from the device's
    // features).
    if def.uses_f16() {
        head.push_str("enable f16;\n");
    }
    if def.uses_matrices() {
        // naga's uniformity analysis counts every value read from a function
        // variable as non-uniform (literals, loop indices: how this emitter
        // binds them), so the guard of a tile access would fail its
        // requirement that cooperative operations run in uniform control
        // flow; the IR makes the guard uniform instead (index and stride
        // the same on a whole subgroup, checked by the interpreter). naga 30
        // files that requirement under the `derivative_uniformity` rule,
        // which is what this turns off.
        head.push_str("enable wgpu_cooperative_matrix;\ndiagnostic(off, derivative_uniformity);\n");
    }
    head.push('\n');
    for (i, b) in def.buffers.iter().enumerate() {
        let elem = if b.atomic {
            format!("atomic<{}>", b.elem.wgsl())
        } else {
            b.ty().to_string()
        };
        // Atomic buffers are always declared `ReadWrite` by the IR.
        let access = if b.access == Access::ReadWrite {
            "read_write"
        } else {
            "read"
        };
        let _ = writeln!(
            head,
            "@group(0) @binding({i}) var<storage, {access}> b{i}: array<{elem}>;"
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
        let elem = if s.atomic {
            format!("atomic<{}>", s.elem.wgsl())
        } else {
            s.ty().to_string()
        };
        let _ = writeln!(head, "var<workgroup> sh{i}: array<{elem}, {}>;", s.len);
    }
    if reports {
        head.push_str(&report_decl());
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
        if def.uses_subgroups_on(subgroups) {
            "    @builtin(subgroup_invocation_id) sgid: u32,\n    \
             @builtin(subgroup_size) sgsize: u32,\n    \
             @builtin(subgroup_id) sgindex: u32,\n"
        } else {
            ""
        }
    );
    if def.uses_subgroups_on(subgroups) {
        // The subgroups that cover the workgroup's invocations, worked out
        // rather than read from `num_subgroups`: lavapipe (Mesa 22.3)
        // answers the builtin rounded down (1 for a workgroup of 10 in
        // subgroups of 8, whose `subgroup_id` reaches 1), and the IR
        // defines it as the interpreter counts it.
        let _ = writeln!(
            head,
            "    let nsg: u32 = ({}u + sgsize - 1u) / sgsize;",
            x * y * z
        );
    }
    head
}

/// The report slot, the invocation's own record of its accesses out of
/// bounds (its count and its first: array, index, length) and the two
/// functions over them: `note_out_of_bounds` counts one (where a guard
/// branches anyway: matrix tiles), `report_out_of_bounds` adds the
/// invocation's count to the slot's and, where it is the first to, records
/// its first access (the array with [`REPORT_PRESENT_BIT`], so a record is
/// seen even if the count wraps). Checks note accesses without branching
/// and the record reaches the slot only where the invocation ends
/// (`report.rs`): a check adds no branch with side effects to the
/// kernel's control flow, whose convergence subgroup operations depend on.
fn report_decl() -> String {
    format!(
        "\n@group({REPORT_GROUP}) @binding(0) var<storage, read_write> bounds_report: \
         array<atomic<u32>, 4>;\n\
         var<private> oob_count: u32;\n\
         var<private> oob_first: vec3<u32>;\n\n\
         fn note_out_of_bounds(array: u32, index: u32, len: u32) {{\n    \
         if oob_count == 0u {{ oob_first = vec3<u32>(array, index, len); }}\n    \
         oob_count = oob_count + 1u;\n}}\n\n\
         fn report_out_of_bounds() {{\n    \
         if oob_count != 0u && atomicAdd(&bounds_report[0], oob_count) == 0u {{\n        \
         atomicStore(&bounds_report[1], oob_first.x | {REPORT_PRESENT_BIT}u);\n        \
         atomicStore(&bounds_report[2], oob_first.y);\n        \
         atomicStore(&bounds_report[3], oob_first.z);\n    }}\n}}\n"
    )
}
