//! The suite and programs on upstream burn-wgpu (see `burn_on_server::cli`).

fn main() -> std::process::ExitCode {
    burn_on_server::cli::main()
}
