//! What both builds' binaries do: `suite OUT [--filter P] [--every N]`
//! appends the suite's records to OUT (`list` names the cases it would
//! run: `suite/runner.rs`); `mlp STEPS` prints the MLP's losses; `transformer
//! small|full` the encoder's forward output and one training step;
//! `data-parallel RANKS STEPS` trains on RANKS devices and checks the ranks
//! agree; `bench [WARM [TIMED]]` prints the `burn.*` timings.

use burn::tensor::Device;

/// The binary's entry point (`bridge/burn`'s `burn-suite`, and
/// `bridge/upstream`'s `burn-upstream`).
pub fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let device = Device::default();
    match args.first().map(String::as_str) {
        Some("suite") => {
            let Some(out) = args.get(1) else {
                eprintln!("usage: suite OUT [--filter PREFIX] [--every N]");
                return std::process::ExitCode::FAILURE;
            };
            return crate::suite::runner::suite(&device, out, &args[2..]);
        }
        Some("list") => return crate::suite::runner::list(&args[1..]),
        Some("mlp") => {
            let steps = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
            let losses = crate::programs::mlp::losses(&device, steps, 64, 128);
            for (step, loss) in losses.iter().enumerate() {
                println!("step {step}: loss {:x} {loss:.7}", loss.to_bits());
            }
        }
        Some("transformer") => {
            use crate::programs::transformer::{FULL, SMALL, forward, step};
            let sizes = match args.get(1).map(String::as_str) {
                Some("full") => FULL,
                _ => SMALL,
            };
            let out = forward(&device, sizes);
            // Every value where there are few (what CI compares), a sum
            // and the largest magnitude always.
            if out.len() <= 1 << 13 {
                for (i, v) in out.iter().enumerate() {
                    println!("value {i} {:x}", v.to_bits());
                }
            }
            let sum: f64 = out.iter().map(|v| f64::from(*v)).sum();
            let max = out.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            println!("forward sum {:x} {sum:.6}", (sum as f32).to_bits());
            println!("forward max {:x} {max:.6}", max.to_bits());
            let [before, after] = step(&device, sizes);
            println!("step before {:x} {before:.7}", before.to_bits());
            println!("step after {:x} {after:.7}", after.to_bits());
        }
        Some("data-parallel") => {
            use crate::programs::data_parallel::{devices, train};
            let ranks = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
            let steps = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
            let weights = train(&devices(ranks), steps, 96, 64);
            let alone = train(std::slice::from_ref(&device), steps, 96, 64);
            let identical = weights.windows(2).all(|w| {
                w[0].len() == w[1].len()
                    && w[0]
                        .iter()
                        .zip(&w[1])
                        .all(|(a, b)| a.to_bits() == b.to_bits())
            });
            let worst = weights[0]
                .iter()
                .zip(&alone[0])
                .map(|(a, b)| f64::from((a - b).abs()) / (f64::from(b.abs()) + 1e-3))
                .fold(0.0f64, f64::max);
            println!("ranks {ranks} steps {steps} params {}", weights[0].len());
            println!("ranks bit-identical {identical}");
            println!("one device worst relative difference {worst:e}");
            if !identical || weights[0].len() != alone[0].len() || worst > 1e-3 {
                return std::process::ExitCode::FAILURE;
            }
        }
        Some("bench") => {
            let warm = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
            let timed = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
            let sizes = match args.get(3).map(String::as_str) {
                Some("small") => crate::programs::transformer::SMALL,
                _ => crate::programs::transformer::FULL,
            };
            let ranks = crate::programs::data_parallel::devices(2);
            for f in crate::programs::bench::run(&device, &ranks, sizes, warm, timed) {
                println!("{} {:.4}", f.name, f.value);
            }
        }
        Some("phases") => {
            use crate::programs::transformer::{FULL, SMALL};
            let sizes = if args.get(1).map(String::as_str) == Some("small") {
                SMALL
            } else {
                FULL
            };
            let [f, b, u] = crate::programs::bench::transformer_phases(&device, sizes, 3, 10);
            println!("transformer step phases (ms): forward {f:.3} backward {b:.3} update {u:.3}");
        }
        _ => {
            eprintln!(
                "usage: suite OUT [--filter P] [--every N] | list | mlp STEPS | transformer small|full | data-parallel \
                 RANKS STEPS | bench [WARM [TIMED [small|full]]] | phases [small|full]"
            );
            return std::process::ExitCode::FAILURE;
        }
    }
    std::process::ExitCode::SUCCESS
}
