//! The MLP of `programs::mlp`, trained for 200 steps: its losses.

use burn::tensor::Device;
use burn_on_server::programs::mlp;

fn main() {
    let steps = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let losses = mlp::losses(&Device::default(), steps, 64, 128);
    for (step, loss) in losses.iter().enumerate() {
        println!("step {step}: loss {loss:.7}");
    }
}
