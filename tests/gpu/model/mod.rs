//! Random programs over three ranks (three servers on the one adapter,
//! one communicator), three streams each, checked against an independent
//! CPU model of every buffer's values and trust on every rank.
//!
//! Each rank has the same buffers: four data buffers, a gather buffer (the
//! `all_gather` destination) and three indirect-count buffers. A program
//! mixes, per rank and stream, host writes (whole, half, refused), launches
//! (plain, failing, indirect with counts over the device limit: a late
//! verdict), reads, checks, syncs and `sync_collective`; and collectives
//! issued on every rank in turn (all-reduce `Wait` and `Overlap`,
//! broadcast, all-gather), some with a rank that disagrees, is refused or
//! has a bad input. Late verdicts follow the data: what reads bytes whose
//! verdict is still to come is poisoned when it comes. Programs run with
//! `tasks_max` 4 form their communicator with a chunk of 8 bytes, so their
//! collectives move in several steps (`device.rs`).
//!
//! - `ops`: the operations and their encoding as random numbers;
//! - `cause`, `oracle`, `launches`, `collective`: the model, which shares
//!   no code with the server;
//! - `device`: the servers and the calls;
//! - `compare`: the server's answers against the model's;
//! - `run`: a program, step by step; `seen`: what a run exercised.
//!
//! What the model found in the server is kept as tests in
//! `collective::found`.
//!
//! `TRUST_MODEL_OPS=n cargo test -p compute-tests --test gpu
//! trust_model_long_run -- --ignored --nocapture` runs `n` operations
//! (`TRUST_MODEL_SEED` picks the programs, `TRUST_MODEL_LEN` their length).

mod cause;
mod collective;
mod compare;
mod device;
mod launches;
mod ops;
mod oracle;
mod replay;
mod run;
mod seen;

use compute_testkit::Rng;
use proptest::prelude::*;

use crate::common::proptest_config;
use ops::Count;
use run::run_program;
use seen::Seen;

pub const RANKS: usize = 3;
pub const STREAMS: u64 = 3;
/// Elements of a data buffer (256 bytes); its halves can be written apart.
pub const N: usize = 64;
/// Data buffers, then the gather buffer (`RANKS * N` elements).
pub const DATA: usize = 4;
pub const GATHER: usize = DATA;
pub const VALUES: usize = DATA + 1;
/// Count buffers (three `u32`s of an indirect dispatch): two of 12 bytes
/// on the data buffers' page, one (`FAR`) on a page of its own.
pub const COUNTS: usize = 3;
pub const FAR: usize = 2;
pub const FAR_BYTES: usize = 4096;
pub const INITIAL_COUNTS: [Count; COUNTS] = [Count::One, Count::Zero, Count::Three];

/// Elements of value buffer `b`.
pub fn len(b: usize) -> usize {
    if b == GATHER { RANKS * N } else { N }
}

/// Value buffer `b`'s first contents on `rank`.
pub fn initial(rank: usize, b: usize) -> Vec<u32> {
    vec![(10 * rank + b) as u32; len(b)]
}

proptest! {
    #![proptest_config(proptest_config(16))]

    /// Random programs over three ranks, three streams each: every read,
    /// check, sync and collective call agrees with the model (bytes equal
    /// its values when it says trusted; an error naming its cause when it
    /// says poisoned).
    #[test]
    fn random_programs_on_three_ranks_match_the_model(
        tasks_max in prop::sample::select(vec![1usize, 4, 128]),
        program in prop::collection::vec(
            (0u64..STREAMS * RANKS as u64, any::<[u32; 3]>()),
            1..150,
        )
    ) {
        let run = run_program(tasks_max, &program);
        let steps: Vec<_> = program.iter().map(|(s, c)| ops::Step::from_code(*s, *c)).collect();
        prop_assert!(
            run.disagreements.is_empty(),
            "{:#?}\nin {steps:#?}",
            run.disagreements
        );
    }
}

/// The long run's next program: its `tasks_max` and `len` steps.
fn program(rng: &mut Rng, len: u64) -> (usize, Vec<(u64, [u32; 3])>) {
    let tasks_max = rng.pick(&[1usize, 4, 16, 128]);
    let mut step = || {
        let sel = rng.next_u64() % (STREAMS * RANKS as u64);
        (sel, [rng.u32(), rng.u32(), rng.u32()])
    };
    (tasks_max, (0..len).map(|_| step()).collect())
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The long run: `TRUST_MODEL_OPS` operations (default 200,000) in
/// programs of `TRUST_MODEL_LEN` (default 2,000), seeded by
/// `TRUST_MODEL_SEED` (default 1). Prints the operations run, what they
/// exercised and the disagreements found.
#[test]
#[ignore = "long: run with TRUST_MODEL_OPS=n -- --ignored"]
fn trust_model_long_run() {
    let (total, seed) = (env("TRUST_MODEL_OPS", 200_000), env("TRUST_MODEL_SEED", 1));
    let len = env("TRUST_MODEL_LEN", 2_000);
    let mut rng = Rng::spread(seed);
    let (mut ops, mut programs, mut disagreements) = (0u64, 0u64, 0usize);
    let mut seen = Seen::default();
    while ops < total {
        let (tasks_max, program) = program(&mut rng, len.min(total - ops));
        let run = run_program(tasks_max, &program);
        ops += run.ops;
        seen += run.seen;
        programs += 1;
        if !run.disagreements.is_empty() {
            disagreements += run.disagreements.len();
            eprintln!(
                "program {programs} (seed {seed}, tasks_max {tasks_max}): {:#?}",
                run.disagreements
            );
        }
        if programs % 10 == 0 {
            eprintln!("{ops} operations, {programs} programs, {disagreements} disagreements");
            eprintln!("seen: {seen:?}");
        }
    }
    println!("trust model: {ops} operations in {programs} programs, {disagreements} disagreements");
    println!("seen: {seen:?}");
    assert_eq!(disagreements, 0);
}

/// Replays one program as proptest prints it (`minimal failing input:
/// tasks_max = T, program = [...]`), saved to the file `TRUST_MODEL_REPLAY`,
/// `TRUST_MODEL_REPEAT` times (default 1): a failure seen once on another
/// machine, run again until its timing recurs. A relative path is from the
/// workspace root; `TRUST_MODEL_PRINT=1` prints the program step by step.
#[test]
#[ignore = "replay: TRUST_MODEL_REPLAY=file -- --ignored"]
fn trust_model_replay() {
    let Ok(path) = std::env::var("TRUST_MODEL_REPLAY") else {
        eprintln!("skipped: TRUST_MODEL_REPLAY names no file");
        return;
    };
    // Tests run in the package's directory; the saved programs are named
    // from the root.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join(&path)).expect("TRUST_MODEL_REPLAY file");
    let (head, body) = text
        .split_once("program =")
        .expect("`program =` in the file");
    let numbers = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .map(|w| w.parse().expect("a number"))
            .collect()
    };
    let tasks_max = *numbers(head).last().expect("tasks_max") as usize;
    let program: Vec<(u64, [u32; 3])> = numbers(body)
        .chunks_exact(4)
        .map(|c| (c[0], [c[1] as u32, c[2] as u32, c[3] as u32]))
        .collect();
    if std::env::var("TRUST_MODEL_PRINT").is_ok() {
        for (i, (sel, code)) in program.iter().enumerate() {
            eprintln!("{i:4} {:?}", ops::Step::from_code(*sel, *code));
        }
    }
    let mut failed = 0;
    for attempt in 0..env("TRUST_MODEL_REPEAT", 1) {
        let run = run_program(tasks_max, &program);
        if !run.disagreements.is_empty() {
            failed += 1;
            eprintln!("attempt {attempt}: {:#?}", run.disagreements);
        }
    }
    assert_eq!(failed, 0, "{failed} replays disagreed with the model");
}
