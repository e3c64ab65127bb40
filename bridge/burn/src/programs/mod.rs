//! Whole burn programs, the same source on either build.

pub mod bench;
pub mod data_parallel;
pub mod mlp;
pub mod transformer;
