//! Timestamp pairs: the one piece every timing feature is made of.
//!
//! A profile window, an at-launch window, a batch bracket and a timeline
//! entry are each two timestamp queries resolved into a 16-byte buffer and
//! copied to a mapped readback. This module owns that shape and the decoding
//! of what comes back, so the four features differ only in *where* their
//! two stamps are written.

use std::time::Duration;

/// Bytes two resolved timestamps take.
pub(crate) const PAIR_BYTES: u64 = 16;

/// Two timestamp queries and the buffer they resolve into.
#[derive(Debug)]
pub(crate) struct StampPair {
    pub query_set: wgpu::QuerySet,
    pub resolve: wgpu::Buffer,
}

impl StampPair {
    pub fn new(device: &wgpu::Device, label: &str) -> Self {
        Self {
            query_set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some(label),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: PAIR_BYTES,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
        }
    }

    /// Encodes the resolve of both stamps and their copy to `readback` at
    /// `offset`.
    pub fn copy_to(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        readback: &wgpu::Buffer,
        offset: u64,
    ) {
        encoder.resolve_query_set(&self.query_set, 0..2, &self.resolve, 0);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, readback, offset, PAIR_BYTES);
    }
}

/// Where a stamped launch writes its two timestamps: queries `base` and
/// `base + 1` of `query_set`.
#[derive(Debug, Clone)]
pub(crate) struct StampAt {
    pub query_set: wgpu::QuerySet,
    pub base: u32,
}

/// A `MAP_READ` buffer of `size` bytes for resolved stamps.
pub(crate) fn readback(device: &wgpu::Device, size: u64, label: &str) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The two stamps of the pair at `bytes[at..at + 16]`, in ticks.
pub(crate) fn pair_at(bytes: &[u8], at: usize) -> Option<(u64, u64)> {
    let stamp = |i: usize| -> Option<u64> {
        let b: [u8; 8] = bytes.get(i..i + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(b))
    };
    Some((stamp(at)?, stamp(at + 8)?))
}

/// Nanoseconds from `start` to `end` ticks; never negative (a stamp pair
/// may read backwards across a clock reset).
pub(crate) fn ticks_to_ns(start: u64, end: u64, period_ns: f32) -> f64 {
    end.saturating_sub(start) as f64 * f64::from(period_ns)
}

/// The duration between the pair at the start of `bytes`.
pub(crate) fn duration(bytes: &[u8], period_ns: f32) -> Option<Duration> {
    let (start, end) = pair_at(bytes, 0)?;
    Some(Duration::from_nanos(
        ticks_to_ns(start, end, period_ns) as u64
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_scale_by_the_period_and_never_go_negative() {
        let mut b = Vec::new();
        b.extend_from_slice(&100u64.to_le_bytes());
        b.extend_from_slice(&350u64.to_le_bytes());
        assert_eq!(duration(&b, 2.0), Some(Duration::from_nanos(500)));
        let mut r = Vec::new();
        r.extend_from_slice(&350u64.to_le_bytes());
        r.extend_from_slice(&100u64.to_le_bytes());
        assert_eq!(duration(&r, 1.0), Some(Duration::ZERO));
        assert!(duration(&b[..8], 1.0).is_none());
        assert_eq!(pair_at(&[b.clone(), b].concat(), 16), Some((100, 350)));
    }
}
