//! Which test launched a kernel: how `cargo xtask cubecl` tells a test
//! that returned early for a missing feature from one that ran.
//!
//! With `CUBECL_BRIDGE_LAUNCH_LOG=<file>` set, [`crate::BridgeRuntime`]'s
//! `client()` notes the calling thread's name (the test harness names each
//! test's thread after the test) under the thread's cubecl stream, and the
//! first launch on that stream appends the name to the file. Unset, both
//! are a single environment lookup, cached.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// The file the launching tests are appended to.
pub const LAUNCH_LOG_ENV: &str = "CUBECL_BRIDGE_LAUNCH_LOG";

#[derive(Default)]
struct Log {
    names: HashMap<u64, String>,
    logged: HashSet<u64>,
}

fn log_path() -> Option<&'static str> {
    static PATH: OnceLock<Option<String>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var(LAUNCH_LOG_ENV).ok())
        .as_deref()
}

fn log() -> &'static Mutex<Log> {
    static LOG: OnceLock<Mutex<Log>> = OnceLock::new();
    LOG.get_or_init(Mutex::default)
}

/// Notes the current thread's name under its cubecl stream.
pub fn register_current_thread() {
    if log_path().is_none() {
        return;
    }
    let Some(name) = std::thread::current().name().map(str::to_string) else {
        return;
    };
    let stream = cubecl_environment::stream::StreamId::current().value;
    let mut log = log().lock().unwrap_or_else(|e| e.into_inner());
    log.names.insert(stream, name);
}

/// A launch on `stream`: its test is appended once.
pub fn launched(stream: u64) {
    let Some(path) = log_path() else {
        return;
    };
    let mut log = log().lock().unwrap_or_else(|e| e.into_inner());
    if log.logged.contains(&stream) {
        return;
    }
    let Some(name) = log.names.get(&stream).cloned() else {
        return;
    };
    log.logged.insert(stream);
    // Best effort: a log that cannot be written makes the test count as
    // launching nothing, so the probe run looks at it again.
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{name}");
    }
}
