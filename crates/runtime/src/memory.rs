//! Memory shapes and reports shared by the memory manager and the server.
//!
//! These are plain data: the configuration a server is built with, what the
//! device allows, and the report `memory_report` returns. The pools that act
//! on them live in `compute-memory`.

use crate::ServerError;

/// What the device allows, as the memory manager needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryDeviceProperties {
    /// Largest buffer the device creates (`max_buffer_size`).
    pub max_buffer_size: u64,
    /// Largest range a kernel binds (`max_storage_buffer_binding_size`);
    /// pages are no larger, so any slice of a page can be bound.
    pub max_binding_size: u64,
    /// Offset alignment of storage bindings
    /// (`min_storage_buffer_offset_alignment`): slices start on it.
    pub alignment: u64,
}

/// Whether new reservations may be served from memory kept for reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MemoryAllocationMode {
    /// Route by size through the configured pools.
    #[default]
    Auto,
    /// Serve from the persistent pool (pages reused by size class, four per
    /// doubling; nothing returned to the device): for graph capture and
    /// steady-state loops.
    Persistent,
}

/// The kind and shape of one pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// Many slices per page, best fit.
    Sliced {
        /// Bytes per page.
        page_size: u64,
        /// Largest slice the pool serves.
        max_slice: u64,
    },
    /// One slice per page, for sizes up to `max_slice`.
    Exclusive {
        /// Largest slice the pool serves.
        max_slice: u64,
    },
    /// Page reuse by size class, for [`MemoryAllocationMode::Persistent`].
    Persistent,
}

/// One pool of a custom configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryPoolOptions {
    /// Kind and shape.
    pub kind: PoolKind,
    /// Cap on bytes the pool may reserve from the device; `None` is no cap.
    pub max_reserved: Option<u64>,
}

/// How a server lays out device memory.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum MemoryConfiguration {
    /// Pools derived from the device's properties.
    #[default]
    Default,
    /// Every reservation gets a buffer of its own.
    ExclusivePages,
    /// These pools, in routing order: a reservation goes to the first pool
    /// whose `max_slice` fits it.
    Custom(Vec<MemoryPoolOptions>),
}

impl MemoryConfiguration {
    /// Checks the configuration against the device, with the reason when it
    /// cannot work.
    pub fn validate(&self, props: &MemoryDeviceProperties) -> Result<(), ServerError> {
        let MemoryConfiguration::Custom(pools) = self else {
            return Ok(());
        };
        let bad = |reason: String| Err(ServerError::InvalidConfiguration { reason });
        if pools.is_empty() {
            return bad("a custom configuration needs at least one pool".into());
        }
        for (i, pool) in pools.iter().enumerate() {
            match pool.kind {
                PoolKind::Sliced {
                    page_size,
                    max_slice,
                } => {
                    if page_size == 0 || max_slice == 0 {
                        return bad(format!(
                            "pool {i}: page size and max slice must be non-zero"
                        ));
                    }
                    if max_slice > page_size {
                        return bad(format!(
                            "pool {i}: max slice {max_slice} exceeds its page size {page_size}"
                        ));
                    }
                    if page_size > props.max_binding_size {
                        return bad(format!(
                            "pool {i}: page size {page_size} exceeds max_storage_buffer_binding_size {}",
                            props.max_binding_size
                        ));
                    }
                }
                PoolKind::Exclusive { max_slice } => {
                    if max_slice == 0 {
                        return bad(format!("pool {i}: max slice must be non-zero"));
                    }
                    if max_slice > props.max_buffer_size {
                        return bad(format!(
                            "pool {i}: max slice {max_slice} exceeds max_buffer_size {}",
                            props.max_buffer_size
                        ));
                    }
                }
                PoolKind::Persistent => {}
            }
        }
        Ok(())
    }
}

/// One pool's line of a [`StreamMemoryReport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolReport {
    /// Kind and shape.
    pub kind: PoolKind,
    /// Live slices.
    pub allocations: u64,
    /// Bytes the live slices were asked for.
    pub bytes_in_use: u64,
    /// Bytes reserved from the device (pages).
    pub bytes_reserved: u64,
    /// Bytes lost to alignment inside live slices.
    pub bytes_padding: u64,
    /// Pages (buffers) held now.
    pub pages: u64,
    /// High-water mark of `bytes_in_use`.
    pub peak_bytes_in_use: u64,
    /// High-water mark of `bytes_reserved`.
    pub peak_bytes_reserved: u64,
    /// High-water mark of `pages`.
    pub peak_pages: u64,
}

/// Every pool of a stream's main memory, in routing order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StreamMemoryReport {
    /// One line per pool.
    pub pools: Vec<PoolReport>,
}

impl StreamMemoryReport {
    /// Sum of `bytes_in_use` over the pools.
    pub fn bytes_in_use(&self) -> u64 {
        self.pools.iter().map(|p| p.bytes_in_use).sum()
    }

    /// Sum of `bytes_reserved` over the pools.
    pub fn bytes_reserved(&self) -> u64 {
        self.pools.iter().map(|p| p.bytes_reserved).sum()
    }

    /// Sum of `pages` over the pools.
    pub fn pages(&self) -> u64 {
        self.pools.iter().map(|p| p.pages).sum()
    }
}

/// One line: `in use 1.0 MiB in 3 allocations, reserved 8.0 MiB in 1 page
/// (peak in use 2.0 MiB)`, then one line per pool that holds anything.
impl std::fmt::Display for StreamMemoryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let allocations: u64 = self.pools.iter().map(|p| p.allocations).sum();
        let peak: u64 = self.pools.iter().map(|p| p.peak_bytes_in_use).sum();
        write!(
            f,
            "in use {} in {allocations} allocation(s), reserved {} in {} page(s) (peak in use {})",
            human(self.bytes_in_use()),
            human(self.bytes_reserved()),
            self.pages(),
            human(peak)
        )?;
        for p in self
            .pools
            .iter()
            .filter(|p| p.pages > 0 || p.allocations > 0)
        {
            let kind = match p.kind {
                PoolKind::Sliced { page_size, .. } => {
                    format!("sliced ({} pages)", human(page_size))
                }
                PoolKind::Exclusive { max_slice } => {
                    format!("exclusive (up to {})", human(max_slice))
                }
                PoolKind::Persistent => "persistent".to_string(),
            };
            write!(
                f,
                "\n  {kind}: {} in use, {} reserved, {} page(s)",
                human(p.bytes_in_use),
                human(p.bytes_reserved),
                p.pages
            )?;
        }
        Ok(())
    }
}

/// Bytes in B, KiB, MiB or GiB.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROPS: MemoryDeviceProperties = MemoryDeviceProperties {
        max_buffer_size: 1 << 30,
        max_binding_size: 1 << 27,
        alignment: 256,
    };

    #[test]
    fn custom_configurations_are_checked_against_the_device() {
        assert!(MemoryConfiguration::Default.validate(&PROPS).is_ok());
        let too_big = MemoryConfiguration::Custom(vec![MemoryPoolOptions {
            kind: PoolKind::Sliced {
                page_size: 1 << 28,
                max_slice: 1 << 20,
            },
            max_reserved: None,
        }]);
        let err = too_big
            .validate(&PROPS)
            .expect_err("page over binding size");
        assert!(err.to_string().contains("max_storage_buffer_binding_size"));
        assert!(
            MemoryConfiguration::Custom(vec![])
                .validate(&PROPS)
                .is_err()
        );
    }
}
