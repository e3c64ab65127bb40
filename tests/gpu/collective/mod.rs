//! Collectives across servers on separate devices of one adapter.

mod group;
mod mismatch;
mod old;
mod ordering;
mod poison;
