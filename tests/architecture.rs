//! The workspace's architecture, checked against the sources.
//!
//! Rooms: a crate's root and every module with child modules is a room, and its children
//! are its modules. A room whose root file (`lib.rs`, `main.rs` or `mod.rs`) declares an
//! order in its doc ("..., bottom to top: `a`, `b`, ...") is checked against it: every
//! `crate::`, `super::` or `self::` path in a child's code (comments and `#[cfg(test)]`
//! modules left out, the rest of the file read to its end) may name only children declared
//! before it, and every child must be declared. Every room of every library crate, declared
//! or not, has no import cycle among its children. A reference to a later child is an
//! upward import: the test fails and names the file and the line. Paths are read across
//! lines (rustfmt's groups), with comments and literals left out. What it cannot see: items
//! defined in a room's root file (they belong to no child: `Engine` in `server/mod.rs`),
//! glob imports of a parent (`use super::*`), and what a macro expands to.
//!
//! The rest: each library crate makes public exactly the modules its doc lists (listed here
//! too), `coprocessors` and `index` use only core's public API, one module-file convention
//! (`x/mod.rs`, never `x.rs` beside a directory `x/`), no library file over 600 lines and no
//! type with impl blocks in more than three files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The source directories of the library crates (the facade is `src`). `bench` (a binary of
/// measurements) and `thrift` (generated code) are outside these rules.
const LIBRARY_CRATES: [&str; 7] = [
    "core/src",
    "coprocessors/src",
    "index/src",
    "plugins/src",
    "cluster/src",
    "cli/src",
    "src",
];

/// The rooms that must declare their order.
const DECLARED_ROOMS: [(&str, &str); 8] = [
    ("core/src", ""),
    ("core/src", "server"),
    ("core/src", "server/open"),
    ("coprocessors/src", ""),
    ("index/src", ""),
    ("plugins/src", ""),
    ("cluster/src", ""),
    ("cli/src", ""),
];

/// Each library crate's public modules, as its doc lists them (sorted).
const PUBLIC_MODULES: [(&str, &[&str]); 6] = [
    (
        "core/src",
        &[
            "cell",
            "client",
            "coord",
            "coprocessor",
            "endpoint",
            "filter",
            "fs",
            "keys",
            "objects",
            "repair",
        ],
    ),
    ("coprocessors/src", &["relations"]),
    ("index/src", &[]),
    ("plugins/src", &[]),
    ("cluster/src", &["master", "regionserver", "rpc"]),
    ("cli/src", &[]),
];

/// The doc comment (`//!`) of a file, as one line.
fn doc_of(text: &str) -> String {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The backquoted names after `heading` in `doc`, up to the period that ends the
/// sentence, in the order written; `None` when the doc has no such sentence.
fn declared_list(doc: &str, heading: &str) -> Option<Vec<String>> {
    let start = doc.find(heading)? + heading.len();
    let sentence = &doc[start..];
    let end = sentence.find('.').unwrap_or(sentence.len());
    Some(
        sentence[..end]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// A room's declared order, bottom to top, if its root file declares one.
fn declared_order(root_text: &str) -> Option<Vec<String>> {
    declared_list(&doc_of(root_text), "bottom to top:")
}

/// The root file of the room `room` (a `/`-separated module path, empty for the crate).
fn room_root(src: &Path, room: &str) -> PathBuf {
    if room.is_empty() {
        let lib = src.join("lib.rs");
        return if lib.exists() {
            lib
        } else {
            src.join("main.rs")
        };
    }
    src.join(room).join("mod.rs")
}

/// The child modules of a room: its `.rs` files and its directories (tests left out).
fn children(src: &Path, room: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(src.join(room)).expect("readable room") {
        let p = e.expect("directory entry").path();
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        if p.is_dir() {
            if name != "tests" {
                out.insert(name);
            }
        } else if let Some(stem) = name.strip_suffix(".rs") {
            if !["lib", "main", "mod", "tests"].contains(&stem) {
                out.insert(stem.to_string());
            }
        }
    }
    out
}

/// Every room of a crate: its root and each directory of modules (tests left out).
fn rooms(src: &Path) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(src.join(&rel)).expect("readable source directory") {
            let p = e.expect("directory entry").path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "tests") {
                let r = rel.join(p.file_name().expect("a name"));
                out.push(r.to_string_lossy().replace('\\', "/"));
                stack.push(r);
            }
        }
    }
    out.sort();
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

/// The module path of a source file of the crate at `src`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("inside src");
    let mut parts: Vec<String> = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !["mod", "lib", "main"].contains(&stem) {
        parts.push(stem.to_string());
    }
    parts
}

/// The code of a file, as text of the same lines: comments, and the contents of string and
/// char literals (raw strings included), become spaces; then every `#[cfg(test)]` module
/// (a `mod x;` line, or a block to its closing brace) becomes blank lines. The rest of the
/// file is kept to its end.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && !ident_before && matches!(next, Some('"') | Some('#')) && {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            chars.get(i + 1 + hashes) == Some(&'"')
        } {
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            out.push('r');
            i += 1;
            for _ in 0..hashes + 1 {
                out.push(' ');
                i += 1;
            }
            while i < chars.len() {
                let closes =
                    chars[i] == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#'));
                if closes {
                    for _ in 0..hashes + 1 {
                        out.push(' ');
                        i += 1;
                    }
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() {
                if chars[i] == '\\' {
                    out.push(' ');
                    if let Some(&e) = chars.get(i + 1) {
                        out.push(blank(e));
                    }
                    i += 2;
                    continue;
                }
                if chars[i] == '"' {
                    out.push(' ');
                    i += 1;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '\'' && next == Some('\\') {
            // An escaped char literal: '\n', '\'', '\u{..}'.
            let end = (i + 2..chars.len()).find(|k| chars[*k] == '\'' && *k > i + 2);
            let end = end.unwrap_or(i + 1);
            for _ in i..=end {
                out.push(' ');
            }
            i = end + 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            out.push_str("   ");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    // Test modules.
    let mut lines: Vec<String> = out.split('\n').map(str::to_string).collect();
    let mut n = 0;
    while n < lines.len() {
        if lines[n].trim() != "#[cfg(test)]" {
            n += 1;
            continue;
        }
        let Some(item) = lines.get(n + 1).map(|l| l.trim().to_string()) else {
            break;
        };
        if !(item.starts_with("mod ")
            || item.starts_with("pub mod ")
            || item.starts_with("pub(crate) mod "))
        {
            n += 1;
            continue;
        }
        if item.ends_with(';') {
            lines[n + 1].clear();
            n += 2;
            continue;
        }
        let mut depth = 0i32;
        let mut opened = false;
        let mut j = n + 1;
        while j < lines.len() {
            for ch in lines[j].chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            lines[j].clear();
            j += 1;
            if opened && depth <= 0 {
                break;
            }
        }
        n = j;
    }
    lines.join("\n")
}

/// The paths a `crate::`/`super::`/`self::` path starting at `s` names (a group names one
/// per item, nested groups included), relative to its head.
fn parse_paths(s: &str) -> Vec<Vec<String>> {
    fn ident(s: &str) -> (&str, &str) {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        (&s[..end], &s[end..])
    }
    fn walk(mut s: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
        let start_len = s.len();
        let mut path = prefix;
        loop {
            s = s.trim_start();
            if let Some(group) = s.strip_prefix('{') {
                let mut rest = group;
                loop {
                    rest = rest.trim_start();
                    if let Some(r) = rest.strip_prefix('}') {
                        rest = r;
                        break;
                    }
                    if rest.is_empty() {
                        break;
                    }
                    let used = walk(rest, path.clone(), out);
                    rest = &rest[used..];
                    rest = rest.trim_start();
                    if let Some(r) = rest.strip_prefix(',') {
                        rest = r;
                    } else if !rest.starts_with('}') {
                        // Not a group we understand (`as` renames end the item here).
                        let skip = rest.find([',', '}']).unwrap_or(rest.len());
                        rest = &rest[skip..];
                        if let Some(r) = rest.strip_prefix(',') {
                            rest = r;
                        }
                    }
                }
                s = rest;
                return start_len - s.len();
            }
            let (name, rest) = ident(s);
            if name.is_empty() {
                break;
            }
            path.push(name.to_string());
            s = rest;
            match s.strip_prefix("::") {
                Some(r) => s = r,
                None => break,
            }
        }
        out.push(path);
        start_len - s.len()
    }
    let mut out = Vec::new();
    walk(s, Vec::new(), &mut out);
    out
}

/// The module paths (from the crate root) `me`'s code names, each with the byte offset
/// where its path starts (a path may run over several lines, as rustfmt writes groups).
fn references(me: &[String], code: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for head in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(head) {
            let at = from + at;
            from = at + head.len();
            let boundary = at == 0 || {
                let c = bytes[at - 1] as char;
                !(c.is_alphanumeric() || c == '_' || c == ':')
            };
            if !boundary {
                continue;
            }
            let base: Vec<String> = match head {
                "crate::" => Vec::new(),
                "self::" => me.to_vec(),
                _ => me[..me.len().saturating_sub(1)].to_vec(),
            };
            for mut path in parse_paths(&code[from..]) {
                // `super::super::x`, `self::super::x`: each `super` climbs one module.
                let mut full = base.clone();
                while path.first().is_some_and(|p| p == "super") {
                    path.remove(0);
                    full.pop();
                }
                full.extend(path);
                out.push((at, full));
            }
        }
    }
    out
}

/// For each child of `room`, the children of `room` its code names, with where.
fn room_references(src: &Path, room: &str) -> Vec<(String, String, String)> {
    let prefix: Vec<String> = room
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    let kids = children(src, room);
    let mut files = Vec::new();
    rust_files(&src.join(room), &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let me_path = module_path(src, &file);
        if me_path.len() <= prefix.len() || me_path[..prefix.len()] != prefix[..] {
            continue; // the room's own root file
        }
        let me = me_path[prefix.len()].clone();
        let text = std::fs::read_to_string(&file).expect("readable source");
        let rel = file
            .strip_prefix(src)
            .unwrap_or(&file)
            .display()
            .to_string();
        let code = code_of(&text);
        for (at, target) in references(&me_path, &code) {
            let line = code[..at].matches('\n').count() + 1;
            {
                if target.len() > prefix.len() && target[..prefix.len()] == prefix[..] {
                    let t = &target[prefix.len()];
                    if *t != me && kids.contains(t) {
                        out.push((me.clone(), t.clone(), format!("{rel}:{line}")));
                    }
                }
            }
        }
    }
    out
}

/// The upward references of a room with a declared order (as "file:line: a -> b"), and
/// the children missing from its order (or declared and absent).
fn violations(src: &Path, room: &str) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(room_root(src, room)).expect("the room's root file");
    let order = declared_order(&text).unwrap_or_default();
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let kids = children(src, room);
    let mut undeclared: Vec<String> = kids
        .iter()
        .filter(|k| !rank.contains_key(k.as_str()))
        .cloned()
        .collect();
    undeclared.extend(
        order
            .iter()
            .filter(|m| !kids.contains(*m))
            .map(|m| format!("{m} (declared, no such module)")),
    );
    let mut upward = Vec::new();
    for (me, target, at) in room_references(src, room) {
        if let (Some(a), Some(b)) = (rank.get(me.as_str()), rank.get(target.as_str())) {
            if b > a {
                upward.push(format!(
                    "{at}: {me} -> {target} ({target} is declared above {me})"
                ));
            }
        }
    }
    (upward, undeclared)
}

/// The import cycles among a room's children (strongly connected parts of more than one).
fn cycles(src: &Path, room: &str) -> Vec<Vec<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (me, target, _) in room_references(src, room) {
        edges.entry(me).or_default().insert(target);
    }
    let nodes: BTreeSet<String> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a.clone()).chain(bs.iter().cloned()))
        .collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in &nodes {
        let part: Vec<String> = nodes
            .iter()
            .filter(|m| *m == n || (reaches[n].contains(*m) && reaches[*m].contains(n)))
            .cloned()
            .collect();
        if part.len() > 1 && !out.contains(&part) {
            out.push(part);
        }
    }
    out
}

#[test]
fn declared_rooms_use_only_the_children_below_them() {
    let mut failures = Vec::new();
    for krate in LIBRARY_CRATES {
        let src = root().join(krate);
        for room in rooms(&src) {
            let Ok(text) = std::fs::read_to_string(room_root(&src, &room)) else {
                continue;
            };
            let declared = declared_order(&text);
            if declared.is_none() {
                if DECLARED_ROOMS.contains(&(krate, room.as_str())) {
                    failures.push(format!("{krate} {room}: no declared order"));
                }
                continue;
            }
            let (upward, undeclared) = violations(&src, &room);
            for u in upward {
                failures.push(format!("{krate}/{u}"));
            }
            for u in undeclared {
                failures.push(format!("{krate} {room}: not in the declared order: {u}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "upward references or undeclared modules (a module may use only the modules declared \
         before it in its room):\n{}",
        failures.join("\n")
    );
}

#[test]
fn no_room_has_an_import_cycle() {
    let mut found = Vec::new();
    for krate in LIBRARY_CRATES {
        let src = root().join(krate);
        for room in rooms(&src) {
            for c in cycles(&src, &room) {
                found.push(format!("{krate} {room}: {}", c.join(", ")));
            }
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for e in std::fs::read_dir(from).expect("readable") {
        let p = e.expect("entry").path();
        let dest = to.join(p.file_name().expect("a name"));
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).expect("copy");
        }
    }
}

/// The fixtures: in a copy of each declared room, the bottom child gets references to the
/// top one after a test module (a `use` line, a path in code, a grouped import, a group
/// over several lines); the checker reports each, and nothing else.
#[test]
fn a_planted_upward_reference_fails_each_room() {
    for (krate, room) in DECLARED_ROOMS {
        let src = root().join(krate);
        let text = std::fs::read_to_string(room_root(&src, room)).expect("root file");
        let order = declared_order(&text).expect("a declared order");
        let (bottom, top) = (order[0].clone(), order[order.len() - 1].clone());
        let dir = tempfile::tempdir().expect("temporary directory");
        copy_dir(&src, dir.path());
        let room_dir = dir.path().join(room);
        let file = if room_dir.join(&bottom).is_dir() {
            room_dir.join(&bottom).join("mod.rs")
        } else {
            room_dir.join(format!("{bottom}.rs"))
        };
        let path = room
            .split('/')
            .filter(|p| !p.is_empty())
            .chain([top.as_str()])
            .collect::<Vec<_>>()
            .join("::");
        let parent = room
            .split('/')
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>();
        let grouped = match parent.split_last() {
            Some((last, [])) => {
                format!("use crate::{{{last}::{{{top}::Planted}}}};")
            }
            Some((last, rest)) => format!(
                "use crate::{}::{{{last}::{top}::Planted}};",
                rest.join("::")
            ),
            None => format!("use crate::{{{top}::Planted}};"),
        };
        let mut planted = std::fs::read_to_string(&file).expect("bottom file");
        planted.push_str(&format!(
            "\n#[cfg(test)]\nmod planted_tests;\nuse crate::{path}::Planted;\nfn planted() {{ crate::{path}::f(); }}\n{grouped}\nuse crate::{{\n    {path}::Wrapped,\n}};\n"
        ));
        std::fs::write(&file, planted).expect("plant");
        let (upward, undeclared) = violations(dir.path(), room);
        assert!(undeclared.is_empty(), "{krate} {room}: {undeclared:?}");
        assert_eq!(
            upward.len(),
            4,
            "{krate} {room}: the four planted references, no other: {upward:#?}"
        );
        assert!(
            upward
                .iter()
                .all(|u| u.contains(&format!("{bottom} -> {top}"))),
            "{upward:?}"
        );
    }
}

/// The checker itself, on a small crate: it finds an upward import, a grouped one, one over
/// several lines, `super::` and `self::super::` paths and one after a test module, and
/// ignores comments, strings (raw ones included) and test modules.
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
        concat!(
            "use crate::{low, high::Thing};\n",
            "#[cfg(test)]\n",
            "mod tests {\n",
            "    use crate::high;\n",
            "    fn f() { let _ = \"}\"; let _ = r#\"say \"{\"#; }\n",
            "}\n",
            "fn g() { super::high::h(); }\n",
            "#[cfg(test)]\n",
            "mod more;\n",
            "use self::super::low::X;\n",
            "use crate::{\n",
            "    low::Y,\n",
            "    high::Z,\n",
            "};\n",
            "/* crate::high::in_block */ fn s() -> &'static str { \"crate::high::in_string\" }\n",
            "fn k() { let _ = '{'; self::super::high::w(); }\n",
        ),
    )
    .expect("write");
    std::fs::write(
        src.join("high.rs"),
        "use crate::mid::X;\nfn f() { crate::low::g(); }\n",
    )
    .expect("write");
    let (upward, undeclared) = violations(src, "");
    assert_eq!(
        upward,
        [
            "mid.rs:1: mid -> high (high is declared above mid)",
            "mid.rs:11: mid -> high (high is declared above mid)",
            "mid.rs:7: mid -> high (high is declared above mid)",
            "mid.rs:16: mid -> high (high is declared above mid)",
        ]
    );
    assert!(undeclared.is_empty(), "{undeclared:?}");
    assert_eq!(cycles(src, ""), [["high", "mid"]]);
    std::fs::write(src.join("low.rs"), "use crate::mid::Y;\n").expect("write");
    assert_eq!(cycles(src, ""), [["high", "low", "mid"]]);
    std::fs::write(src.join("extra.rs"), "").expect("write");
    assert_eq!(violations(src, "").1, ["extra"]);
}

#[test]
fn paths_are_read_with_their_groups() {
    let me = vec![
        "server".to_string(),
        "write".to_string(),
        "atomic".to_string(),
    ];
    let r = references(
        &me,
        "use crate::server::{config::Config, hooks::{\n    rows,\n    lifecycle,\n}};\nsuper::super::read::x; self::y; self::super::prepare::z",
    );
    let names: Vec<String> = r.iter().map(|(_, p)| p.join("::")).collect();
    assert_eq!(
        names,
        [
            "server::config::Config",
            "server::hooks::rows",
            "server::hooks::lifecycle",
            "server::read::x",
            "server::write::atomic::y",
            "server::write::prepare::z"
        ]
    );
}

#[test]
fn one_module_file_convention() {
    let mut both = Vec::new();
    for krate in LIBRARY_CRATES
        .iter()
        .chain(["bench/src", "thrift/src"].iter())
    {
        let src = root().join(krate);
        for room in rooms(&src) {
            if room.is_empty() {
                continue;
            }
            let dir = src.join(&room);
            if dir.with_extension("rs").exists() {
                both.push(format!("{krate}/{room}.rs beside {krate}/{room}/"));
            }
        }
    }
    assert!(
        both.is_empty(),
        "a module is `x/mod.rs` when it has a directory:\n{}",
        both.join("\n")
    );
}

/// The modules a crate's `lib.rs` makes public (`pub mod x;` or `pub mod x {`).
fn public_modules(lib: &str) -> Vec<String> {
    let mut names: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(['{', ';', ' ']).trim().to_string())
        .collect();
    names.sort();
    names
}

/// Every library crate's public API is the modules its doc lists (and this test lists) and
/// its root's re-exports; `coprocessors` and `index` name nothing else of `basalt_core`
/// (the compiler refuses private modules; this keeps the list honest when a module is made
/// public again).
#[test]
fn public_apis_are_curated() {
    for (krate, expected) in PUBLIC_MODULES {
        let lib = std::fs::read_to_string(root().join(krate).join("lib.rs")).expect("lib.rs");
        let mut declared = declared_list(&doc_of(&lib), "Public modules:")
            .unwrap_or_else(|| panic!("{krate}/lib.rs's doc lists no \"Public modules:\""));
        declared.sort();
        assert_eq!(
            declared, expected,
            "{krate}: the doc's list and this test's"
        );
        assert_eq!(
            public_modules(&lib),
            expected,
            "{krate}/lib.rs makes public exactly the modules its doc lists"
        );
    }
    let core_lib = std::fs::read_to_string(root().join("core/src/lib.rs")).expect("lib.rs");
    let public = PUBLIC_MODULES[0].1;
    let private: Vec<String> = declared_order(&core_lib)
        .expect("core's layers")
        .into_iter()
        .filter(|m| !public.contains(&m.as_str()))
        .collect();
    assert!(private.contains(&"server".to_string()), "{private:?}");
    let mut found = Vec::new();
    for krate in ["coprocessors", "index"] {
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), &mut files);
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
    LIBRARY_CRATES.iter().map(|d| root().join(d)).collect()
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
            for code in code_of(&text).lines() {
                if let Some(ty) = implemented_type(code) {
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
