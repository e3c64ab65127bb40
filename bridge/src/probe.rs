//! Which test used the device: how `cargo xtask cubecl` tells a test that
//! returned early for a missing feature from one that ran.
//!
//! With `CUBECL_BRIDGE_LAUNCH_LOG=<file>` set, [`crate::BridgeRuntime`]'s
//! `client()` notes the calling thread's name (the test harness names each
//! test's thread after the test) under the thread's cubecl stream, and the
//! first allocation or launch on that stream appends the name to the file.
//! With `CUBECL_BRIDGE_SERIAL` also set (one test at a time), any stream's
//! work is the last registered test's: that catches the tests that work on
//! streams of their own (`StreamId::executes`, threads they spawn). Unset,
//! all of this is a single environment lookup, cached.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// The file the launching tests are appended to.
pub const LAUNCH_LOG_ENV: &str = "CUBECL_BRIDGE_LAUNCH_LOG";

/// Set when tests run one at a time: work on any stream is the last
/// registered test's.
pub const SERIAL_ENV: &str = "CUBECL_BRIDGE_SERIAL";

#[derive(Default)]
struct Log {
    names: HashMap<u64, String>,
    last: Option<String>,
    logged: HashSet<String>,
}

fn serial() -> bool {
    static SERIAL: OnceLock<bool> = OnceLock::new();
    *SERIAL.get_or_init(|| std::env::var_os(SERIAL_ENV).is_some())
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
    log.names.insert(stream, name.clone());
    log.last = Some(name);
}

/// An allocation or a launch on `stream`: its test is appended once.
pub fn touched(stream: u64) {
    let Some(path) = log_path() else {
        return;
    };
    let mut log = log().lock().unwrap_or_else(|e| e.into_inner());
    let name = if serial() {
        log.last.clone()
    } else {
        log.names.get(&stream).cloned()
    };
    let Some(name) = name else {
        return;
    };
    if !log.logged.insert(name.clone()) {
        return;
    }
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
