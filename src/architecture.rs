//! The shape of the code, checked on its own source: each top-level module imports only the
//! modules below it in `LAYERS` (the order `lib.rs` describes), no two files of one folder
//! import each other round a cycle, no pairing pass reaches into another (each pass file
//! imports no other pass file and exposes nothing but its pass), no file of `src/pairing/` but
//! the op table spells an op, no function runs over 80 lines without a comment saying why,
//! and no `too_many_arguments` allowance hides a long parameter list. Test code (`#[cfg(test)]` items) is left out: a test may borrow another
//! module's fixtures. These read `src/` as text, so they run with the unit tests, in
//! milliseconds, without libtorch.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first: each may import those before it, never one after.
/// `text` (plain-text helpers) is at the bottom so that any stage can write a sentence.
const LAYERS: &[&str] = &[
    "text",
    "capture",
    "onnx",
    "pairing",
    "signature",
    "torch",
    "inputs",
    "compare",
    "production",
    "quantized",
    "outcome",
    "report",
    "cli",
    "app",
];

/// Functions longer than this need a comment (`over 80 lines`) saying why.
const MAX_FUNCTION_LINES: usize = 80;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .expect("src is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    files
}

/// `text` with comments, string and char literals blanked to spaces (newlines kept), so
/// that what remains is code whose braces and paths can be counted.
fn code_only(text: &str) -> String {
    blank_literals(text, &mut Vec::new())
}

/// `code_only`, and each string literal's text (escapes as written) with the offset of its
/// opening quote in the code returned, into `literals`.
fn blank_literals(text: &str, literals: &mut Vec<(usize, String)>) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |ch: char| if ch == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
            while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                out.push(blank(c[i]));
                i += 1;
            }
            out.push_str("  ");
            i += 2;
        } else if c[i] == 'r' && (next == Some('"') || next == Some('#')) && is_raw_string(&c, i) {
            let mut j = i + 1;
            let mut hashes = 0;
            while c[j] == '#' {
                hashes += 1;
                j += 1;
            }
            // j is the opening quote; the string ends at a quote followed by as many hashes.
            let mut end = j + 1;
            while end < c.len()
                && !(c[end] == '"' && (1..=hashes).all(|h| c.get(end + h) == Some(&'#')))
            {
                end += 1;
            }
            let stop = (end + hashes + 1).min(c.len());
            literals.push((
                out.len() + j - i,
                c[j + 1..end.min(c.len())].iter().collect(),
            ));
            for &ch in &c[i..stop] {
                out.push(blank(ch));
            }
            i = stop;
        } else if c[i] == '"' {
            let (at, start) = (out.len(), i + 1);
            out.push(' ');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < c.len() {
                    out.push(blank(c[i]));
                    i += 1;
                }
            }
            literals.push((at, c[start..i.min(c.len())].iter().collect()));
            out.push(' ');
            i += 1;
        } else if c[i] == '\'' && next == Some('\\') {
            // An escaped char literal: '\n', '\'', '\u{FFFD}'.
            let mut j = i + 2;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            (i..=j).for_each(|_| out.push(' '));
            i = j + 1;
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            out.push_str("   ");
            i += 3;
        } else {
            // Anything else, a lifetime's quote included, is code.
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Whether `r` at `i` opens a raw string (`r"`, `r#"`) rather than ending an identifier.
fn is_raw_string(c: &[char], i: usize) -> bool {
    if i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_') {
        return false;
    }
    let mut j = i + 1;
    while j < c.len() && c[j] == '#' {
        j += 1;
    }
    c.get(j) == Some(&'"')
}

/// The index of the brace that closes the one at `open`, or the `;` that ends the item at
/// `from` when it has no body; `None` for an unterminated item.
fn item_end(code: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, &b) in code.iter().enumerate().skip(from) {
        match b {
            b';' if depth == 0 => return Some(k),
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The byte ranges of the `#[cfg(test)]` items of `code`.
fn test_items(code: &str) -> Vec<std::ops::RangeInclusive<usize>> {
    let bytes = code.as_bytes();
    let mut items = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("#[cfg(test)]").map(|k| k + from) {
        let end = item_end(bytes, k).unwrap_or(bytes.len() - 1);
        items.push(k..=end);
        from = end + 1;
    }
    items
}

/// `code` with every `#[cfg(test)]` item blanked.
fn without_tests(code: &str) -> String {
    let mut bytes = code.as_bytes().to_vec();
    for item in test_items(code) {
        for b in &mut bytes[item] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    String::from_utf8(bytes).expect("blanking keeps UTF-8")
}

/// Non-test code of a file.
fn production_code(path: &Path) -> String {
    without_tests(&code_only(
        &fs::read_to_string(path).expect("readable source"),
    ))
}

/// The module path segments that follow `prefix` (`crate::`, `super::`) in `code`.
fn paths_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find(prefix).map(|k| k + from) {
        let before = code[..k].chars().next_back();
        from = k + prefix.len();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[from..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        names.push(&rest[..end]);
    }
    names
}

/// The top-level module a file belongs to (`report` for `src/report/html/tree.rs`).
fn top_module(path: &Path) -> String {
    let rel = path.strip_prefix(src()).expect("under src");
    let first = rel.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

#[test]
fn no_module_imports_one_above_it() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for path in all_files() {
        let module = top_module(&path);
        let Some(level) = LAYERS.iter().position(|m| *m == module) else {
            continue;
        };
        checked += 1;
        let code = production_code(&path);
        for used in paths_after(&code, "crate::") {
            if let Some(above) = LAYERS.iter().position(|m| *m == used) {
                if above > level {
                    wrong.push(format!("{} imports crate::{used}", path.display()));
                }
            }
        }
    }
    assert!(checked > 50, "checked only {checked} files");
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "imports against LAYERS:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib = fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    assert!(declared.len() >= 10, "{declared:?}");
    for m in declared {
        assert!(LAYERS.contains(&m), "{m} is not in LAYERS");
    }
}

/// For each file of `dir` (its `mod.rs` aside, which declares the others), the sibling files
/// and folders it imports.
fn sibling_imports(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let rel = dir.strip_prefix(src()).expect("under src");
    let module_path: String = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::");
    let mut siblings = Vec::new();
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("readable") {
        let path = entry.expect("entry").path();
        let name = path
            .file_stem()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            siblings.push(name);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !["mod", "lib", "main", "architecture"].contains(&name.as_str())
        {
            siblings.push(name.clone());
            files.push((name, path));
        }
    }
    let mut graph = BTreeMap::new();
    for (name, path) in files {
        let code = production_code(&path);
        let mut used: Vec<&str> = paths_after(&code, "super::");
        if !module_path.is_empty() {
            used.extend(paths_after(&code, &format!("crate::{module_path}::")));
        } else {
            used.extend(paths_after(&code, "crate::"));
        }
        let mut edges: Vec<String> = used
            .into_iter()
            .filter(|u| *u != name && siblings.iter().any(|s| s == u))
            .map(str::to_string)
            .collect();
        edges.sort();
        edges.dedup();
        graph.insert(name, edges);
    }
    graph
}

/// The pairing passes, each a file of `src/pairing/passes/` (the runner in `mod.rs`).
fn pass_files() -> Vec<PathBuf> {
    let dir = src().join("pairing").join("passes");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    files.retain(|f| f.file_name().is_some_and(|n| n != "mod.rs"));
    files.sort();
    files
}

/// What a pass file reaches in its own folder: the segment after each `super::` that is not
/// itself after a `super::` (`super::super::x` leaves the folder, `super::x` stays in it).
fn own_folder_paths(code: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for (k, _) in code.match_indices("super::") {
        if code[..k].ends_with("super::") || code[..k].ends_with(|c: char| c.is_alphanumeric()) {
            continue;
        }
        let rest = &code[k + "super::".len()..];
        let end = (rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))).unwrap_or(rest.len());
        names.push(&rest[..end]);
    }
    names
}

#[test]
fn no_pairing_pass_reaches_another() {
    let files = pass_files();
    assert!(
        files.len() > 20,
        "the passes are files of src/pairing/passes/"
    );
    let mut offences = Vec::new();
    for path in &files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let code = production_code(path);
        // In its folder a pass sees the runner's `Pass` trait, and nothing of another pass.
        for used in own_folder_paths(&code) {
            if used != "super" && used != "Pass" {
                offences.push(format!("{name} reaches super::{used}"));
            }
        }
        if code.contains("pairing::passes::") {
            offences.push(format!("{name} names pairing::passes::"));
        }
        // The only item it exposes is its pass; its helpers are private to it, so no other
        // pass can call them (a helper two passes share lives outside the folder).
        for line in code.lines().map(str::trim_start) {
            if line.starts_with("pub") && !line.starts_with("pub(super) struct ") {
                offences.push(format!("{name} exposes `{line}`"));
            }
        }
    }
    assert!(offences.is_empty(), "{offences:#?}");
}

#[test]
fn a_pass_reaching_its_folder_is_seen() {
    let code = "use super::super::wiring::x;\nuse super::Pass;\nuse super::fusion::y;\n";
    // The first `super::` of `super::super::` leaves the folder.
    assert_eq!(own_folder_paths(code), ["super", "Pass", "fusion"]);
}

/// The one file of `src/pairing/` that spells ops; every other file asks it.
const OP_TABLE: &str = "pairing/ops/table.rs";

/// The string literals of the non-test code of `text`, with their lines.
fn production_literals(text: &str) -> Vec<(usize, String)> {
    let mut literals = Vec::new();
    let code = blank_literals(text, &mut literals);
    let tests = test_items(&code);
    literals
        .into_iter()
        .filter(|(at, _)| !tests.iter().any(|item| item.contains(at)))
        .map(|(at, s)| (code[..at].matches('\n').count() + 1, s))
        .collect()
}

/// The literals of `text`'s non-test code that spell an op: they open with an op namespace
/// or domain, or are a spelling of the op table.
fn op_spellings(text: &str, table: &[&str]) -> Vec<(usize, String)> {
    const NAMESPACES: &[&str] = &["aten::", "prim::", "onnx::", "com.microsoft::"];
    production_literals(text)
        .into_iter()
        .filter(|(_, s)| NAMESPACES.iter().any(|n| s.starts_with(n)) || table.contains(&s.as_str()))
        .collect()
}

#[test]
fn only_the_op_table_spells_ops() {
    let table = crate::pairing::ops::table_spellings();
    assert!(
        table.len() > 200,
        "the table lists only {} spellings",
        table.len()
    );
    let mut files = Vec::new();
    rust_files(&src().join("pairing"), &mut files);
    assert!(files.len() > 50, "found only {} pairing files", files.len());
    let mut offences = Vec::new();
    for path in files {
        let rel = path.strip_prefix(src()).expect("under src");
        // `tests.rs` is a test module (`#[cfg(test)] mod tests;`), and so is what lies in its
        // folder (`tests/graphs.rs`): hand-built graphs spell ops.
        let test_module =
            rel.ends_with("tests.rs") || rel.parent().is_some_and(|d| d.ends_with("tests"));
        if rel == Path::new(OP_TABLE) || test_module {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for (line, literal) in op_spellings(&text, &table) {
            offences.push(format!("{}:{line} spells {literal:?}", rel.display()));
        }
    }
    assert!(
        offences.is_empty(),
        "ops spelled outside {OP_TABLE} (ask the op table instead):\n{}",
        offences.join("\n")
    );
}

#[test]
fn op_spellings_are_seen_in_code_and_not_in_tests() {
    let text = "fn a(op: &str) -> bool {\n    // \"Relu\" in a comment\n    op == \"Relu\" || op.starts_with(r#\"aten::\"#)\n}\nfn b() -> &'static str { \"not an op\" }\n#[cfg(test)]\nmod tests {\n    const OP: &str = \"prim::Loop\";\n}\n";
    assert_eq!(
        op_spellings(text, &["Relu", "Conv"]),
        [(3, "Relu".to_string()), (3, "aten::".to_string())]
    );
}

/// A cycle in `graph`, as the names round it, if there is one.
fn find_cycle(graph: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, Vec<String>>,
        stack: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(k) = stack.iter().position(|s| s == node) {
            let mut cycle = stack[k..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.iter().any(|d| d == node) {
            return None;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.push(node.to_string());
        None
    }
    let mut done = Vec::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_files_of_one_folder_import_each_other_in_a_cycle() {
    let mut dirs = vec![src()];
    let mut checked = 0;
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
        let graph = sibling_imports(&dir);
        checked += graph.len();
        if let Some(cycle) = find_cycle(&graph) {
            panic!("import cycle in {}: {}", dir.display(), cycle.join(" -> "));
        }
    }
    assert!(checked > 50, "checked only {checked} files");
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().push(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        find_cycle(&graph(&[("a", "b"), ("a", "c"), ("b", "c")])),
        None
    );
}

/// Every function of `path` (with nested ones counted in their parent) as (name, first
/// line, lines), and the source lines.
fn functions(path: &Path) -> Vec<(String, usize, usize)> {
    let code = code_only(&fs::read_to_string(path).expect("readable"));
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for (k, _) in code.match_indices("fn ") {
        let before = code[..k].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[k + 3..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let Some(end) = item_end(bytes, k) else {
            continue;
        };
        if bytes[end] == b';' {
            continue;
        }
        let first = code[..k].matches('\n').count();
        let last = code[..end].matches('\n').count();
        found.push((name, first, last - first + 1));
    }
    found
}

/// Whether the comments just above line `at` (doc comments, attributes and comments,
/// contiguous) say why the function is long.
fn says_why_long(lines: &[&str], at: usize) -> bool {
    lines[..at]
        .iter()
        .rev()
        .take_while(|l| {
            let t = l.trim_start();
            t.starts_with("//") || t.starts_with("#[")
        })
        .any(|l| l.to_lowercase().contains("over 80 lines"))
}

#[test]
fn no_function_runs_over_80_lines_without_saying_why() {
    let mut long = Vec::new();
    let mut counted = 0;
    for path in all_files() {
        let text = fs::read_to_string(&path).expect("readable");
        let lines: Vec<&str> = text.lines().collect();
        for (name, first, n) in functions(&path) {
            counted += 1;
            if n > MAX_FUNCTION_LINES && !says_why_long(&lines, first) {
                long.push(format!(
                    "{}:{} {name} ({n} lines)",
                    path.display(),
                    first + 1
                ));
            }
        }
    }
    assert!(counted > 500, "counted only {counted} functions");
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines with no comment saying why:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_counter_sees_through_strings_and_comments() {
    let dir = std::env::temp_dir().join(format!("align-check-arch-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sample.rs");
    fs::write(
        &path,
        "fn a() {\n    let s = \"}\"; // }\n    let c = '}';\n    let r = r#\"{\"#;\n}\n\ntrait T {\n    fn b(&self);\n}\nfn c<'a>(x: &'a str) -> &'a str {\n    x\n}\n",
    )
    .unwrap();
    let found = functions(&path);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        vec![("a".to_string(), 0, 5), ("c".to_string(), 9, 3)]
    );
}

#[test]
fn no_too_many_arguments_allowances() {
    let allowed: Vec<String> = all_files()
        .into_iter()
        .filter(|p| {
            fs::read_to_string(p)
                .expect("readable")
                .contains(&["clippy::", "too_many_arguments"].concat())
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(allowed.is_empty(), "{allowed:?}");
}
