//! `cargo xtask setup`: finds, and on Debian as root installs, the system
//! parts the project needs (the Vulkan loader, lavapipe, OpenMPI, libclang).

use std::path::Path;
use std::process::Command;

use crate::{Result, run};

pub(crate) fn has_vulkan_loader() -> bool {
    Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("libvulkan.so.1"))
        .unwrap_or(false)
}

pub(crate) fn has_vulkan_driver() -> bool {
    ["/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "json"))
}

/// What a wgpu adapter needs on Debian: Mesa's lavapipe and the loader.
pub(crate) const VULKAN_PACKAGES: &[&str] = &["mesa-vulkan-drivers", "libvulkan1"];
/// What the `mpi` features need: OpenMPI (headers, `mpicc`, `mpirun`) and
/// libclang for the bindings rsmpi generates.
pub(crate) const MPI_PACKAGES: &[&str] = &["libopenmpi-dev", "openmpi-bin", "libclang-dev"];

pub(crate) fn has_command(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// libclang itself (`libclang.so`, `libclang-14.so.1`), which bindgen
/// loads; not `libclang-cpp`, which other packages bring.
pub(crate) fn has_libclang() -> bool {
    Command::new("ldconfig")
        .arg("-p")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).lines().any(|l| {
                let name = l.trim_start();
                name.starts_with("libclang.so")
                    || name
                        .strip_prefix("libclang-")
                        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
        })
        .unwrap_or(false)
}

pub(crate) fn has_mpi() -> bool {
    has_command("mpirun") && has_command("mpicc") && has_libclang()
}

pub(crate) fn setup() -> Result {
    let mut missing: Vec<&str> = Vec::new();
    if has_vulkan_loader() && has_vulkan_driver() {
        eprintln!("setup: Vulkan loader and a driver are present");
    } else {
        missing.extend(VULKAN_PACKAGES);
    }
    if has_mpi() {
        eprintln!("setup: MPI (mpirun, mpicc) and libclang are present");
    } else {
        missing.extend(MPI_PACKAGES);
    }
    if missing.is_empty() {
        return Ok(());
    }
    let debian = Path::new("/etc/debian_version").exists();
    let root_user = is_root();
    let install = format!("apt-get install -y {}", missing.join(" "));
    if !(debian && root_user) {
        return Err(format!(
            "missing: {}. On Debian/Ubuntu: `sudo apt-get update && sudo {install}` (Fedora: \
             `sudo dnf install mesa-vulkan-drivers vulkan-loader openmpi-devel clang-devel`, then \
             `module load mpi/openmpi`), then rerun",
            missing.join(" ")
        ));
    }
    eprintln!("setup: installing {} (Debian, root)", missing.join(" "));
    let mut update = Command::new("apt-get");
    update.arg("update").arg("-qq");
    run(update)?;
    let mut apt = Command::new("apt-get");
    apt.args(["install", "-y", "-qq"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive");
    run(apt)?;
    if !(has_vulkan_loader() && has_vulkan_driver()) {
        return Err("installed the packages but still no Vulkan loader/driver found".into());
    }
    if !has_mpi() {
        return Err("installed the packages but still no mpirun/mpicc/libclang found".into());
    }
    Ok(())
}

pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
