//! The layering of `basalt-core`: the order `core/src/lib.rs` declares ("Layers, bottom to
//! top: ..."), checked against the sources. Every `crate::<module>` path in a top-level
//! module's code (comments and `#[cfg(test)]` modules left out) must name a module declared
//! before it; every top-level module must be declared. A reference to a later module is an
//! upward import, and with it an import cycle becomes possible: the test fails and names the
//! file and the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn core_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("core")
        .join("src")
}

/// The backquoted names after `heading` in `core/src/lib.rs`'s doc, up to the period that
/// ends the sentence, in the order written.
fn declared_list(lib: &str, heading: &str) -> Vec<String> {
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join(" ");
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("core/src/lib.rs's doc has no {heading:?}"));
    let sentence = &doc[start..];
    let end = sentence.find('.').expect("the list ends with a period");
    sentence[..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The declared order, bottom to top.
fn declared_layers(lib: &str) -> Vec<String> {
    declared_list(lib, "Layers, bottom to top:")
}

/// The code of a file without comments and without its `#[cfg(test)] mod` block.
fn code_of(text: &str) -> Vec<(usize, String)> {
    let cut = text
        .find("#[cfg(test)]\nmod ")
        .or_else(|| text.find("#[cfg(test)]\npub mod "))
        .unwrap_or(text.len());
    text[..cut]
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let code = match l.find("//") {
                Some(at) => &l[..at],
                None => l,
            };
            (i + 1, code.to_string())
        })
        .collect()
}

/// The top-level modules each `crate::X` path in `code` names.
fn named_modules(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `use crate::{a, b::c}`: the first segment of each item.
            let inner = group.split('}').next().unwrap_or("");
            for item in inner.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
        rest = after;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable source directory") {
        let p = e.expect("directory entry").path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "tests") {
                continue; // unit-test directories
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The upward references in `src`, as "file:line: module -> later module".
fn violations(src: &Path) -> (Vec<String>, Vec<String>) {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("core/src/lib.rs");
    let layers = declared_layers(&lib);
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    let mut undeclared = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("inside src");
        let top = rel
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .unwrap_or("");
        let me = top.strip_suffix(".rs").unwrap_or(top);
        if me == "lib" || rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let Some(&my_rank) = rank.get(me) else {
            undeclared.push(me.to_string());
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (line, code) in code_of(&text) {
            for target in named_modules(&code) {
                if target == me {
                    continue;
                }
                match rank.get(target.as_str()) {
                    Some(&r) if r < my_rank => {}
                    Some(_) => upward.push(format!(
                        "{}:{line}: {me} -> {target} ({target} is declared above {me})",
                        rel.display()
                    )),
                    None => undeclared.push(target),
                }
            }
        }
    }
    undeclared.sort();
    undeclared.dedup();
    (upward, undeclared)
}

#[test]
fn core_modules_use_only_the_layers_below_them() {
    let (upward, undeclared) = violations(&core_src());
    assert!(
        undeclared.is_empty(),
        "modules missing from the declared layers in core/src/lib.rs: {undeclared:?}"
    );
    assert!(
        upward.is_empty(),
        "upward references (a module may use only the modules declared before it):\n{}",
        upward.join("\n")
    );
}

/// The checker itself: it finds an upward import, a grouped one, and ignores comments and
/// test modules.
#[test]
fn the_checker_finds_upward_references() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let src = dir.path();
    std::fs::write(
        src.join("lib.rs"),
        "//! Layers, bottom to top: `low`, `mid`, `high`.\n",
    )
    .expect("write");
    std::fs::write(
        src.join("low.rs"),
        "// crate::high in a comment\nuse crate::error;\n",
    )
    .expect("write");
    std::fs::write(
        src.join("mid.rs"),
        "use crate::{low, high::Thing};\n#[cfg(test)]\nmod tests { use crate::high; }\n",
    )
    .expect("write");
    std::fs::write(
        src.join("high.rs"),
        "use crate::mid::X;\nfn f() { crate::low::g(); }\n",
    )
    .expect("write");
    let (upward, undeclared) = violations(src);
    assert_eq!(
        upward,
        ["mid.rs:1: mid -> high (high is declared above mid)"]
    );
    assert_eq!(undeclared, ["error"]);
}

/// The public modules `core/src/lib.rs`'s doc lists, sorted.
fn declared_public_modules(lib: &str) -> Vec<String> {
    let mut names = declared_list(lib, "Public modules:");
    names.sort();
    names
}

/// The modules `core/src/lib.rs` makes public (`pub mod x;` or `pub mod x {`).
fn public_modules(lib: &str) -> Vec<String> {
    let mut names: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(['{', ';', ' ']).trim().to_string())
        .collect();
    names.sort();
    names
}

/// Core's public API is the modules its doc lists and the root's re-exports; `coprocessors`
/// and `index` name nothing else of `basalt_core` (the compiler refuses private modules;
/// this keeps the list honest when a module is made public again).
#[test]
fn coprocessors_and_index_use_only_cores_public_api() {
    let lib = std::fs::read_to_string(core_src().join("lib.rs")).expect("core/src/lib.rs");
    let public = declared_public_modules(&lib);
    assert_eq!(
        public_modules(&lib),
        public,
        "core/src/lib.rs makes public exactly the modules its doc lists"
    );
    let layers = declared_layers(&lib);
    let private: Vec<&String> = layers.iter().filter(|m| !public.contains(m)).collect();
    assert!(private.contains(&&"server".to_string()), "{private:?}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in ["coprocessors", "index"] {
        let mut files = Vec::new();
        rust_files(&root.join(krate).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source file");
            for (n, line) in text.lines().enumerate() {
                for module in &private {
                    if line.contains(&format!("basalt_core::{module}::")) {
                        found.push(format!(
                            "{}:{}: basalt_core::{module}",
                            file.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "coprocessors and index reach core's private modules:\n{}",
        found.join("\n")
    );
}

/// The library crates whose sources the size rules below cover.
fn library_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    ["core/src", "coprocessors/src", "index/src", "src"]
        .iter()
        .map(|d| root.join(d))
        .collect()
}

/// The type an `impl` line implements (`impl<T> Trait for Type<T> {` -> `Type`), if the
/// line opens an impl block.
fn implemented_type(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("impl")?;
    let mut rest = rest.trim_start();
    if !(line.trim_start().starts_with("impl<") || line.trim_start().starts_with("impl ")) {
        return None;
    }
    if let Some(generics) = rest.strip_prefix('<') {
        // Skip the impl's own generic parameters, nested brackets included.
        let mut depth = 1usize;
        let mut end = generics.len();
        for (i, c) in generics.char_indices() {
            match c {
                '<' => depth += 1,
                '>' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = generics[end..].trim_start();
    }
    let header = rest.split(['{', '\n']).next()?.split(" where").next()?;
    let target = match header.find(" for ") {
        Some(at) => &header[at + " for ".len()..],
        None => header,
    };
    let target = target
        .trim()
        .trim_start_matches('&')
        .trim_start_matches("dyn ");
    let path = target.split('<').next()?.trim();
    let name = path.rsplit("::").next()?.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| name.to_string())
}

#[test]
fn implemented_type_reads_impl_headers() {
    assert_eq!(implemented_type("impl Engine {"), Some("Engine".into()));
    assert_eq!(
        implemented_type("impl<B: Backend> Clone for Table<B> {"),
        Some("Table".into())
    );
    assert_eq!(
        implemented_type("    impl<'a, T: Fn(&[u8]) -> Vec<u8>> crate::x::Tr<T> for a::b::C<'a, T> where T: Send {"),
        Some("C".into())
    );
    assert_eq!(implemented_type("let implicit = 1;"), None);
    assert_eq!(
        implemented_type("fn f() -> impl Iterator<Item = u8> {"),
        None
    );
}

/// Issue 24: no type of a library crate has impl blocks in more than three files (a type
/// spread over many files is an engine-sized knot again), and no library source file is
/// longer than 600 lines.
#[test]
fn types_stay_in_three_files_and_files_under_600_lines() {
    let mut spread = Vec::new();
    let mut long = Vec::new();
    for src in library_sources() {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut impls: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for file in &files {
            let text = std::fs::read_to_string(file).expect("readable source");
            let lines = text.lines().count();
            if lines > 600 {
                long.push(format!("{}: {lines} lines", file.display()));
            }
            for (_, code) in code_of(&text) {
                if let Some(ty) = implemented_type(&code) {
                    let seen = impls.entry(ty).or_default();
                    if !seen.contains(file) {
                        seen.push(file.clone());
                    }
                }
            }
        }
        for (ty, files) in impls {
            if files.len() > 3 {
                let names: Vec<String> = files
                    .iter()
                    .map(|f| f.strip_prefix(&src).unwrap_or(f).display().to_string())
                    .collect();
                spread.push(format!("{} in {}: {}", ty, src.display(), names.join(", ")));
            }
        }
    }
    assert!(
        long.is_empty(),
        "library files over 600 lines:\n{}",
        long.join("\n")
    );
    assert!(
        spread.is_empty(),
        "types with impl blocks in more than three files:\n{}",
        spread.join("\n")
    );
}
