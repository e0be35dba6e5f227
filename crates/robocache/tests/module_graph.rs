//! The facade's modules depend on each other one way: this test reads the
//! `use` declarations and `crate::…` paths of every file under `src/`,
//! resolves each to the file that defines it (through the re-exports of
//! `lib.rs` and of each `mod.rs`), and fails on
//!
//! - a file of the CUDA backend (`src/cuda/`) that reaches into the loader
//!   or the windows (it sees the descriptors in `ops::descriptors` and
//!   `assembly` instead), and
//! - two files that import each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path (`["cuda", "resample"]`; the crate root is empty).
type ModulePath = Vec<String>;

struct Crate {
    /// Every module and its file, relative to `src/`.
    files: BTreeMap<ModulePath, String>,
    /// Each file's source.
    sources: BTreeMap<String, String>,
}

impl Crate {
    fn read() -> Crate {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("src readable") {
                let path: PathBuf = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let relative = path.strip_prefix(&src).expect("under src").to_string_lossy().replace('\\', "/");
                let mut module: ModulePath = relative.trim_end_matches(".rs").split('/').map(String::from).collect();
                if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                    module.pop();
                }
                sources.insert(relative.clone(), std::fs::read_to_string(&path).expect("source readable"));
                files.insert(module, relative);
            }
        }
        Crate { files, sources }
    }

    /// The module of `file`.
    fn module_of(&self, file: &str) -> ModulePath {
        self.files.iter().find(|(_, f)| f.as_str() == file).map(|(m, _)| m.clone()).expect("known file")
    }

    /// The file that defines what `path` (absolute, from the crate root)
    /// names: the longest module prefix, followed through that module's
    /// re-exports when the next segment is one of them.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        let mut module: ModulePath = Vec::new();
        for segment in path {
            let mut next = module.clone();
            next.push(segment.clone());
            if self.files.contains_key(&next) {
                module = next;
                continue;
            }
            // Not a module: an item of `module`, perhaps re-exported from another.
            if depth < 4 {
                if let Some(target) = self.reexport(&module, segment) {
                    return self.resolve(&target, depth + 1).or_else(|| self.files.get(&module).cloned());
                }
            }
            break;
        }
        self.files.get(&module).cloned()
    }

    /// Where `module` re-exports `name` from (`pub use a::b::{name, …}`).
    fn reexport(&self, module: &ModulePath, name: &str) -> Option<Vec<String>> {
        let source = &self.sources[self.files.get(module)?];
        for statement in use_statements(source) {
            let statement = statement.trim();
            let Some(rest) = statement.strip_prefix("pub use ").or_else(|| statement.strip_prefix("pub(crate) use "))
            else {
                continue;
            };
            for path in expand(rest.trim_end_matches(';')) {
                let segments: Vec<&str> = path.split("::").collect();
                let last = segments.last().copied().unwrap_or_default();
                let last = last.rsplit(" as ").next().unwrap_or(last);
                if last == name {
                    return Some(absolute(module, &segments[..segments.len() - 1]));
                }
            }
        }
        None
    }

    /// Every file `file` imports (by `use` or by a `crate::…` path).
    fn imports(&self, file: &str) -> BTreeSet<String> {
        self.paths(file).iter().filter_map(|p| self.resolve(p, 0)).filter(|f| f != file).collect()
    }

    /// Every path `file` names in a `use` or as `crate::…`, from the crate root.
    fn paths(&self, file: &str) -> Vec<Vec<String>> {
        let module = self.module_of(file);
        let source = strip_comments(&self.sources[file]);
        let mut paths: Vec<Vec<String>> = Vec::new();
        for statement in use_statements(&source) {
            let statement = statement.trim();
            let body = statement.split_once("use ").map(|(_, b)| b).unwrap_or_default().trim_end_matches(';');
            for path in expand(body) {
                let segments: Vec<&str> = path.split("::").map(|s| s.split(" as ").next().unwrap_or(s)).collect();
                if matches!(segments.first(), Some(&("crate" | "super" | "self"))) {
                    paths.push(absolute(&module, &segments));
                }
            }
        }
        for (at, _) in source.match_indices("crate::") {
            let tail: String =
                source[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            let segments: Vec<&str> = tail.trim_end_matches(':').split("::").collect();
            paths.push(absolute(&module, &segments));
        }
        paths
    }
}

/// `use` declarations (each up to its `;`), by text.
fn use_statements(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = source.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("use ") || trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ") {
            let mut statement = trimmed.to_owned();
            while !statement.contains(';') {
                match lines.next() {
                    Some(more) => statement.push_str(more.trim()),
                    None => break,
                }
            }
            out.push(statement);
        }
    }
    out
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else { return vec![tree.to_owned()] };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            expand(p).into_iter().map(move |e| {
                if e == "self" {
                    prefix.trim_end_matches("::").to_owned()
                } else {
                    format!("{prefix}{e}")
                }
            })
        })
        .collect()
}

/// A path as segments from the crate root (`crate::`, `super::`, `self::`,
/// or relative to `module`).
fn absolute(module: &ModulePath, segments: &[&str]) -> Vec<String> {
    let mut base = module.clone();
    let mut rest = segments;
    match rest.first() {
        Some(&"crate") => {
            base.clear();
            rest = &rest[1..];
        }
        _ => {
            while let Some(&"super") = rest.first() {
                base.pop();
                rest = &rest[1..];
            }
            if let Some(&"self") = rest.first() {
                rest = &rest[1..];
            }
        }
    }
    base.extend(rest.iter().map(|s| s.to_string()));
    base
}

fn strip_comments(source: &str) -> String {
    source.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

#[test]
fn the_cuda_backend_does_not_import_the_loader_or_the_windows() {
    let krate = Crate::read();
    let mut found = Vec::new();
    for file in krate.sources.keys().filter(|f| f.starts_with("cuda/")) {
        for import in krate.imports(file) {
            if import.starts_with("loader/") || import == "windows.rs" {
                found.push(format!("{file} imports {import}"));
            }
        }
        // Nor through their re-exports.
        for path in krate.paths(file) {
            if matches!(path.first().map(String::as_str), Some("loader" | "windows")) {
                found.push(format!("{file} names crate::{}", path.join("::")));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn no_two_files_import_each_other() {
    let krate = Crate::read();
    let graph: BTreeMap<&String, BTreeSet<String>> = krate.sources.keys().map(|f| (f, krate.imports(f))).collect();
    let mut cycles = Vec::new();
    for (file, imports) in &graph {
        for import in imports {
            if import.as_str() > file.as_str() && graph.get(import).is_some_and(|back| back.contains(*file)) {
                cycles.push(format!("{file} <-> {import}"));
            }
        }
    }
    assert!(cycles.is_empty(), "{cycles:#?}");
}

#[test]
fn the_resolver_follows_reexports_and_relative_paths() {
    let krate = Crate::read();
    let imports = krate.imports("cuda/resample.rs");
    for expected in ["ops/descriptors.rs", "cuda/backend.rs", "cuda/error.rs", "tensor.rs", "device.rs"] {
        assert!(imports.contains(expected), "cuda/resample.rs should import {expected}: {imports:?}");
    }
    assert!(krate.imports("loader/mod.rs").contains("assembly.rs"));
    assert_eq!(expand("a::{b, c::{d, e}}"), ["a::b", "a::c::d", "a::c::e"]);
}
