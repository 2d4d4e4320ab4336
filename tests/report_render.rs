//! `ctax report` output: files, figures, anchors, degradation notes, escaping, determinism.
//!
//! Every test renders a fixture from `tests/common` (a synthetic archive analysed by the real
//! pipeline) into a fresh temp directory, and checks the text the production rules print.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::Fixture;
use connector_tax::report;

const FIGS: [&str; 8] = [
    "fig1_ttft_vs_rate",
    "fig2_tpot_vs_rate",
    "fig3_throughput",
    "fig4_tax_bars",
    "fig5_shape_heatmap",
    "fig6_step_cdf",
    "fig7_decomposition",
    "fig8_additivity",
];

fn anchors() -> Vec<String> {
    let mut v: Vec<String> = (1..=6).map(|i| format!("h{i}")).collect();
    v.extend((1..=7).map(|i| format!("sc{i}")));
    v.extend((1..=8).map(|i| format!("fig{i}")));
    v.extend(["conventions", "provenance"].map(String::from));
    v
}

struct Out {
    _dir: tempfile::TempDir,
    root: PathBuf,
    rendered: report::RenderedReport,
}

impl Out {
    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel))
            .unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    }
    fn html(&self) -> String {
        self.read("index.html")
    }
    fn md(&self) -> String {
        self.read("report.md")
    }
}

fn render(f: &Fixture) -> Out {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("site");
    let rendered = f.render(&root);
    Out {
        _dir: dir,
        root,
        rendered,
    }
}

/// All files under `root`, relative path → bytes.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A small XML well-formedness check: balanced tags, quoted attributes, and no raw `<` or bare
/// `&` in text or attribute values (so escaping is proven, not assumed).
fn check_xml(name: &str, s: &str) {
    let b = s.as_bytes();
    let mut stack: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'<' => {
                let end = s[i..]
                    .find('>')
                    .map(|e| i + e)
                    .unwrap_or_else(|| panic!("{name}: unclosed tag at {i}"));
                let tag = &s[i + 1..end];
                assert!(
                    !tag.contains('<'),
                    "{name}: '<' inside a tag at {i}: {tag:.80}"
                );
                if let Some(close) = tag.strip_prefix('/') {
                    let open = stack
                        .pop()
                        .unwrap_or_else(|| panic!("{name}: stray </{close}>"));
                    assert_eq!(open, close.trim(), "{name}: mismatched tags");
                } else if !tag.starts_with('?') && !tag.starts_with('!') {
                    let tname: String = tag
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '/')
                        .collect();
                    // Attribute values: quotes balanced, no raw '&' that is not an entity.
                    assert_eq!(
                        tag.matches('"').count() % 2,
                        0,
                        "{name}: unbalanced quotes in <{tag:.80}>"
                    );
                    check_amp(name, tag);
                    let void = ["br", "hr", "img", "meta", "link", "input", "wbr"]
                        .contains(&tname.as_str());
                    if !tag.ends_with('/') && !void {
                        stack.push(tname);
                    }
                }
                i = end + 1;
            }
            _ => {
                let end = s[i..].find('<').map_or(b.len(), |e| i + e);
                check_amp(name, &s[i..end]);
                i = end;
            }
        }
    }
    assert!(stack.is_empty(), "{name}: unclosed elements {stack:?}");
}

fn check_amp(name: &str, text: &str) {
    for (k, _) in text.match_indices('&') {
        let rest = &text[k + 1..];
        let ent: String = rest.chars().take_while(|c| *c != ';').take(10).collect();
        let ok = rest.len() > ent.len()
            && rest.as_bytes()[ent.len()] == b';'
            && ((!ent.is_empty() && ent.chars().all(|c| c.is_ascii_alphabetic()))
                || (ent.len() > 1
                    && ent.starts_with('#')
                    && ent[1..].chars().all(|c| c.is_ascii_alphanumeric())));
        assert!(ok, "{name}: bare '&' in {text:.120}");
    }
}

fn count_shapes(svg: &str) -> usize {
    [
        "<path",
        "<rect",
        "<circle",
        "<polyline",
        "<polygon",
        "<line",
    ]
    .iter()
    .map(|t| svg.matches(t).count())
    .sum()
}

#[test]
fn writes_every_file_and_figures_are_real_svg() {
    let out = render(&common::demo());
    assert!(out.root.join("index.html").is_file());
    assert!(out.root.join("report.md").is_file());
    assert_eq!(out.rendered.figures.len(), 8);
    assert_eq!(
        out.rendered.dropped().count(),
        0,
        "{:?}",
        out.rendered.figures
    );
    for slug in FIGS {
        let rel = format!("figures/{slug}.svg");
        let svg = out.read(&rel);
        assert!(
            svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"),
            "{rel}: not an SVG document"
        );
        assert!(
            svg.contains("xmlns=\"http://www.w3.org/2000/svg\""),
            "{rel}: no namespace"
        );
        check_xml(&rel, &svg);
        let shapes = count_shapes(&svg);
        assert!(shapes > 40, "{rel}: only {shapes} shapes");
        assert!(svg.matches("<text").count() > 10, "{rel}: too few labels");
        // Inlined into the page too.
        assert!(out.rendered.files.contains(&out.root.join(&rel)));
    }
    // Only ASCII in SVG text: the naive font metrics assume it (labels in µs are written "us").
    for slug in FIGS {
        let svg = out.read(&format!("figures/{slug}.svg"));
        assert!(svg.is_ascii(), "{slug}: non-ASCII text in SVG");
    }
    check_xml("index.html body", body(&out.html()));
}

/// The `<body>` of the page (the head holds CSS with `>` selectors).
fn body(html: &str) -> &str {
    let a = html.find("<body>").unwrap();
    let b = html.rfind("</body>").unwrap();
    &html[a..b + "</body>".len()]
}

#[test]
fn anchors_exist_exactly_once_and_links_resolve() {
    for r in [common::demo(), common::degraded()] {
        let out = render(&r);
        let html = out.html();
        for id in anchors() {
            let n = html.matches(&format!("id=\"{id}\"")).count();
            assert_eq!(n, 1, "anchor #{id} appears {n} times in index.html");
        }
        for (k, _) in html.match_indices("href=\"#") {
            let rest = &html[k + 7..];
            let id = &rest[..rest.find('"').unwrap()];
            assert!(
                html.contains(&format!("id=\"{id}\"")),
                "link #{id} does not resolve"
            );
        }
        let md = out.md();
        for id in anchors()
            .iter()
            .filter(|a| a.starts_with('h') || a.starts_with("sc") || a.starts_with("fig"))
        {
            assert_eq!(
                md.matches(&format!("<a id=\"{id}\"></a>")).count(),
                1,
                "report.md anchor {id}"
            );
        }
    }
}

/// askama's HTML escaping, for comparing production strings with the page.
fn html_escape(s: &str) -> String {
    s.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

fn row(html: &str, id: &str) -> String {
    let k = html
        .find(&format!("<tr id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no row {id}"));
    let end = html[k..].find("</tr>").unwrap();
    html[k..k + end].to_owned()
}

/// Each verdict row prints what the production rules produced: title (without its id prefix),
/// statement, threshold, verdict, reason and label.
#[test]
fn verdict_rows_print_what_the_rules_produced() {
    let f = common::demo();
    let out = render(&f);
    let html = out.html();
    for v in f.verdicts.all() {
        let r = row(&html, &v.id);
        let title = v.title.split_once(": ").map_or(v.title.as_str(), |t| t.1);
        // The view capitalises the first letter after the id prefix.
        let title = title[1..].to_owned();
        for text in [
            title,
            v.statement.clone(),
            v.threshold.clone(),
            v.reason.clone(),
        ] {
            assert!(
                r.contains(&html_escape(&text)),
                "{}: {text:?} not in {r}",
                v.id
            );
        }
        if let Some(l) = &v.label {
            assert!(r.contains(&html_escape(l)), "{}: label {l}", v.id);
        }
        let badge = v.verdict.as_str().replace(' ', "-");
        assert!(r.contains(&format!("badge {badge}")), "{}: {r}", v.id);
    }
    // The injected truth (tests/common): a 40% TTFT tax for mooncake_both is far above H1's
    // 10%, and multi's 160% against 40% + 10% is not additive.
    let kind = |id: &str| f.verdicts.get(id).unwrap().verdict;
    let why = |id: &str| f.verdicts.get(id).unwrap().reason.clone();
    use connector_tax::verdicts::VerdictKind::*;
    assert_eq!(kind("h1"), Supported, "{}", why("h1"));
    let h1 = row(&html, "h1");
    assert!(h1.contains("%, +"), "estimate with CI: {h1}");
    assert!(
        h1.contains("tax_TTFT_p90(mooncake_both) &#62;= 0.10"),
        "{h1}"
    );
    assert_eq!(kind("h4"), Refuted, "{}", why("h4"));
    assert!(row(&html, "h4").contains("super-additive"));
    // Figure 8's band is where A + B must lie, [0.7, 1.3] x multi = [112%, 208%] by hand; the
    // fixture's A + B = 50% lies below it and H4 calls that super-additive, so the caption must
    // read "below" as super-additive, not the other way round.
    let md = out.md();
    assert!(
        md.contains(
            "A + B above the band means the MultiConnector costs less than its parts' sum \
             (sub-additive), below it more (super-additive"
        ),
        "{md}"
    );
    // Every kind of verdict is styled; the degraded data set cannot test H3 (no noop).
    let degraded = render(&common::degraded()).html();
    assert_eq!(
        common::degraded().verdicts.get("h3").unwrap().verdict,
        NotTestable
    );
    assert!(row(&degraded, "h3").contains("badge not-testable"));
    assert!(
        html.contains("badge inconclusive") || degraded.contains("badge inconclusive"),
        "no inconclusive verdict in either data set"
    );
}

#[test]
fn missing_verdicts_still_get_their_anchor() {
    let mut r = common::demo();
    r.verdicts.hypotheses.retain(|v| v.id != "h3");
    r.verdicts.success_criteria.clear();
    let out = render(&r);
    let html = out.html();
    assert_eq!(html.matches("id=\"h3\"").count(), 1);
    assert_eq!(html.matches("id=\"sc5\"").count(), 1);
    assert!(html.contains("the analysis produced no verdict for this id"));
}

#[test]
fn same_input_gives_byte_identical_output() {
    let r = common::demo();
    let a = render(&r);
    let b = render(&r.clone());
    let (sa, sb) = (snapshot(&a.root), snapshot(&b.root));
    assert_eq!(sa.keys().collect::<Vec<_>>(), sb.keys().collect::<Vec<_>>());
    for (k, v) in &sa {
        assert!(v == &sb[k], "{k} differs between two renders");
    }
    // Through the archived JSON (what `ctax report` reads back) the output is the same too.
    let summary: connector_tax::analysis::model::AnalysisSummary =
        serde_json::from_str(&serde_json::to_string(&r.analysis.summary).unwrap()).unwrap();
    let verdicts: connector_tax::verdicts::Verdicts =
        serde_json::from_str(&serde_json::to_string(&r.verdicts).unwrap()).unwrap();
    let c = render(&Fixture {
        analysis: connector_tax::analysis::model::AnalysisResult {
            summary,
            step_ecdf: r.analysis.step_ecdf.clone(),
        },
        verdicts,
    });
    assert!(
        sa == snapshot(&c.root),
        "JSON round trip changed the output"
    );
    // Degraded input is deterministic as well.
    let d = common::degraded();
    assert!(snapshot(&render(&d).root) == snapshot(&render(&d).root));
}

#[test]
fn no_step_timing_replaces_figures_6_and_7_with_a_note() {
    let out = render(&common::without_step_timing());
    let dropped: Vec<u8> = out.rendered.dropped().map(|f| f.number).collect();
    assert_eq!(dropped, [6, 7]);
    assert!(!out.root.join("figures/fig6_step_cdf.svg").exists());
    assert!(!out.root.join("figures/fig7_decomposition.svg").exists());
    let html = out.html();
    assert!(html.contains("Step timing unavailable"));
    let fig6 = &html[html.find("id=\"fig6\"").unwrap()..];
    assert!(fig6[..fig6.find("</figure>").unwrap()].contains("not drawn"));
    let md = out.md();
    assert!(md.contains("Step timing unavailable"));
    assert!(
        !md.contains("figures/fig6_step_cdf.svg") && !md.contains("figures/fig7_decomposition.svg")
    );
}

#[test]
fn missing_noop_drops_figure_7_with_the_reason() {
    let r = common::without_config("noop_connector", "verify_noop_connector: import failed");
    let out = render(&r);
    let dropped: Vec<(u8, String)> = out
        .rendered
        .dropped()
        .map(|f| (f.number, f.note.clone().unwrap_or_default()))
        .collect();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0].0, 7);
    assert!(
        dropped[0].1.contains(
            "noop_connector did not run (pre-flight SKIP: verify_noop_connector: import failed)"
        ),
        "{dropped:?}"
    );
    let html = out.html();
    assert!(html.contains("noop_connector did not run"));
    assert!(html.contains("id=\"skipped\""), "skipped configs table");
    assert!(out.md().contains("noop_connector did not run"));
}

/// The Markdown Degradation section of a rendered report.
fn degradation(md: &str) -> String {
    let start = md.find("## Degradation").expect("Degradation section");
    let rest = &md[start + 3..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
}

/// The Degradation list names what of the seed's plan (launch/profiles/seed.toml: Phase A at
/// 0.5-32 req/s, Phase B 3x3 for every config) a dataset did not measure. The demo runs Phase A
/// at 1-16 req/s (every config saturated by 16: 32 is above them all, which the seed skips) and
/// the full Phase B grid for every config; with its 32768-token Phase B cells
/// and every Phase B cell of nixl_both removed, the missing shapes and the config are named.
#[test]
fn coverage_gaps_against_the_seed_plan_are_listed() {
    let full = degradation(&render(&common::demo()).md());
    // Every config of the demo saturates at 16 req/s or below, so 32 is skipped by the plan,
    // not missing.
    assert!(
        full.contains(
            "Phase A measured 1, 2, 4, 8, 16 req/s of the seed's ladder 0.5, 1, 2, 4, 8, 16, 32 \
             req/s (not 0.5 req/s; 32 req/s lies above every config's saturation rate (at most \
             16 req/s), which the seed's plan skips)"
        ),
        "{full}"
    );
    // One config that never saturated: 32 req/s is missing for it.
    let mut unsaturated = common::demo();
    unsaturated
        .analysis
        .summary
        .reference_rates
        .saturation_rate
        .insert("noop_connector".into(), None);
    let gaps = degradation(&render(&unsaturated).md());
    assert!(
        gaps.contains("of the seed's ladder 0.5, 1, 2, 4, 8, 16, 32 req/s (not 0.5, 32 req/s): "),
        "{gaps}"
    );
    assert!(!full.contains("Phase B measured"), "{full}");
    assert!(!full.contains("Phase B ran for"), "{full}");

    let mut part = common::demo();
    part.analysis.summary.cells.retain(|c| {
        c.key.phase != ctax_schema::Phase::B
            || (c.input_len != 32768 && c.key.config != "nixl_both")
    });
    let gaps = degradation(&render(&part).md());
    assert!(
        gaps.contains(
            "Phase B measured 6 of the seed's 9 shapes (not 32768/64, 32768/256, 32768/1024)"
        ),
        "{gaps}"
    );
    assert!(
        gaps.contains("the seed runs it for every config (not for nixl_both)"),
        "{gaps}"
    );

    let mut none = common::demo();
    none.analysis
        .summary
        .cells
        .retain(|c| c.key.phase != ctax_schema::Phase::B);
    let gaps = degradation(&render(&none).md());
    assert!(
        gaps.contains("Phase B (the seed's 9 shapes at ref_safe) did not run"),
        "{gaps}"
    );
}

/// Phase B' against the seed's plan (its four priority configs at ref_load on 512/256,
/// 4096/256, 32768/256). The demo (ref_safe 4, ref_load 8 req/s) has none: one line says so.
/// With B' cells for plain and mooncake_both at 512/256 and 4096/256 (the demo's pooled Phase B
/// cells of those shapes, relabelled B' at 8 req/s), lmcache_only saturating at 8 req/s and
/// nixl_both never: lmcache_only has no B' cell by rule, nixl_both is missing, and so is the
/// 32768/256 shape.
#[test]
fn phase_b_prime_gaps_name_configs_left_out_by_rule_and_missing_ones() {
    let demo = common::demo();
    let gaps = degradation(&render(&demo).md());
    assert!(
        gaps.contains(
            "Phase B' (the seed's shapes 512/256, 4096/256, 32768/256 at ref_load for plain, \
             mooncake_both, nixl_both, lmcache_only) did not run, although ref_load (8 req/s) \
             differs from ref_safe (4 req/s)."
        ),
        "{gaps}"
    );
    // Phase B run at ref_load (a profile's `phase_b.rate_override`): `ctax run` plans no B'
    // then, and the coverage does not ask for it.
    let mut at_load = demo.clone();
    for c in at_load
        .analysis
        .summary
        .cells
        .iter_mut()
        .filter(|c| c.key.phase == ctax_schema::Phase::B)
    {
        c.rate = 8.0;
    }
    let gaps = degradation(&render(&at_load).md());
    assert!(!gaps.contains("Phase B'"), "{gaps}");
    let mut at_six = demo.clone();
    for c in at_six
        .analysis
        .summary
        .cells
        .iter_mut()
        .filter(|c| c.key.phase == ctax_schema::Phase::B)
    {
        c.rate = 6.0;
    }
    let gaps = degradation(&render(&at_six).md());
    assert!(
        gaps.contains(
            "did not run, although ref_load (8 req/s) differs from Phase B's rate (6 req/s)."
        ),
        "{gaps}"
    );
    let mut bp = demo.clone();
    let s = &mut bp.analysis.summary;
    let relabelled: Vec<_> = s
        .cells
        .iter()
        .filter(|c| {
            c.key.phase == ctax_schema::Phase::B
                && c.launch.is_none()
                && c.complete
                && ["plain", "mooncake_both"].contains(&c.key.config.as_str())
                && c.output_len == 256
                && c.input_len <= 4096
        })
        .cloned()
        .map(|mut c| {
            c.key.phase = ctax_schema::Phase::Bp;
            c.key.cell = format!("r8_i{}_o{}", c.input_len, c.output_len);
            c.rate = 8.0;
            c
        })
        .collect();
    assert_eq!(relabelled.len(), 4, "2 configs x 2 shapes");
    s.cells.extend(relabelled);
    s.reference_rates
        .saturation_rate
        .insert("lmcache_only".into(), Some(8.0));
    s.reference_rates
        .saturation_rate
        .insert("nixl_both".into(), None);
    let gaps = degradation(&render(&bp).md());
    assert!(!gaps.contains("did not run, although ref_load"), "{gaps}");
    assert!(
        gaps.contains(
            "Phase B' has no cell of lmcache_only by rule: lmcache_only saturates at 8 req/s at \
             or below ref_load (8 req/s), where a cell measures a queue, not a tax."
        ),
        "{gaps}"
    );
    assert!(
        gaps.contains(
            "Phase B' ran for plain, mooncake_both only; the seed runs it for nixl_both too: they \
             have no B' shape taxes at ref_load (8 req/s)."
        ),
        "{gaps}"
    );
    assert!(
        gaps.contains("Phase B' measured 2 of the seed's 3 shapes (not 32768/256)."),
        "{gaps}"
    );
}

#[test]
fn missing_h4_configs_drop_figure_8_and_skips_are_listed() {
    let r = common::without_config(
        "multi_mooncake_lmcache",
        "verify_multi_connector: engine crashed",
    );
    let out = render(&r);
    let dropped: Vec<u8> = out.rendered.dropped().map(|f| f.number).collect();
    assert_eq!(dropped, [8]);
    let html = out.html();
    assert!(
        html.contains(
            "multi_mooncake_lmcache (skipped: pre-flight SKIP: verify_multi_connector: engine crashed)"
        ),
        "{html}"
    );
    let skipped = &html[html.find("id=\"skipped\"").unwrap()..];
    assert!(skipped.contains("multi_mooncake_lmcache") && skipped.contains("engine crashed"));

    let d = render(&common::degraded());
    let dropped: Vec<u8> = d.rendered.dropped().map(|f| f.number).collect();
    assert_eq!(dropped, [6, 7]);
    let html = d.html();
    for c in ["noop_connector", "mooncake_consumer"] {
        assert!(
            html[html.find("id=\"skipped\"").unwrap()..].contains(c),
            "{c} not listed as skipped"
        );
    }
    // Incomplete cells are flagged, their server error text escaped.
    assert!(html.contains("class=\"flag\""));
    assert!(html.contains("HTTP 500 &#60;html&#62;"));
}

/// Figure 8 on the named NHD variants: with the seed's MultiConnector absent and both variants
/// present (the demo's multi_mooncake_lmcache and mooncake_producer renamed to them), figure 8
/// is drawn from the variants and its caption says so; the demo itself draws the seed's three.
#[test]
fn figure_8_falls_back_to_the_nhd_variants() {
    let mut f = common::demo();
    common::rename_config(
        &mut f,
        "multi_mooncake_lmcache",
        "multi_mooncake_lmcache_nhd",
    );
    common::rename_config(&mut f, "mooncake_producer", "mooncake_both_nhd");
    let out = render(&f);
    assert_eq!(out.rendered.dropped().count(), 0);
    let fig8 = out
        .rendered
        .figures
        .iter()
        .find(|x| x.number == 8)
        .and_then(|x| x.file.clone())
        .unwrap();
    let svg = std::fs::read_to_string(&fig8).unwrap();
    assert!(
        svg.contains("multi_mooncake_lmcache_nhd") && svg.contains("mooncake_both_nhd"),
        "figure 8 does not show the variants"
    );
    let html = out.html();
    assert!(html.contains("These are the named NHD variants"), "caption");

    let seed = render(&common::demo());
    let fig8 = seed
        .rendered
        .figures
        .iter()
        .find(|x| x.number == 8)
        .unwrap();
    let svg = std::fs::read_to_string(fig8.file.as_ref().unwrap()).unwrap();
    assert!(!svg.contains("_nhd") && svg.contains("multi_mooncake_lmcache"));
    assert!(!seed.html().contains("These are the named NHD variants"));
}

/// The shape table and figure 5 say how many launches each shape tax rests on: the demo runs
/// every config twice on its one synthetic machine, `one_launch` once, which the caption names.
#[test]
fn shape_taxes_say_how_many_launches_they_rest_on() {
    let demo = render(&common::demo()).md();
    assert!(
        demo.contains("| mooncake_both | B | 4 | 4096/256 | 2 launches on 1 machine |"),
        "{demo}"
    );
    assert!(
        demo.contains(
            "noop_connector 2 launches on 1 machine, mooncake_producer 2 launches on 1 machine"
        ),
        "{demo}"
    );
    assert!(!demo.contains("on a single launch"));
    let one = render(&common::one_launch()).md();
    assert!(
        one.contains("| mooncake_both | B | 4 | 512/64 | 1 launch on 1 machine |"),
        "{one}"
    );
    assert!(
        one.contains(
            "Launches behind each panel (the config's, compared with plain on the same machines; \
             the union over the panel's cells, so one cell may rest on fewer, as the Taxes table \
             shows, and a launch resumed on another machine counts both machines): \
             mooncake_both 1 launch on 1 machine. mooncake_both rests on a single launch"
        ),
        "{one}"
    );
}

#[test]
fn stale_figures_are_removed_on_rerender() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("site");
    common::demo().render(&root);
    assert!(root.join("figures/fig6_step_cdf.svg").exists());
    std::fs::write(root.join("figures/notes.txt"), "not ours").unwrap();
    common::degraded().render(&root);
    assert!(!root.join("figures/fig6_step_cdf.svg").exists());
    assert!(!root.join("figures/fig7_decomposition.svg").exists());
    assert!(
        root.join("figures/notes.txt").exists(),
        "files the renderer does not own are kept"
    );
}

#[test]
fn simulated_data_gets_a_banner() {
    let out = render(&common::simulated());
    let html = out.html();
    assert!(html.contains("class=\"banner\"") && html.contains("SIMULATED DATA"));
    assert!(html.contains("<title>KV-connector substrate tax (SIMULATED DATA)</title>"));
    assert!(out.md().contains("**SIMULATED DATA.**"));
    let real = render(&common::demo());
    assert!(!real.html().contains("class=\"banner\""));
    assert!(!real.md().contains("SIMULATED DATA"));
}

#[test]
fn page_is_self_contained() {
    let out = render(&common::demo());
    let html = out.html();
    // The SVG namespace is the one URL allowed (it is an identifier, never fetched).
    let stripped = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for bad in [
        "<script", "<link", "<img", "<iframe", "<object", "<embed", "src=", "http://", "https://",
        "@import", "url(",
    ] {
        assert!(!stripped.contains(bad), "index.html contains {bad}");
    }
    assert!(html.contains("<style>"), "CSS is inline");
    assert_eq!(html.matches("<svg ").count(), 8, "every figure inlined");
}

const HOSTILE_RAW: [&str; 9] = [
    "<script",
    "</script",
    "<img",
    "<b>",
    "</td><script",
    "</pre><script",
    "<html>",
    "onerror=",
    "javascript:alert",
];

#[test]
fn data_strings_are_escaped_everywhere() {
    let r = common::hostile();
    let out = render(&r);
    let html = out.html();
    let md = out.md();
    // HTML: the page holds no script at all, so any "<script" would be injected.
    for bad in HOSTILE_RAW
        .iter()
        .filter(|b| **b != "onerror=" && **b != "javascript:alert")
    {
        assert!(!html.contains(bad), "index.html contains raw {bad}");
    }
    assert!(!html.contains("<img src=x"), "raw attribute injection");
    // askama escapes with numeric entities; plotters' SVG text with named ones.
    assert!(
        html.contains("&#60;script&#62;alert(1)&#60;/script&#62;&#38;&#34;x|y"),
        "escaped config name in tables"
    );
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/scr"),
        "escaped config name in the SVG legend"
    );
    check_xml("hostile index.html body", body(&html));
    for f in out.rendered.figures.iter().filter_map(|f| f.file.as_ref()) {
        let svg = std::fs::read_to_string(f).unwrap();
        for bad in HOSTILE_RAW {
            assert!(!svg.contains(bad), "{} contains raw {bad}", f.display());
        }
        check_xml(&f.display().to_string(), &svg);
    }
    // Markdown: no raw HTML from data outside code blocks (inside them it is literal text),
    // and tables keep their column count.
    let prose = strip_fences(&md);
    for bad in HOSTILE_RAW
        .iter()
        .filter(|b| **b != "onerror=" && **b != "javascript:alert")
    {
        assert!(!prose.contains(bad), "report.md contains raw {bad}");
    }
    assert!(
        md.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;\"x\\|y"),
        "escaped name in report.md"
    );
    check_md_tables(&md);
    check_md_html(&md);
}

/// Control characters in data (terminal escapes, a bell, C1 codes) never reach a reader raw:
/// HTML, SVG and Markdown show them as visible `\u{..}` text, in tables and code blocks alike.
#[test]
fn control_characters_are_shown_as_text() {
    let mut f = common::demo();
    let name = "lm\u{1b}[31mcache\u{7}";
    common::rename_config(&mut f, "lmcache_only", name);
    let s = &mut f.analysis.summary;
    s.warnings
        .push("bell \u{7}, C1 CSI \u{9b}, DEL \u{7f}, CR \r in a warning".to_owned());
    s.dataset.profile = Some("name = \"x\u{1b}]0;title\u{7}\"\n".to_owned());
    let out = render(&f);
    let mut docs = vec![
        ("index.html".to_owned(), out.html()),
        ("report.md".to_owned(), out.md()),
    ];
    for p in out.rendered.figures.iter().filter_map(|f| f.file.as_ref()) {
        docs.push((p.display().to_string(), std::fs::read_to_string(p).unwrap()));
    }
    for (doc, text) in &docs {
        if let Some(c) = text
            .chars()
            .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        {
            panic!("{doc} contains the raw control character {c:?}");
        }
    }
    let html = out.html();
    assert!(
        html.contains(r"lm\u{1b}[31mcache\u{7}"),
        "config name in the page"
    );
    assert!(html.contains(r"C1 CSI \u{9b}, DEL \u{7f}, CR \u{d} in a warning"));
    assert!(html.contains(r"x\u{1b}]0;title\u{7}"), "profile code block");
    let md = out.md();
    assert!(
        md.contains(r"lm\u{1b}\[31mcache\u{7}"),
        "config name in report.md"
    );
    assert!(
        md.contains(r"x\u{1b}]0;title\u{7}"),
        "profile code block in report.md"
    );
    let fig1 = out.read("figures/fig1_ttft_vs_rate.svg");
    assert!(
        fig1.contains(r"lm\u{1b}[31mcache\u{7}"),
        "legend of figure 1"
    );
}

/// report.md without its fenced code blocks.
fn strip_fences(md: &str) -> String {
    let mut out = String::new();
    let mut fence: Option<String> = None;
    for line in md.lines() {
        let ticks: String = line.chars().take_while(|c| *c == '`').collect();
        match &fence {
            None if ticks.len() >= 3 => fence = Some(ticks),
            Some(f) if ticks.len() >= f.len() && line.trim_start_matches('`').trim().is_empty() => {
                fence = None
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
            Some(_) => {}
        }
    }
    out
}

/// Every Markdown table keeps the header's column count (an unescaped `|` would add one).
fn check_md_tables(md: &str) {
    let cols = |line: &str| {
        let b = line.as_bytes();
        (0..b.len())
            .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
            .count()
    };
    let mut header: Option<usize> = None;
    for line in strip_fences(md).lines() {
        if line.starts_with('|') {
            let n = cols(line);
            match header {
                None => header = Some(n),
                Some(h) => assert_eq!(n, h, "table row with a different column count: {line}"),
            }
        } else {
            header = None;
        }
    }
}

/// Rendering report.md yields no raw HTML except the report's own `<a id="…"></a>` anchors.
fn check_md_html(md: &str) {
    use pulldown_cmark::{Event, Options, Parser};
    for ev in Parser::new_ext(md, Options::ENABLE_TABLES) {
        if let Event::Html(h) | Event::InlineHtml(h) = ev {
            let h = h.trim();
            let open = h.strip_suffix("</a>").unwrap_or(h);
            let ok = open.is_empty()
                || (open.starts_with("<a id=\"")
                    && open.ends_with("\">")
                    && open[7..open.len() - 2]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-'));
            assert!(ok, "raw HTML in report.md: {h}");
        }
    }
}

#[test]
fn markdown_twin_is_clean_and_links_figures() {
    let out = render(&common::demo());
    let md = out.md();
    check_md_tables(&md);
    check_md_html(&md);
    for slug in FIGS {
        assert!(
            md.contains(&format!("](figures/{slug}.svg)")),
            "report.md does not link {slug}"
        );
    }
    assert!(md.ends_with("|\n") || md.ends_with('\n'));
    assert!(!md.contains(" \n"), "trailing spaces");
    for s in [
        "## Conventions",
        "## Provenance",
        "### Hypotheses",
        "### Success criteria",
        "vllm bench serve",
    ] {
        assert!(md.contains(s), "report.md lacks {s}");
    }
}

#[test]
fn conventions_and_provenance_are_reported() {
    let f = common::demo();
    let out = render(&f);
    let html = out.html();
    let conv =
        &html[html.find("id=\"conventions\"").unwrap()..html.find("id=\"warnings\"").unwrap()];
    for s in [
        "vllm bench serve",
        "Percentile estimator",
        "linear",
        "10000 resamples",
        "TTFT",
        "TPOT",
        "ITL",
        "E2E",
        "Warm-up",
        "Token source",
    ] {
        assert!(conv.contains(s), "conventions lack {s}");
    }
    let prov = &html[html.find("id=\"provenance\"").unwrap()..];
    for s in [
        "0.11.2 (9c3fe1d2a7)",
        "NVIDIA H20",
        "mooncake-transfer-engine 0.3.7.post2",
        "2025-11-20 10:15:00 UTC",
        "bash launch/launch_plain.sh",
        &format!("ctax report {} --out site/", f.root()),
        "Pre-flight decisions",
        "driver",
        "570.124.06",
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "min_completed = 200",
    ] {
        assert!(prov.contains(s), "provenance lacks {s}");
    }
}

/// A config with two launches: each launch's own row (with its own p90) follows the pooled row
/// in the Cells tables of both the page and the Markdown twin.
#[test]
fn per_launch_rows_follow_the_pooled_cell() {
    let f = common::two_launches();
    let s = &f.analysis.summary;
    let pooled = s
        .cells
        .iter()
        .find(|c| c.key.config == "plain" && c.key.phase == ctax_schema::Phase::A)
        .unwrap();
    assert_eq!(pooled.launches, [0, 1]);
    let per: Vec<&connector_tax::analysis::model::CellStats> = s
        .per_launch
        .iter()
        .filter(|l| l.key == pooled.key)
        .collect();
    assert_eq!(per.len(), 2);
    let p90 = |c: &connector_tax::analysis::model::CellStats| {
        report::fmt::opt_estimate(c.ttft_ms.p90.as_ref(), "")
    };
    assert_ne!(p90(per[0]), p90(per[1]), "two launches, two p90s");
    let out = render(&f);
    let html = out.html();
    let md = out.md();
    // The Markdown twin escapes `[` and `]` in the CI brackets.
    type Escape = fn(&str) -> String;
    let docs: [(&str, Escape); 2] = [(&html, |s| s.to_owned()), (&md, report::fmt::md)];
    for (text, esc) in docs {
        // Each piece must follow the previous one: pooled row, its l0 row with l0's p90, then
        // the l1 row with l1's p90.
        let mut from = text
            .find("id=\"cells\"")
            .or_else(|| text.find("## Cells"))
            .unwrap();
        for needle in [
            p90(pooled),
            "A l0".to_owned(),
            p90(per[0]),
            "A l1".to_owned(),
            p90(per[1]),
        ] {
            let needle = esc(&needle);
            let at = text[from..]
                .find(&needle)
                .unwrap_or_else(|| panic!("{needle} not after byte {from}"));
            from += at + needle.len();
        }
    }
}

/// Launches on three machines (the second 25% faster, the third 10%): plain on machines 0, 1,
/// 1, mooncake_both (a 20% TTFT tax) on 1, 2, 1, so its launch on machine 2 has no plain beside
/// it; Phase B repeats the ref_safe cell (4096/256 at 2 req/s). The Machines table lists every
/// machine and which lack plain, the Launches column names the launch left out, a warning says
/// so, the same-cell table shows both phases' taxes, and the ref_safe tax, detected on machine
/// 1 alone, is marked as resting on one machine and listed under the Taxes tables.
#[test]
fn machines_and_the_same_cell_are_reported() {
    use connector_tax::synth::{SynthConfig, SynthSpec};
    let spec = SynthSpec {
        configs: vec![
            SynthConfig {
                machines: vec![0, 1, 1],
                ..SynthConfig::new("plain", 1.0, 1.0)
            },
            SynthConfig {
                machines: vec![1, 2, 1],
                ..SynthConfig::new("mooncake_both", 1.2, 1.0)
            },
        ],
        launches: 3,
        machine_levels: vec![1.0, 0.75, 0.9],
        phase_a_rates: vec![1.0, 2.0],
        phase_b_shapes: vec![(4096, 256)],
        phase_b_rate: 2.0,
        requests_per_cell: 200,
        launch_sigma: 0.03,
        ..Default::default()
    };
    let Fixture { analysis, verdicts } = common::from_spec(&spec);
    assert_eq!(analysis.summary.reference_rates.ref_safe, Some(2.0));
    // The same cell per machine: mooncake_both met plain on machine 1 only (l0, l2 vs l1, l2)
    // in each phase, so each phase's tax is that one machine's term (a weighted mean of one).
    let same = analysis
        .summary
        .same_cell
        .iter()
        .find(|c| c.metric == "ttft_p90")
        .expect("a same-cell check");
    assert_eq!(same.by_machine.len(), 2, "{:?}", same.by_machine);
    for (t, phase_tax) in same.by_machine.iter().zip([&same.phase_a, &same.phase_b]) {
        assert_eq!(t.machine, "boot synth-machine-1");
        assert_eq!(
            (&t.launches[..], &t.plain_launches[..]),
            (&[0, 2][..], &[1, 2][..])
        );
        assert!(
            (t.tax - phase_tax.value.est).abs() < 1e-9,
            "{t:?} vs {:?}",
            phase_tax.value
        );
    }
    let taxes = (same.phase_a.value.est, same.phase_b.value.est);
    let out = render(&Fixture { analysis, verdicts });
    let md = out.md();
    assert!(
        md.contains("| mooncake_both | 2 req/s, 4096/256 | TTFT p90 | A | boot synth-machine-1 | l0 (2nd), l2 (2nd) vs l1 (2nd), l2 (2nd) |"),
        "per-machine row:\n{}",
        md.lines()
            .filter(|l| l.contains("| boot synth-machine-1 | l"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(md.contains("### Machines"), "no Machines section");
    assert!(
        md.contains(
            "| boot synth-machine-2 | A: mooncake_both l1; B: mooncake_both l1 | no: Phase A, B |"
        ),
        "machine 2 row:\n{}",
        md.lines()
            .filter(|l| l.contains("synth-machine"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(md.contains("| boot synth-machine-1 |") && md.contains("| yes |"));
    // Synthetic launches start launch-major (plain l0, mooncake_both l0, plain l1, …): machine
    // 1 ran mooncake_both l0, plain l1, plain l2, mooncake_both l2 in that order, so plain ran
    // around mooncake_both there (its only machine with plain) in both phases: not one-sided.
    assert!(
        md.contains(
            "| boot synth-machine-1 | A: mooncake_both l0, plain l1, plain l2, mooncake_both l2; B: mooncake_both l0, plain l1, plain l2, mooncake_both l2 | yes |"
        ),
        "machine 1 in start order"
    );
    assert!(
        md.contains("| A | mooncake_both | 0 | 0 | 1 |  |"),
        "order row"
    );
    assert!(
        md.contains("| B | mooncake_both | 0 | 0 | 1 |  |"),
        "order row"
    );
    assert!(!md.contains("launch order: plain never ran on both sides"));
    assert!(
        md.contains("| mooncake_both | 3; l1 left out (no plain launch on its machine) |"),
        "Launches column"
    );
    assert!(
        md.contains("mooncake_both: Phase A launch l1 ran on a machine without a plain launch")
    );
    // One F-test row per cell and metric with machines to compare.
    let effects: Vec<&str> = md.lines().filter(|l| l.starts_with("| A ")).collect();
    assert!(
        md.contains("| A 2 req/s, 4096/256 | TTFT p90 | 3 | 6 |"),
        "F-test rows:\n{}",
        effects.join("\n")
    );
    assert!(md.contains("### The same cell in both phases"));
    assert!(md.contains("| mooncake_both | 2 req/s, 4096/256 | TTFT p90 |"));
    // By place: a synthetic launch runs Phase A's rates then Phase B's shape, so the cell is
    // Phase A's 2nd (after 1 req/s) and Phase B's 3rd; machine 1 gives one term in each, both
    // above 0 (a 20% tax), each group's median is that term, which is the phase's tax; no
    // group ran it 1st, so there is no test.
    let row = md
        .lines()
        .find(|l| l.starts_with("| mooncake_both | 2 req/s, 4096/256 | TTFT p90 |"))
        .unwrap();
    let part = format!(
        "| 2nd on 1 machine (A 1), tax above 0 on 1, median {:+.1}%; 3rd on 1 (B 1), above 0 on 1, median {:+.1}% |",
        taxes.0 * 100.0,
        taxes.1 * 100.0
    );
    assert!(row.contains(&part), "{part} not in {row}");
    assert!(!row.contains("rank-sum"));
    let html = out.html();
    assert!(html.contains("id=\"taxes-machines\"") && html.contains("href=\"#taxes-machines\""));
    assert!(html.contains("id=\"taxes-same-cell\""));
    // The 20% TTFT tax at ref_safe is detected on machine 1 alone, the only machine
    // mooncake_both shared with plain in a dataset of three: the table marks it and the list
    // under the Taxes tables names the machine, in both formats.
    let ref_row = md
        .lines()
        .find(|l| l.starts_with("| mooncake_both | 3; l1 left out"))
        .unwrap();
    // Columns: config, launches, TTFT p90 at ref_safe, …
    let ttft_safe = ref_row.split(" | ").nth(2).unwrap();
    assert!(
        ttft_safe.ends_with("] (rests on one machine)"),
        "ref_safe TTFT cell: {ref_row}"
    );
    assert!(
        md.contains("### <a id=\"taxes-one-machine\"></a>Detected taxes that one machine decides")
    );
    let listed: Vec<&str> = md
        .lines()
        .filter(|l| {
            l.starts_with("- mooncake_both, Phase A at ref_safe (2 req/s, 4096/256), TTFT p90 +")
        })
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0].ends_with(
            ": rests on one machine, the only one it shared with plain (boot synth-machine-1)"
        ),
        "{listed:?}"
    );
    assert!(html.contains("id=\"taxes-one-machine\""));
    assert!(
        html.contains("<li>mooncake_both, Phase A at ref_safe (2 req/s, 4096/256), TTFT p90 +")
    );
}

/// The demo's detected taxes (mooncake_both's 40% TTFT tax among them) were all made on one
/// machine: a dataset from one host marks none of them as resting on it.
#[test]
fn a_dataset_made_on_one_machine_marks_no_tax_as_resting_on_it() {
    let demo = common::demo();
    assert!(
        demo.analysis.summary.taxes.iter().any(|t| t
            .ttft_p90
            .as_ref()
            .is_some_and(|v| v.detection == connector_tax::analysis::model::Detection::Tax)),
        "the demo detects a tax"
    );
    assert!(
        demo.analysis
            .summary
            .taxes
            .iter()
            .all(|t| t.one_machine.is_empty())
    );
    let md = render(&demo).md();
    assert!(
        !md.contains("### Machines"),
        "the demo ran on more than one machine"
    );
    assert!(!md.contains("(rests on one machine)"));
    assert!(!md.contains("Detected taxes that one machine decides"));
    assert!(!md.contains("(borderline)"));
}

/// Plain and mooncake_both, one launch each on each of two machines, plain first on both
/// (synthetic launches start launch-major, configs in turn): the order row is one-sided, and a
/// warning names it.
#[test]
fn plain_on_one_side_of_a_config_is_flagged() {
    use connector_tax::synth::{SynthConfig, SynthSpec};
    let spec = SynthSpec {
        configs: vec![
            SynthConfig {
                machines: vec![0, 1],
                ..SynthConfig::new("plain", 1.0, 1.0)
            },
            SynthConfig {
                machines: vec![0, 1],
                ..SynthConfig::new("mooncake_both", 1.2, 1.0)
            },
        ],
        launches: 2,
        machine_levels: vec![1.0, 0.8],
        phase_a_rates: vec![1.0, 2.0],
        requests_per_cell: 100,
        ..Default::default()
    };
    let Fixture { analysis, verdicts } = common::from_spec(&spec);
    let order = &analysis.summary.machines.order;
    assert_eq!(order.len(), 1);
    assert_eq!(
        (order[0].config.as_str(), order[0].one_sided()),
        ("mooncake_both", Some("before"))
    );
    assert!(analysis.summary.warnings.iter().any(|w| w.contains(
        "launch order: plain never ran on both sides of these configs' launches on a machine they shared: mooncake_both Phase A (plain before it on both machines they shared)"
    )));
    let h1 = verdicts.hypotheses.iter().find(|h| h.id == "h1").unwrap();
    assert!(
        h1.reason.contains(
            "launch order one-sided: plain ran before mooncake_both on every machine they shared"
        ),
        "H1 says its order is one-sided: {}",
        h1.reason
    );
    let out = render(&Fixture { analysis, verdicts });
    assert!(out.md().contains(
        "| A | mooncake_both | 2 | 0 | 0 | **one-sided**: plain before it on every machine |"
    ));
}

/// Three configs, two launches each on two machines, Phase A only; synthetic launches run in
/// turn (plain l0 on m0, mooncake_both l0 on m1, nixl_both l0 on m0, plain l1 on m1, …), so the
/// first on m0 is plain l0 and the first on m1 mooncake_both l0, and those two launches alone
/// run 25% slower (`slow_launch`). The first-launch test reads that back from the per-launch
/// p90s: config + machine + first leaves 6 − 5 = 1 df, and with launch noise of 0.5% the
/// estimate is ln 1.25 within a few percent; the report lists it under Machines.
#[test]
fn a_slow_first_launch_on_each_machine_is_measured() {
    use connector_tax::synth::{SynthConfig, SynthSpec};
    let cfg = |name: &str, tax: f64, machines: Vec<u32>| SynthConfig {
        machines,
        slow_launch: None,
        ..SynthConfig::new(name, tax, 1.0)
    };
    let mut plain = cfg("plain", 1.0, vec![0, 1]);
    plain.slow_launch = Some((0, 1.25));
    let mut mb = cfg("mooncake_both", 1.1, vec![1, 0]);
    mb.slow_launch = Some((0, 1.25));
    let spec = SynthSpec {
        configs: vec![plain, mb, cfg("nixl_both", 1.05, vec![0, 1])],
        launches: 2,
        machine_levels: vec![1.0, 0.8],
        phase_a_rates: vec![2.0],
        phase_b_shapes: vec![],
        requests_per_cell: 400,
        launch_sigma: 0.005,
        ..Default::default()
    };
    let Fixture { analysis, verdicts } = common::from_spec(&spec);
    let e = analysis
        .summary
        .machines
        .first_launch
        .iter()
        .find(|e| e.metric == "ttft_p90" && e.cell == "r2_i4096_o256")
        .expect("a first-launch test at 2 req/s");
    assert_eq!(
        (e.launches, e.first, e.machines, e.df),
        (6, 2, 2, 1),
        "{e:?}"
    );
    assert!((e.effect - 0.25).abs() < 0.04, "{e:?}");
    let md = render(&Fixture { analysis, verdicts }).md();
    let row = md
        .lines()
        .find(|l| l.starts_with("| A 2 req/s, 4096/256 | TTFT p90 | 6 (2 first) | 2 |"))
        .unwrap_or_else(|| panic!("no first-launch row:\n{md}"));
    assert!(row.contains("| 1 |"), "{row}");
    assert!(md.contains("a launch that ran first on its machine against the same config's later ones there, at ref_safe: TTFT p90 +"));
}

/// A slow stretch injected into one launch's measured window (synth `stall`: measured requests
/// 60..90 of lmcache_only l1, TTFT × 5, every Phase A cell) is the one episode found, in each
/// cell below saturation, with its send times (request k of the window at k / rate s, so
/// 60 / r to 89 / r) and the p90 without it back near the launch's other requests'; the
/// report's Slow episodes table and the warning name it, with the engine steps the stall
/// slowed. Nothing else is an episode: with lognormal sigma 0.25, a TTFT above 2× the median
/// is z > 2.77 (p 0.003), and three of those within two requests of each other do not happen
/// in these 12 launch-cells.
#[test]
fn an_injected_slow_stretch_is_named_with_the_p90_without_it() {
    use connector_tax::synth::{Stall, SynthConfig, SynthSpec};
    use ctax_schema::Phase;
    let spec = SynthSpec {
        configs: vec![
            SynthConfig::new("plain", 1.0, 1.0),
            SynthConfig {
                stall: Some(Stall {
                    launch: 1,
                    first: 60,
                    len: 30,
                    factor: 5.0,
                }),
                ..SynthConfig::new("lmcache_only", 1.5, 1.0)
            },
        ],
        launches: 3,
        phase_a_rates: vec![1.0, 2.0],
        phase_b_shapes: vec![],
        requests_per_cell: 200,
        ..Default::default()
    };
    let Fixture { analysis, verdicts } = common::from_spec(&spec);
    let eps = &analysis.summary.episodes;
    assert_eq!(eps.len(), 2, "{eps:#?}");
    for (e, rate) in eps.iter().zip([1.0, 2.0]) {
        assert_eq!(
            (e.config.as_str(), e.launch, e.phase, e.measured),
            ("lmcache_only", 1, Phase::A, 200),
            "{e:?}"
        );
        assert_eq!(e.spans.len(), 1, "{e:?}");
        let s = &e.spans[0];
        assert_eq!((s.requests, s.slow), (30, 30), "{e:?}");
        assert!((s.from_s - 60.0 / rate).abs() < 1e-3, "{e:?}");
        assert!((s.to_s - 89.0 / rate).abs() < 1e-3, "{e:?}");
        // 5× the launch's level: the stretch's median is ~5× the launch median.
        assert!(
            (s.ttft_median_ms / e.ttft_median_ms - 5.0).abs() < 1.0,
            "{e:?}"
        );
        assert!(e.p90_shift() > 1.0, "{e:?}");
        // Without the stretch, the p90 is lognormal(0.25)'s; the launch median counts the 30
        // stalled requests among 200, so it is the normal part's 100/170 = 0.588 quantile
        // (z 0.223): p90 / median = exp(0.25 × (1.2816 − 0.223)) = 1.30.
        let ratio = e.ttft_p90_without_ms / e.ttft_median_ms;
        assert!((ratio - 1.30).abs() < 0.12, "{e:?}: {ratio}");
        // The stall slows the engine steps that start between its first and last send 5×
        // (synth's steps: 2 ms × lognormal(0.2)); the stretch's range reaches one median TTFT
        // (~1.5 s of 30/r s) past its last send, so its time-weighted median step is the
        // slowed one: 5× the rest of the window's, within the draws' spread.
        let (inside, rest) = (s.evidence.step_ms.unwrap(), e.rest.step_ms.unwrap());
        assert!(
            (inside / rest - 5.0).abs() < 1.0,
            "{e:?}: {inside} vs {rest}"
        );
        assert!(
            s.evidence.steps.unwrap() > 0 && e.rest.steps.unwrap() > s.evidence.steps.unwrap(),
            "{e:?}"
        );
    }
    assert!(
        analysis.summary.warnings.iter().any(|w| w
            .starts_with("slow episodes set the TTFT p90 of 2 launch-cell(s) not found saturated")
            && w.contains("lmcache_only l1 Phase A r1_i4096_o256: p90 ")),
        "{:#?}",
        analysis.summary.warnings
    );
    let out = render(&Fixture { analysis, verdicts });
    let md = out.md();
    assert!(md.contains("### Slow episodes"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| lmcache_only | A 2 req/s, 4096/256 | l1 ("))
        .unwrap_or_else(|| panic!("no episode row:\n{md}"));
    assert!(
        row.contains("| 30.0–44.5 s: 30 of 30 slow, median "),
        "{row}"
    );
    assert!(row.contains(" ms, engine steps "), "{row}");
    assert!(row.contains("; rest of the window: engine steps "), "{row}");
    let html = out.html();
    assert!(html.contains("<h3 id=\"taxes-episodes\">Slow episodes</h3>"));
    assert!(html.contains("30.0–44.5 s: 30 of 30 slow"));
}

/// One launch that saturates alone (synth `launch_capacity`: mooncake_both l2 starts 3.98
/// requests/s, its five other launches keep up; tests/analysis_truth.rs derives why the pooled
/// cells do not saturate), and the reverse: nixl_both starts 3 requests/s in five launches
/// (at 4 req/s a queue grows by 1 request/s: T, Q and G fire, and pooled too, with a pace of
/// (1 + 5 × 0.75) / 6 ≈ 0.79), while its l0 keeps up. nixl_both then saturates at 4, so ref_safe
/// = 2 and ref_load = 4 (plain keeps up). The Reference rates table lists each launch's own
/// saturation rate after the config's, the launch's own rows in the cells table carry its own
/// criteria, and the one warning names mooncake_both l2 at ref_load: not nixl_both's launches,
/// saturated at 4 as their pool is.
#[test]
fn each_launch_s_own_saturation_rate_is_listed() {
    use connector_tax::synth::{SynthConfig, SynthSpec};
    let mut mb = SynthConfig::new("mooncake_both", 1.0, 1.0);
    mb.launch_capacity = Some((2, 3.98));
    let mut nixl = SynthConfig::new("nixl_both", 1.0, 1.0);
    nixl.capacity_rps = 3.0;
    nixl.launch_capacity = Some((0, 1e9));
    let spec = SynthSpec {
        configs: vec![SynthConfig::new("plain", 1.0, 1.0), mb, nixl],
        launches: 6,
        phase_a_rates: vec![1.0, 2.0, 4.0],
        requests_per_cell: 200,
        ..Default::default()
    };
    let md = render(&common::from_spec(&spec)).md();
    assert!(
        md.contains("| saturation rate of mooncake_both | not saturated up to 4 req/s; launches on their own: l2 4 req/s; l0, l1, l3, l4, l5 not saturated up to 4 req/s |"),
        "{md}"
    );
    assert!(md.contains(
        "| saturation rate of plain | not saturated up to 4 req/s; every launch on its own too |"
    ));
    assert!(
        md.contains("| saturation rate of nixl_both | 4 req/s; launches on their own: l1, l2, l3, l4, l5 4 req/s; l0 not saturated up to 4 req/s |"),
        "{md}"
    );
    assert!(md.contains("- mooncake_both l2 is saturated on its own from 4 req/s (criterion G fired there), where mooncake_both's pooled cells saturate at no rate measured: its taxes at ref_load (4 req/s) pool this launch"), "{md}");
    assert_eq!(md.matches("is saturated on its own").count(), 1, "{md}");
    // The cells table: l2's own row at 4 req/s is flagged, the pooled row is not.
    let rows: Vec<&str> = md
        .lines()
        .skip_while(|l| *l != "### mooncake_both")
        .skip(1)
        .take_while(|l| !l.starts_with("## ") && !l.starts_with("### "))
        .filter(|l| l.starts_with("| A") && l.contains("| 4 | 4096/256 |"))
        .collect();
    assert_eq!(rows.len(), 7, "{rows:?}");
    let flags = |r: &str| r.split(" | ").nth(12).unwrap_or_default().to_owned();
    assert_eq!(flags(rows[0]), "\\-", "pooled: {}", rows[0]);
    let l2 = rows.iter().find(|r| r.starts_with("| A l2 |")).unwrap();
    assert_eq!(flags(l2), "G \\*", "{l2}");
}

/// The demo's multi_mooncake_lmcache saturates at 8 req/s (capacity 7, tests/common), which is
/// ref_load (plain keeps up there): its two ref_load taxes are marked "(saturated)", its
/// ref_safe ones and every other config's are not, and the legend says what the mark means.
#[test]
fn a_tax_at_ref_load_in_a_saturated_cell_is_marked() {
    let f = common::demo();
    let refs = &f.analysis.summary.reference_rates;
    assert_eq!((refs.ref_safe, refs.ref_load), (Some(4.0), Some(8.0)));
    let out = render(&f);
    let md = out.md();
    let rows: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("### At the reference rates"))
        .take_while(|l| !l.starts_with("### Across"))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Config"))
        .collect();
    // The seven configs other than plain.
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert!(
        rows.iter()
            .any(|r| r.starts_with("| multi_mooncake_lmcache |"))
    );
    for row in rows {
        let cols: Vec<&str> = row.split(" | ").collect();
        let marked: Vec<usize> = (0..cols.len())
            .filter(|&i| cols[i].ends_with("(saturated)"))
            .collect();
        if row.starts_with("| multi_mooncake_lmcache |") {
            // Columns: config, launches, TTFT safe, TTFT load, TPOT safe, TPOT load, ...
            assert_eq!(marked, vec![3, 5], "{row}");
        } else {
            assert!(marked.is_empty(), "{row}");
        }
    }
    assert!(
        md.contains("\"(saturated)\": at ref\\_load, a config at or above its own saturation rate")
    );
    assert!(out.html().contains("(saturated)&rdquo;: at ref_load"));
}

/// The GPU model(s) are stated at a glance; a root that mixes models says so there and in a
/// warning, with each model's launches (2 launches each of plain and mooncake_both, the
/// latter's env.txt naming an H100, so 2 and 2 launches, one (unrecorded) machine each).
#[test]
fn a_root_that_mixes_gpu_models_is_named_and_warned() {
    let demo = render(&common::demo());
    let one = demo.md();
    let row = one
        .lines()
        .find(|l| l.starts_with("| GPU |"))
        .expect("a GPU row at a glance");
    // The demo: 8 configs x 2 launches, every env.txt naming the same GPU.
    assert_eq!(row, "| GPU | NVIDIA H20 96GB: 16 launches on 1 machine |");
    assert!(!one.contains("mixes GPU models"));

    let f = common::mixed_gpus();
    let warnings = &f.analysis.summary.warnings;
    let mixed: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("mixes GPU models"))
        .collect();
    assert_eq!(mixed.len(), 1, "{warnings:#?}");
    assert!(
        mixed[0].starts_with(
            "this root mixes GPU models (NVIDIA H100 80GB HBM3: 2 launches on 1 machine; \
             NVIDIA H20 96GB: 2 launches on 1 machine)"
        ),
        "{}",
        mixed[0]
    );
    let md = render(&f).md();
    assert!(
        md.contains(
            "| GPU | NVIDIA H100 80GB HBM3: 2 launches on 1 machine; NVIDIA H20 96GB: 2 \
             launches on 1 machine — MIXED GPU models (see Warnings) |"
        ),
        "{}",
        md.lines()
            .filter(|l| l.starts_with("| GPU"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The seed asks at least 200 completed requests per cell (launch/profiles/seed.toml). With
/// every Phase A launch-cell of the demo set to 200 measured requests no line is written; with
/// one set to 90 and the rest to 150 the line gives Phase A's range 90-150 (by hand), and the
/// other phases only where theirs fall short too.
#[test]
fn launch_cells_below_the_seeds_request_minimum_are_listed() {
    use ctax_schema::Phase;
    let set = |f: &mut common::Fixture, phase: Phase, n: u64| {
        for c in f
            .analysis
            .summary
            .per_launch
            .iter_mut()
            .filter(|c| c.key.phase == phase)
        {
            c.counts.measured_ok = n;
        }
    };
    let mut enough = common::demo();
    for phase in [Phase::A, Phase::B, Phase::Bp] {
        set(&mut enough, phase, 200);
    }
    let gaps = degradation(&render(&enough).md());
    assert!(!gaps.contains("fewer requests than the seed"), "{gaps}");

    let mut short = enough.clone();
    set(&mut short, Phase::A, 150);
    let first = short
        .analysis
        .summary
        .per_launch
        .iter_mut()
        .find(|c| c.key.phase == Phase::A && c.complete)
        .expect("a complete Phase A launch-cell");
    first.counts.measured_ok = 90;
    let gaps = degradation(&render(&short).md());
    assert!(
        gaps.contains(
            "A launch's cell measured fewer requests than the seed's minimum completed per cell \
             (Phase A 90-150 (the seed: 200); measured requests ok per launch-cell)"
        ),
        "{gaps}"
    );
}
