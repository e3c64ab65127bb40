//! Whole burn programs, the same source on either build.

pub mod mlp;
