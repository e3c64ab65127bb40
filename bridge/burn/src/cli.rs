//! What both builds' binaries do: `suite OUT [FILTER]` writes the suite's
//! records to OUT; `mlp STEPS` prints the MLP's losses.

use burn::tensor::Device;

/// The binary's entry point (`bridge/burn`'s `burn-suite`, and
/// `bridge/upstream`'s `burn-upstream`).
pub fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let device = Device::default();
    match args.first().map(String::as_str) {
        Some("suite") => {
            let Some(out) = args.get(1) else {
                eprintln!("usage: suite OUT [FILTER]");
                return std::process::ExitCode::FAILURE;
            };
            let filter = args.get(2).map_or("", String::as_str);
            let lines = crate::suite::run(&device, filter);
            if let Err(e) = std::fs::write(out, lines.join("\n") + "\n") {
                eprintln!("write {out}: {e}");
                return std::process::ExitCode::FAILURE;
            }
            println!("{} cases written to {out}", lines.len());
        }
        Some("mlp") => {
            let steps = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(200);
            let losses = crate::programs::mlp::losses(&device, steps, 64, 128);
            for (step, loss) in losses.iter().enumerate() {
                println!("step {step}: loss {:x} {loss:.7}", loss.to_bits());
            }
        }
        _ => {
            eprintln!("usage: suite OUT [FILTER] | mlp STEPS");
            return std::process::ExitCode::FAILURE;
        }
    }
    std::process::ExitCode::SUCCESS
}
