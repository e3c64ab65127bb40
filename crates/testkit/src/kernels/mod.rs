//! Reference kernels written with the builder: the ones the tests and the
//! benchmarks share (elementwise add, workgroup reduction, atomic histogram,
//! tiled matmul). Each function documents its bindings and scalars.

mod add;
mod histogram;
mod matmul;
mod matmul_coop;
mod matmul_regs;
mod reduce;
mod rows;
mod scan;
mod scan_single;
mod sort;
mod uniform;

pub use add::{elementwise_add, elementwise_add_vec};
pub use histogram::{BYTE_HISTOGRAM_WORKGROUP, byte_histogram, byte_histogram_lanes, histogram};
pub use matmul::{MATMUL_TILE, tiled_matmul};
pub use matmul_coop::{COOP_MATMUL_K_STEP, COOP_MATMUL_TILE, coop_matmul};
pub use matmul_regs::{REGISTER_MATMUL_K_STEP, REGISTER_MATMUL_TILE, register_matmul};
pub use reduce::workgroup_sum;
pub use rows::{ROW_WORKGROUP, layernorm, softmax};
pub use scan::{SCAN_BLOCK, SCAN_WORKGROUP, scan_down, scan_reduce, scan_spine};
pub use scan_single::{
    SCAN_SINGLE_WORKGROUP, scan_single_pass, scan_single_state_words, scan_single_tile,
};
pub use sort::{RADIX_BITS, RADIX_BLOCK, radix_count, radix_scatter};
pub use uniform::{UNIFORM_ROUNDS_WORKGROUP, uniform_rounds};
