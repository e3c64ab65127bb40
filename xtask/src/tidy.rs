//! Tidy checks: the layout rules the code review would otherwise have to
//! remember, as tests (`cargo test -p xtask`, part of `cargo xtask ci`, and
//! `cargo xtask tidy`).
//!
//! - no source file over [`MAX_LINES`] lines;
//! - no `&mut WgpuServer` parameter outside the server's own module
//!   (`crates/wgpu-server/src/server/`): the other modules are parts the
//!   server owns, and take the part they need;
//! - every path the docs name (`README.md`, `docs/*.md`) exists;
//! - every example the README's table sizes (`in N lines`) has that many
//!   lines of code (blank and comment lines excluded, as the issues count);
//! - `wgpu-server`'s top-level modules import only modules on their floor
//!   or below ([`FLOORS`]): the device is the ground floor, the server (the
//!   one module that sees every part) the top.

use std::path::{Path, PathBuf};

use crate::{Result, root};

/// The longest a source file may be.
pub(crate) const MAX_LINES: usize = 500;

/// `wgpu-server`'s top-level modules, ground floor first: a module may
/// import the ones before it, never one after it.
pub(crate) const FLOORS: &[&str] = &[
    "device",
    "memory",
    "stream",
    "transfer",
    "launch",
    "timing",
    "graph",
    "collective",
    "server",
    "lib",
    "prelude",
];

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

/// `wgpu-server` imports that run up a floor: `file:line: from -> to`.
pub(crate) fn imports_up() -> Vec<String> {
    let src = root().join("crates/wgpu-server/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let floor = |m: &str| FLOORS.iter().position(|f| *f == m);
    let mut up = Vec::new();
    for p in sources().into_iter().filter(|p| p.starts_with(&src)) {
        let from = top_module(&src, &p);
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            for to in crate_targets(line, &lib) {
                if let (Some(a), Some(b)) = (floor(&from), floor(&to))
                    && b > a
                {
                    up.push(format!("{}:{}: {from} -> {to}", relative(&p), i + 1));
                }
            }
        }
    }
    up
}

/// The top-level module a file of `src` belongs to (`lib` for `lib.rs`).
fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

/// The modules a line names through `crate::`: `crate::memory::...`, the
/// members of a `crate::{...}` group, and names `lib.rs` re-exports
/// (`crate::WgpuServer` is the `server` module's).
fn crate_targets(line: &str, lib: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut names = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let group = rest
            .strip_prefix('{')
            .map(|g| g.split('}').next().unwrap_or(""));
        let heads: Vec<&str> = match group {
            Some(g) => g.split(',').map(str::trim).collect(),
            None => vec![rest],
        };
        for head in heads {
            let name: String = head
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                continue;
            }
            if FLOORS.contains(&name.as_str()) {
                names.push(name);
            } else if let Some(module) = reexporting_module(lib, &name) {
                names.push(module);
            }
        }
    }
    names
}

/// The module `lib.rs` re-exports `name` from (`pub use module::...`).
fn reexporting_module(lib: &str, name: &str) -> Option<String> {
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub use "))
        .find(|l| {
            l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| w == name)
        })
        .map(|l| l.split("::").next().unwrap_or("").to_owned())
        .filter(|m| FLOORS.contains(&m.as_str()))
}

/// Lines of code of `text`: not blank, not a comment line.
fn code_lines(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// The README's example rows that say `in N lines` where the example has
/// another count: `(example, said, counted)`.
pub(crate) fn example_sizes_wrong() -> Vec<(String, usize, usize)> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap_or_default();
    let mut wrong = Vec::new();
    for row in readme.lines().filter(|l| l.starts_with("| `")) {
        let name = row[3..].split('`').next().unwrap_or("");
        let said = row
            .split(" in ")
            .skip(1)
            .find_map(|rest| rest.split(" lines").next()?.parse::<usize>().ok());
        let file = root().join(format!("crates/wgpu-server/examples/{name}.rs"));
        if let (Some(said), Ok(text)) = (said, std::fs::read_to_string(&file)) {
            let counted = code_lines(&text);
            if counted != said {
                wrong.push((name.to_owned(), said, counted));
            }
        }
    }
    wrong
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
    for at in imports_up() {
        problems.push(format!(
            "{at}: an import from a lower floor to a higher one"
        ));
    }
    problems.extend(crate::tidy_modules::module_list_mismatches());
    for (name, said, counted) in example_sizes_wrong() {
        problems.push(format!(
            "README.md: `{name}` is said to be {said} lines, it has {counted}"
        ));
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
    fn no_source_file_is_over_the_limit() {
        let long = long_files();
        assert!(long.is_empty(), "split these files: {long:?}");
    }

    #[test]
    fn no_module_but_the_server_takes_the_whole_server() {
        let found = server_parameters_outside_server();
        assert!(
            found.is_empty(),
            "take the part you need, or make it a method of the server: {found:?}"
        );
    }

    #[test]
    fn every_path_the_docs_name_exists() {
        let missing = missing_doc_paths();
        assert!(missing.is_empty(), "{missing:#?}");
    }

    #[test]
    fn the_readme_sizes_its_examples_truly() {
        let wrong = example_sizes_wrong();
        assert!(wrong.is_empty(), "(example, said, counted): {wrong:?}");
    }

    #[test]
    fn no_module_of_the_server_imports_one_above_it() {
        let up = imports_up();
        assert!(
            up.is_empty(),
            "floors (ground first): {FLOORS:?}; up: {up:#?}"
        );
    }

    #[test]
    fn crate_paths_name_their_modules() {
        let lib = "pub use server::{DEFAULT_TASKS_MAX, WgpuServer};\npub use stream::WgpuStream;";
        assert_eq!(
            crate_targets("use crate::{WgpuServer, device::faults, WgpuStream};", lib),
            ["server", "device", "stream"]
        );
        assert_eq!(
            crate_targets(
                "let x = crate::memory::Memory::new(); // crate::server",
                lib
            ),
            ["memory"]
        );
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
