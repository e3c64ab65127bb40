//! Collectives across servers on separate devices of one adapter.

mod group;
mod old;
mod ordering;
