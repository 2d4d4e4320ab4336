//! The crate's top-level modules form layers, and a module may refer only to modules in lower
//! layers: no import cycle, and the analysis never reaches up to the verdicts or the report.
//! This test reads `src/` and checks every `crate::<module>` path outside comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules and their layer; a module imports only strictly lower layers.
const LAYERS: [(&str, u8); 13] = [
    ("stats", 0),
    ("fsutil", 0),
    ("ingest", 1),
    ("synth", 1),
    ("analysis", 2),
    ("diagnose", 3),
    ("instrument_check", 3),
    ("noise_calibration", 3),
    ("verdicts", 3),
    ("report", 4),
    ("pipeline", 5),
    ("orchestrate", 6),
    ("cli", 7),
];

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("module `{module}` is not in module_graph::LAYERS"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`analysis/cells.rs` → `analysis`); `None` for the
/// crate roots and this test.
fn owner(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (!matches!(name.as_str(), "lib" | "main" | "module_graph")).then_some(name)
}

/// Source without `//` comments (line and doc comments; a `//` inside a string also ends the
/// line, which can only hide references, never invent them).
fn code(src: &str) -> String {
    src.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Top-level modules named by `crate::x` paths, including `crate::{x, y::z}` groups.
fn references(src: &str) -> BTreeSet<String> {
    let code = code(src);
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut part = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&part));
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(c);
            }
            out.insert(ident(&part));
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let Some(from) = owner(f.strip_prefix(&src).unwrap()) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        let refs = g.entry(from.clone()).or_default();
        refs.extend(references(&text).into_iter().filter(|m| *m != from));
    }
    g
}

#[test]
fn modules_only_import_lower_layers() {
    let g = graph();
    for m in [
        "analysis", "verdicts", "report", "pipeline", "ingest", "stats",
    ] {
        assert!(g.contains_key(m), "no files found for `{m}`");
    }
    let mut violations = Vec::new();
    for (from, tos) in &g {
        for to in tos {
            if layer(to) >= layer(from) {
                violations.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the layering (see module_graph::LAYERS): {violations:?}"
    );
    assert!(!g["analysis"].contains("verdicts"));
    assert!(g["verdicts"].contains("analysis"), "{:?}", g["verdicts"]);
}

#[test]
fn reference_scanner_reads_groups_and_ignores_comments() {
    let src = "use crate::{analysis::model::X, stats,\n    report::{fmt, figures}};\n\
               // crate::verdicts is only mentioned here\n\
               /// [`crate::pipeline`]\n\
               let x = crate::fsutil::write_atomic(p, b);\n";
    let r: Vec<String> = references(src).into_iter().collect();
    assert_eq!(r, ["analysis", "fsutil", "report", "stats"]);
}
