//! `suite OUT` and `list`: the suite as a process `cargo xtask burn` can
//! restart. Records are appended to OUT as each case ends and the cases
//! OUT already holds are not run again, so when a build's process dies or
//! hangs in a case (upstream's poll thread panics inside wgpu-core on
//! lavapipe, and the process then waits forever), the caller records that
//! case as an error and starts the process again for the rest. A watchdog
//! ends the process when one case runs longer than
//! `BURN_SUITE_CASE_SECONDS` (300 by default), exit code 3.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::tensor::Device;

use super::{record_key, run, selected};

/// Exit code of a process the watchdog ended.
pub const TIMED_OUT: u8 = 3;

/// `--filter P` and `--every N` from `args`.
fn selection(args: &[String]) -> (String, usize) {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let filter = value("--filter").cloned().unwrap_or_default();
    let every = value("--every").and_then(|s| s.parse().ok()).unwrap_or(1);
    (filter, every)
}

/// `list [--filter P] [--every N]`: the selected cases' keys, in run order.
pub fn list(args: &[String]) -> ExitCode {
    let (filter, every) = selection(args);
    for c in selected(&filter, every) {
        println!("{}", c.key());
    }
    ExitCode::SUCCESS
}

/// `suite OUT [--filter P] [--every N]`.
pub fn suite(device: &Device, out: &str, args: &[String]) -> ExitCode {
    let (filter, every) = selection(args);
    let done: std::collections::HashSet<String> = std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(record_key)
        .collect();
    let mut file = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("open {out}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cases: Vec<_> = selected(&filter, every)
        .into_iter()
        .filter(|c| !done.contains(&c.key()))
        .collect();
    let running = watchdog(limit());
    let mut written = 0usize;
    let mut failed = None;
    run(
        device,
        cases,
        |key| {
            if let Ok(mut r) = running.lock() {
                *r = Some((key.to_string(), Instant::now()));
            }
        },
        |line| {
            if let Err(e) = writeln!(file, "{line}").and_then(|()| file.flush()) {
                failed.get_or_insert(e);
            }
            written += 1;
        },
    );
    if let Some(e) = failed {
        eprintln!("write {out}: {e}");
        return ExitCode::FAILURE;
    }
    println!("{written} cases written to {out}");
    ExitCode::SUCCESS
}

fn limit() -> Duration {
    let secs = std::env::var("BURN_SUITE_CASE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    Duration::from_secs(secs)
}

/// The case running and since when; a thread that ends the process when
/// one case outlives `limit`.
fn watchdog(limit: Duration) -> Arc<Mutex<Option<(String, Instant)>>> {
    let running: Arc<Mutex<Option<(String, Instant)>>> = Arc::default();
    let seen = Arc::clone(&running);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let late = match seen.lock() {
                Ok(r) => r
                    .as_ref()
                    .filter(|(_, since)| since.elapsed() > limit)
                    .map(|(key, _)| key.clone()),
                Err(_) => None,
            };
            if let Some(key) = late {
                eprintln!("burn suite: {key} ran past {limit:?}; ending the process");
                std::process::exit(i32::from(TIMED_OUT));
            }
        }
    });
    running
}
