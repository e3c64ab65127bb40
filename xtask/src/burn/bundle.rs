//! `cargo xtask burn --bundle`: release builds of both burn binaries,
//! compressed into `.burn/` (ignored) for the device machine, where
//! `xtask/h200/run-burn.sh` runs the timings, the suite and the programs.

use std::process::Command;

use crate::cubecl::{bridge_cargo, target_dir};
use crate::{Result, root, run};

pub(crate) fn bundle() -> Result {
    let mut ours = bridge_cargo();
    ours.args([
        "build",
        "--release",
        "-p",
        "burn-on-server",
        "--bin",
        "burn-suite",
    ]);
    run(ours)?;
    // The compile-time probe (`bridge/examples/compile_probe.rs`) that
    // `xtask/h200/compile-probe.sh` runs on the bridge's dumped modules.
    let mut probe = bridge_cargo();
    probe.args([
        "build",
        "--release",
        "-p",
        "cubecl-bridge",
        "--example",
        "compile_probe",
    ]);
    run(probe)?;
    let mut upstream = bridge_cargo();
    upstream.current_dir(root().join("bridge/upstream"));
    upstream.args(["build", "--release", "--bin", "burn-upstream"]);
    run(upstream)?;
    let out = root().join(".burn");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    for name in ["burn-suite", "burn-upstream", "examples/compile_probe"] {
        let bin = target_dir().join("release").join(name);
        let name = name.trim_start_matches("examples/");
        let to = out.join(name);
        std::fs::copy(&bin, &to).map_err(|e| format!("copy {}: {e}", bin.display()))?;
        let mut strip = Command::new("strip");
        strip.arg("--strip-debug").arg(&to);
        run(strip)?;
        // Both must fit the device tool's 64 MiB with the loader's debs.
        let mut xz = Command::new("xz");
        xz.args(["-f", "-T2", "-6"]).arg(&to);
        run(xz)?;
    }
    std::fs::write(out.join("COMMIT"), crate::bundle::commit_id() + "\n")
        .map_err(|e| format!("write .burn/COMMIT: {e}"))?;
    eprintln!(
        "burn: .burn/burn-suite.xz and .burn/burn-upstream.xz are ready (with `.gl` from \
         `cargo xtask device-bundle`). On the device machine run\n  bash \
         xtask/h200/run-burn.sh $OUT bench suite programs\nthen here `cargo xtask burn --from \
         DIR` on the suite's records."
    );
    Ok(())
}
