//! Tidy checks: the layout rules the code review would otherwise have to
//! remember, as tests (`cargo test -p xtask`, part of `cargo xtask ci`, and
//! `cargo xtask tidy`).
//!
//! - no source file over [`MAX_LINES`] lines;
//! - no `&mut WgpuServer` parameter outside the server's own module
//!   (`crates/wgpu-server/src/server/`): the other modules are parts the
//!   server owns, and take the part they need;
//! - every path the docs name (`README.md`, `docs/*.md`) exists.

use std::path::{Path, PathBuf};

use crate::{Result, root};

/// The longest a source file may be.
pub(crate) const MAX_LINES: usize = 500;

/// Where the project's own sources are.
const SOURCE_ROOTS: &[&str] = &["crates", "tests", "xtask", "bridge"];

/// Every `.rs` file under `dir`, skipping build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for r in SOURCE_ROOTS {
        rust_files(&root().join(r), &mut files);
    }
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Files over [`MAX_LINES`] lines, with their length.
pub(crate) fn long_files() -> Vec<(String, usize)> {
    sources()
        .into_iter()
        .filter_map(|p| {
            let lines = std::fs::read_to_string(&p).ok()?.lines().count();
            (lines > MAX_LINES).then(|| (relative(&p), lines))
        })
        .collect()
}

/// `file:line` of every `&mut WgpuServer` parameter outside the server's
/// own module.
pub(crate) fn server_parameters_outside_server() -> Vec<String> {
    let server_crate = root().join("crates/wgpu-server/src");
    let own = server_crate.join("server");
    let mut found = Vec::new();
    for p in sources() {
        if !p.starts_with(&server_crate) || p.starts_with(&own) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains(": &mut WgpuServer") {
                found.push(format!("{}:{}", relative(&p), i + 1));
            }
        }
    }
    found
}

/// Paths named in backticks in the docs that name no file or folder: a
/// path from the repository root (`crates/...`), or a source file named by
/// its tail (`server/api.rs`), which must end some file's path.
pub(crate) fn missing_doc_paths() -> Vec<String> {
    let mut docs = vec![root().join("README.md")];
    if let Ok(entries) = std::fs::read_dir(root().join("docs")) {
        docs.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "md")),
        );
    }
    let files: Vec<String> = sources().iter().map(|p| relative(p)).collect();
    let mut missing = Vec::new();
    for doc in docs {
        let Ok(text) = std::fs::read_to_string(&doc) else {
            continue;
        };
        for path in backticked_paths(&text) {
            let exists = if SOURCE_ROOTS
                .iter()
                .chain(&["docs", ".ci"])
                .any(|r| path.starts_with(&format!("{r}/")))
            {
                root().join(path.trim_end_matches('/')).exists()
            } else {
                files.iter().any(|f| f.ends_with(&format!("/{path}")))
            };
            if !exists {
                missing.push(format!("{}: `{path}`", relative(&doc)));
            }
        }
    }
    missing
}

/// What looks like a path inside backticks: a `.rs` or `.md` file, or a
/// folder or file under one of the repository's roots.
fn backticked_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .filter(|s| !s.contains(char::is_whitespace) && !s.contains("::") && !s.contains('*'))
        .filter(|s| {
            let rooted = SOURCE_ROOTS
                .iter()
                .chain(&["docs"])
                .any(|r| s.starts_with(&format!("{r}/")));
            rooted || (s.ends_with(".rs") && s.contains('/'))
        })
        .map(str::to_owned)
        .collect()
}

/// `cargo xtask tidy`: every check, reported together.
pub(crate) fn tidy() -> Result {
    let mut problems = Vec::new();
    for (f, n) in long_files() {
        problems.push(format!("{f}: {n} lines (at most {MAX_LINES})"));
    }
    for at in server_parameters_outside_server() {
        problems.push(format!(
            "{at}: a `&mut WgpuServer` parameter outside server/"
        ));
    }
    for m in missing_doc_paths() {
        problems.push(format!("{m} does not exist"));
    }
    if problems.is_empty() {
        eprintln!("tidy: ok");
        return Ok(());
    }
    Err(format!("tidy:\n  {}", problems.join("\n  ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "the layout is being brought in line (issue 20)"]
    fn no_source_file_is_over_the_limit() {
        let long = long_files();
        assert!(long.is_empty(), "split these files: {long:?}");
    }

    #[test]
    #[ignore = "the layout is being brought in line (issue 20)"]
    fn no_module_but_the_server_takes_the_whole_server() {
        let found = server_parameters_outside_server();
        assert!(
            found.is_empty(),
            "take the part you need, or make it a method of the server: {found:?}"
        );
    }

    #[test]
    #[ignore = "the layout is being brought in line (issue 20)"]
    fn every_path_the_docs_name_exists() {
        let missing = missing_doc_paths();
        assert!(missing.is_empty(), "{missing:#?}");
    }

    #[test]
    fn backticked_paths_are_found() {
        let text =
            "see `crates/wgpu-server/src/server/api.rs` and `server/api.rs`, not `a b` or `x::y`";
        assert_eq!(
            backticked_paths(text),
            ["crates/wgpu-server/src/server/api.rs", "server/api.rs"]
        );
    }
}
