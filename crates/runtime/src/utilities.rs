//! What a server shares with its clients: the logger and facts about the
//! device.
//!
//! The logger sends events through `tracing` under targets of the form
//! `compute::<category>`, so any subscriber can route them. Each category has
//! its own level, set by code or by the `COMPUTE_LOG` environment variable
//! (`COMPUTE_LOG=full`, or per category: `COMPUTE_LOG=compile=full,launch=basic`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::{MemoryDeviceProperties, TimingMethod};

/// How much a category logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum LogLevel {
    /// Nothing.
    #[default]
    Off = 0,
    /// One line per event.
    Basic = 1,
    /// Events with their details (sources, sizes).
    Full = 2,
}

impl LogLevel {
    fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "off" | "0" => Some(LogLevel::Off),
            "basic" | "1" | "info" => Some(LogLevel::Basic),
            "full" | "2" | "debug" | "trace" => Some(LogLevel::Full),
            _ => None,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            0 => LogLevel::Off,
            1 => LogLevel::Basic,
            _ => LogLevel::Full,
        }
    }
}

/// What the server logs about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogCategory {
    /// Kernel compilations and cache misses.
    Compile = 0,
    /// Launches.
    Launch = 1,
    /// Reservations, frees, cleanups.
    Memory = 2,
    /// Syncs and the GPU time they complete.
    Sync = 3,
    /// Profile windows.
    Profile = 4,
    /// Collective calls: where each one's data moves, and why.
    Collective = 5,
}

const CATEGORIES: [(&str, LogCategory); 6] = [
    ("compile", LogCategory::Compile),
    ("launch", LogCategory::Launch),
    ("memory", LogCategory::Memory),
    ("sync", LogCategory::Sync),
    ("profile", LogCategory::Profile),
    ("collective", LogCategory::Collective),
];

/// The server's logger: per-category levels over `tracing`.
#[derive(Debug, Default)]
pub struct ServerLogger {
    levels: [AtomicU8; 6],
}

impl ServerLogger {
    /// A logger with every category at `level`.
    pub fn new(level: LogLevel) -> Self {
        let logger = Self::default();
        for (_, c) in CATEGORIES {
            logger.set_level(c, level);
        }
        logger
    }

    /// Levels from `COMPUTE_LOG`; everything off when it is unset or unparsable.
    pub fn from_env() -> Self {
        let logger = Self::default();
        if let Ok(spec) = std::env::var("COMPUTE_LOG") {
            logger.apply_spec(&spec);
        }
        logger
    }

    /// Applies a spec like `full` or `compile=full,launch=basic`; unknown
    /// parts are ignored (and said so through `tracing`).
    pub fn apply_spec(&self, spec: &str) {
        for part in spec.split(',').filter(|p| !p.trim().is_empty()) {
            match part.split_once('=') {
                None => match LogLevel::parse(part) {
                    Some(level) => CATEGORIES
                        .iter()
                        .for_each(|(_, c)| self.set_level(*c, level)),
                    None => {
                        tracing::warn!(target: "compute", "COMPUTE_LOG: unknown level `{part}`")
                    }
                },
                Some((name, level)) => {
                    let cat = CATEGORIES.iter().find(|(n, _)| *n == name.trim());
                    match (cat, LogLevel::parse(level)) {
                        (Some((_, c)), Some(l)) => self.set_level(*c, l),
                        _ => {
                            tracing::warn!(target: "compute", "COMPUTE_LOG: cannot parse `{part}`")
                        }
                    }
                }
            }
        }
    }

    /// Sets one category's level.
    pub fn set_level(&self, category: LogCategory, level: LogLevel) {
        self.levels[category as usize].store(level as u8, Ordering::Relaxed);
    }

    /// One category's level.
    pub fn level(&self, category: LogCategory) -> LogLevel {
        LogLevel::from_u8(self.levels[category as usize].load(Ordering::Relaxed))
    }

    /// Logs an event of `category` when its level is at least `min`. The
    /// message is built only then, so a disabled category costs one load.
    pub fn log(&self, category: LogCategory, min: LogLevel, message: impl FnOnce() -> String) {
        if self.level(category) < min {
            return;
        }
        let msg = message();
        match category {
            LogCategory::Compile => tracing::info!(target: "compute::compile", "{msg}"),
            LogCategory::Launch => tracing::info!(target: "compute::launch", "{msg}"),
            LogCategory::Memory => tracing::info!(target: "compute::memory", "{msg}"),
            LogCategory::Sync => tracing::info!(target: "compute::sync", "{msg}"),
            LogCategory::Profile => tracing::info!(target: "compute::profile", "{msg}"),
            LogCategory::Collective => tracing::info!(target: "compute::collective", "{msg}"),
        }
    }
}

/// The adapter a server runs on, in words.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AdapterSummary {
    /// Adapter name.
    pub name: String,
    /// Backend (Vulkan, Metal, Gl...).
    pub backend: String,
    /// Discrete, integrated, CPU...
    pub device_type: String,
    /// Driver name.
    pub driver: String,
    /// Driver version text.
    pub driver_info: String,
}

/// Shared, read-mostly facts about a server and its device.
#[derive(Debug)]
pub struct ServerUtilities {
    /// The logger.
    pub logger: Arc<ServerLogger>,
    /// The adapter.
    pub adapter: AdapterSummary,
    /// Memory limits.
    pub memory: MemoryDeviceProperties,
    /// How profile windows are timed.
    pub timing_method: TimingMethod,
    /// Largest workgroup count per dispatch dimension.
    pub max_workgroups_per_dimension: u32,
    /// Largest number of invocations in one workgroup.
    pub max_invocations_per_workgroup: u32,
    /// Where host transfers land.
    pub host_transfers: HostTransfers,
}

/// How bytes move between the host and the device: where a read lands and
/// what a write is copied from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HostTransfers {
    /// Through wgpu's mapped staging buffers (`MAP_READ`/`MAP_WRITE`): a
    /// read's bytes are the mapped range, handed out once it is mapped.
    #[default]
    Mapped,
    /// Through host memory imported into the device
    /// (`VK_EXT_external_memory_host`): the device copies straight into
    /// page-aligned host allocations, and a read's bytes are that
    /// allocation: nothing is mapped, nothing copied on the host.
    Imported {
        /// The device's alignment for imported host memory, in bytes
        /// (address and size).
        alignment: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_set_levels_per_category() {
        let logger = ServerLogger::default();
        logger.apply_spec("basic,compile=full");
        assert_eq!(logger.level(LogCategory::Compile), LogLevel::Full);
        assert_eq!(logger.level(LogCategory::Launch), LogLevel::Basic);
        logger.apply_spec("launch=off,nonsense=full,sync=loud");
        assert_eq!(logger.level(LogCategory::Launch), LogLevel::Off);
        assert_eq!(logger.level(LogCategory::Sync), LogLevel::Basic);
    }

    #[test]
    fn disabled_categories_do_not_build_messages() {
        let logger = ServerLogger::new(LogLevel::Off);
        logger.log(LogCategory::Launch, LogLevel::Basic, || {
            panic!("message built for a disabled category")
        });
    }
}
