//! Tidy: the module lists the docs keep name the modules that exist.
//!
//! - a module doc (`mod.rs`, `lib.rs`) that lists its modules as bullets
//!   (`- `name`: ...` or `- [`name`]: ...`) names only modules it
//!   declares, and, in `wgpu-server`, every module it declares;
//! - `docs/architecture.md` names every module of the GPU test binary
//!   (`tests/gpu/main.rs`).

use std::path::Path;

use crate::root;

/// The modules `source` declares (`mod x;`, `pub mod x;`, `pub(crate) mod
/// x;`), test modules (`#[cfg(test)]`, `*_tests`) left out.
pub(crate) fn declared_modules(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut test_only = false;
    for line in source.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            test_only = true;
            continue;
        }
        let rest = ["pub(crate) mod ", "pub(super) mod ", "pub mod ", "mod "]
            .iter()
            .find_map(|p| line.strip_prefix(p));
        if let Some(name) = rest.and_then(|r| r.strip_suffix(';'))
            && !test_only
            && !name.ends_with("_tests")
        {
            out.push(name.to_owned());
        }
        test_only = false;
    }
    out
}

/// The first backticked name of each bullet of `source`'s module doc
/// (`//! - `x`` or `//! - [`x`]`), where it is a module-like name
/// (lower snake case).
pub(crate) fn listed_modules(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("//! - "))
        .filter_map(|b| {
            let b = b.strip_prefix('[').unwrap_or(b);
            let name = b.strip_prefix('`')?.split('`').next()?;
            let name = name.trim_end_matches(".rs").trim_end_matches('/');
            let snake = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            snake.then(|| name.to_owned())
        })
        .collect()
}

/// Whether the module doc of `source` names `module` in backticks.
fn names(source: &str, module: &str) -> bool {
    let doc: String = source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    [
        format!("`{module}`"),
        format!("`{module}.rs`"),
        format!("`{module}/`"),
    ]
    .iter()
    .any(|n| doc.contains(n.as_str()))
}

/// Problems with the module lists of one module file: listed modules that
/// are not declared, and (with `complete`) declared modules not named.
fn check_file(file: &Path, complete: bool, out: &mut Vec<String>) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    let listed = listed_modules(&text);
    if listed.len() < 2 {
        return;
    }
    let declared = declared_modules(&text);
    let at = file
        .strip_prefix(root())
        .unwrap_or(file)
        .display()
        .to_string();
    for name in listed.iter().filter(|n| !declared.contains(n)) {
        out.push(format!(
            "{at}: the doc lists `{name}`, which it does not declare"
        ));
    }
    if complete {
        for name in declared.iter().filter(|m| !names(&text, m)) {
            out.push(format!("{at}: the doc's list leaves out `{name}`"));
        }
    }
}

fn module_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            module_files(&p, out);
        } else if p
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
        {
            out.push(p);
        }
    }
}

/// Every module list that disagrees with the code.
pub(crate) fn module_list_mismatches() -> Vec<String> {
    let mut files = Vec::new();
    module_files(&root().join("crates"), &mut files);
    files.sort();
    let server = root().join("crates/wgpu-server/src");
    let mut out = Vec::new();
    for f in &files {
        check_file(f, f.starts_with(&server), &mut out);
    }
    let arch = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap_or_default();
    let gpu = std::fs::read_to_string(root().join("tests/gpu/main.rs")).unwrap_or_default();
    for m in declared_modules(&gpu).iter().filter(|m| *m != "common") {
        if !arch.contains(&format!("`{m}`")) && !arch.contains(&format!("`{m}/`")) {
            out.push(format!(
                "docs/architecture.md: the GPU test module `{m}` is not listed"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_list_names_the_modules_that_exist() {
        let wrong = module_list_mismatches();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn lists_and_declarations_are_read() {
        let src = "//! - `a`: one;\n//! - [`b`]: two;\n//! - [`Type`]: no\n\
                   pub mod a;\npub(crate) mod b;\n#[cfg(test)]\nmod t;\nmod c_tests;\n";
        assert_eq!(listed_modules(src), ["a", "b"]);
        assert_eq!(declared_modules(src), ["a", "b"]);
        assert!(names(src, "a") && !names(src, "t"));
    }
}
