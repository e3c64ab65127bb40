//! Finding a disagreement's cause: one program of the long run again, cut
//! down to the steps it needs.

use super::ops::Step;
use super::run::run_program;
use super::{env, program};
use compute_testkit::Rng;

/// Program `TRUST_MODEL_PROGRAM` (from 1) of the long run with the same
/// seed and length, run again; with `TRUST_MODEL_SHRINK=1`, cut to the
/// fewest steps that still disagree (greedily, chunk by chunk; a
/// disagreement that depends on timing may need several tries). Prints
/// what is left, step by step.
#[test]
#[ignore = "a tool: TRUST_MODEL_PROGRAM=k [TRUST_MODEL_SHRINK=1] -- --ignored --nocapture"]
fn trust_model_replay() {
    let seed = env("TRUST_MODEL_SEED", 1);
    let (len, index) = (env("TRUST_MODEL_LEN", 2_000), env("TRUST_MODEL_PROGRAM", 1));
    let mut rng = Rng::spread(seed);
    let (mut tasks_max, mut steps) = program(&mut rng, len);
    for _ in 1..index {
        (tasks_max, steps) = program(&mut rng, len);
    }
    let fails = |steps: &[(u64, [u32; 3])]| {
        (0..env("TRUST_MODEL_TRIES", 3))
            .any(|_| !run_program(tasks_max, steps).disagreements.is_empty())
    };
    if env("TRUST_MODEL_SHRINK", 0) == 1 {
        let mut chunk = steps.len() / 2;
        while chunk > 0 {
            let mut at = 0;
            while at < steps.len() {
                let mut shorter = steps.clone();
                shorter.drain(at..(at + chunk).min(steps.len()));
                match fails(&shorter) {
                    true => steps = shorter,
                    false => at += chunk,
                }
            }
            eprintln!("{} steps left (chunks of {chunk})", steps.len());
            chunk /= 2;
        }
    }
    let run = run_program(tasks_max, &steps);
    println!("tasks_max {tasks_max}, {} steps:", steps.len());
    for (i, (sel, code)) in steps.iter().enumerate() {
        println!(
            "{i:4} {:?}   <- ({sel}, {code:?})",
            Step::from_code(*sel, *code)
        );
    }
    println!("{:#?}", run.disagreements);
}
