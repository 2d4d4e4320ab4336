//! H1–H6 exactly as the seed pre-registered them (hypothesis table), on TTFT p90 taxes at
//! ref_safe (H1–H4) and on the Phase B shape grid (H5, H6).

use std::collections::BTreeMap;

use ctax_schema::{Cell, Phase};

use super::{Ctx, Draft, Verdict, VerdictKind, at_least, below, num, pct, pp};
use crate::analysis::model::{CellStats, DatasetInfo, Detection, Estimate, has_complete_phase_a};
use crate::analysis::taxes::{Metric, detection, diff, map3, ratio};

pub(crate) const H1_MIN_TAX: f64 = 0.10;
pub(crate) const H2_MIN_GAP: f64 = 0.05;
pub(crate) const H2_MAX_GAP: f64 = 0.10;
pub(crate) const H3_MAX_RATIO: f64 = 0.5;
pub(crate) const H3_IMPLEMENTATION_RATIO: f64 = 0.3;
pub(crate) const H4_MAX_DEVIATION: f64 = 0.30;

/// The configs each hypothesis compares with plain (its success criterion compares the same):
/// the one list its own ref_safe lookup uses and the report's single-launch note reads.
const CONFIGS: [(&str, &[&str]); 6] = [
    ("h1", &["mooncake_both"]),
    ("h2", &["mooncake_both", "nixl_both"]),
    ("h3", &["noop_connector", "mooncake_both"]),
    ("h4", &H4_SEED),
    ("h5", &["mooncake_both"]),
    ("h6", &["mooncake_both"]),
];

/// H4's configs as the seed defines it: tax(multi) against tax(mooncake) + tax(lmcache).
pub(crate) const H4_SEED: [&str; 3] = ["mooncake_both", "lmcache_only", "multi_mooncake_lmcache"];
/// H4 on the named NHD variants (`launch/common.sh`: VLLM_KV_CACHE_LAYOUT=NHD): lmcache_only
/// already runs NHD (nothing asks it for HND), so only the two Mooncake configs change.
pub(crate) const H4_NHD: [&str; 3] = [
    "mooncake_both_nhd",
    "lmcache_only",
    "multi_mooncake_lmcache_nhd",
];

/// The configs H4 (and SC4, figure 8) compare: the seed's, unless multi_mooncake_lmcache is
/// not usable and both NHD variants are (on vLLM 0.26 with the bundled LMCache, Mooncake's HND
/// layout kills the MultiConnector's engine at its first KV store; DESIGN.md §8, §9.1); with
/// neither usable, the seed's (whose reasons then say why). A config is usable when it ran and
/// has a complete Phase A cell (what `Ctx::has_data` asks). The one choice for H4, SC4 and
/// figure 8.
pub(crate) fn h4_configs_in(info: &DatasetInfo, cells: &[CellStats]) -> &'static [&'static str; 3] {
    let usable = |c: &str| info.configs.iter().any(|x| x == c) && has_complete_phase_a(cells, c);
    if !usable(H4_SEED[2]) && usable(H4_NHD[0]) && usable(H4_NHD[2]) {
        &H4_NHD
    } else {
        &H4_SEED
    }
}

/// The configs verdict `id` compares with plain in this dataset: [`configs_of`], with H4's
/// (and SC4's) chosen by [`h4_configs_in`].
pub(crate) fn configs_in(ctx: &Ctx, id: &str) -> &'static [&'static str] {
    if hypothesis_of(id) == "h4" {
        h4_configs_in(ctx.info, ctx.cells)
    } else {
        configs_of(id)
    }
}

/// The hypothesis a success criterion reports on (`sc1`…`sc5` → `h1`…`h5`); `id` otherwise.
fn hypothesis_of(id: &str) -> &str {
    match id {
        "sc1" => "h1",
        "sc2" => "h2",
        "sc3" => "h3",
        "sc4" => "h4",
        "sc5" => "h5",
        other => other,
    }
}

/// The configs verdict `id` (`h1`…`h6`, `sc1`…`sc5`) compares with plain; empty for the others.
pub(crate) fn configs_of(id: &str) -> &'static [&'static str] {
    let h = hypothesis_of(id);
    CONFIGS
        .iter()
        .find(|(x, _)| *x == h)
        .map_or(&[], |(_, c)| *c)
}

/// The phase whose cells verdict `id` reads: Phase B's shape grid for H5/H6 (and SC5), Phase A
/// (the reference-rate cells) for the others.
pub(crate) fn phase_of(id: &str) -> Phase {
    match hypothesis_of(id) {
        "h5" | "h6" => Phase::B,
        _ => Phase::A,
    }
}

pub(crate) fn all(ctx: &Ctx) -> Vec<Verdict> {
    vec![h1(ctx), h2(ctx), h3(ctx), h4(ctx), h5(ctx), h6(ctx)]
}

type Pair = (f64, Vec<f64>);

/// A threshold fraction as whole percent (`0.10` → `10%`) for verdict reasons.
fn whole_pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

/// A threshold fraction as whole percentage points (`0.05` → `5`).
fn whole_pp(x: f64) -> String {
    format!("{:.0}", x * 100.0)
}

/// TTFT p90 tax of `config` in the ref_safe cell.
fn ttft_tax(ctx: &Ctx, config: &str, cell: &str) -> Result<Pair, String> {
    ctx.engine.relative(config, Phase::A, cell, Metric::TtftP90)
}

fn est(ctx: &Ctx, p: &Pair) -> Estimate {
    ctx.engine.rep.estimate(p.0, &p.1)
}

fn h1(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "h1",
        title: "H1: substrate tax persists at single instance / synthetic load",
        statement: "Single-instance mooncake_both TTFT p90 is at least 10% higher than plain at the reference rate (ref_safe).",
        unit: "fraction",
        threshold: format!("tax_TTFT_p90(mooncake_both) >= {H1_MIN_TAX:.2}"),
    };
    let cell = match ctx.ref_safe_cell(configs_of("h1")) {
        Ok(c) => c,
        Err(r) => return d.not_testable(r),
    };
    let t = match ttft_tax(ctx, "mooncake_both", &cell) {
        Ok(t) => t,
        Err(r) => return d.not_testable(r),
    };
    let e = est(ctx, &t);
    let v = at_least(&e, H1_MIN_TAX);
    let t = whole_pct(H1_MIN_TAX);
    let reason = match v {
        VerdictKind::Supported => format!("tax {} lies above {t} at {cell}", pct(&e)),
        VerdictKind::Refuted => format!(
            "tax {} lies below {t} at {cell}: the trace-replay tax is dominated by 8-instance coupling, not connector machinery",
            pct(&e)
        ),
        _ => format!("tax {} straddles {t} at {cell}", pct(&e)),
    };
    d.finish(Some(e), v, reason, None)
}

fn h2(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "h2",
        title: "H2: the NIXL-vs-Mooncake gap is mechanism-side",
        statement: "Single-instance numbers preserve the ~7 pp gap: NIXL tax < Mooncake tax by 5-10 pp (falsified if the gap shrinks or inverts).",
        unit: "pp",
        threshold: format!("tax(mooncake_both) - tax(nixl_both) >= {H2_MIN_GAP:.2}"),
    };
    let cell = match ctx.ref_safe_cell(configs_of("h2")) {
        Ok(c) => c,
        Err(r) => return d.not_testable(r),
    };
    let (m, n) = match (
        ttft_tax(ctx, "mooncake_both", &cell),
        ttft_tax(ctx, "nixl_both", &cell),
    ) {
        (Ok(m), Ok(n)) => (m, n),
        (Err(r), _) | (_, Err(r)) => return d.not_testable(r),
    };
    let gap = diff(&m, &n);
    let e = est(ctx, &gap);
    let v = at_least(&e, H2_MIN_GAP);
    let (lo_pp, hi_pp) = (whole_pp(H2_MIN_GAP), whole_pp(H2_MAX_GAP));
    let ci = pp(&e);
    let reason = match v {
        VerdictKind::Supported if e.lo.is_some_and(|lo| lo > H2_MAX_GAP) => {
            format!("gap {ci} is preserved and larger than the prior {lo_pp}-{hi_pp} pp")
        }
        VerdictKind::Supported => format!("gap {ci} preserved (>= {lo_pp} pp)"),
        VerdictKind::Refuted => {
            format!(
                "gap {ci} shrank below {lo_pp} pp or inverted: the trace-replay gap was a coupling artifact"
            )
        }
        _ => format!("gap {ci} straddles {lo_pp} pp"),
    };
    d.finish(Some(e), v, reason, None)
}

/// H3's ratio tax(noop)/tax(mooncake_both) with its estimate, or why it is not testable.
pub(crate) fn h3_ratio(ctx: &Ctx) -> Result<(Estimate, String), (VerdictKind, String)> {
    let cell = ctx
        .ref_safe_cell(configs_of("h3"))
        .map_err(|r| (VerdictKind::NotTestable, r))?;
    let noop = ttft_tax(ctx, "noop_connector", &cell).map_err(|r| (VerdictKind::NotTestable, r))?;
    let moon = ttft_tax(ctx, "mooncake_both", &cell).map_err(|r| (VerdictKind::NotTestable, r))?;
    let me = est(ctx, &moon);
    if detection(&me) != Detection::Tax {
        return Err((
            VerdictKind::Inconclusive,
            format!(
                "mooncake_both's tax {} is not distinguishable from 0 (or negative): the ratio is undefined",
                pct(&me)
            ),
        ));
    }
    Ok((est(ctx, &ratio(&noop, &moon)), cell))
}

/// The KV layout behind H3's split: noop_connector serves on vLLM's default NHD layout, while the
/// Mooncake connector switches the engine to HND, so tax(mooncake_both) holds the layout change
/// as well as the implementation. Where mooncake_both_nhd (the same connector forced to NHD) has
/// a tax in the cell, the reason gives it beside mooncake_both's; empty otherwise.
fn h3_layout_note(ctx: &Ctx, cell: &str) -> String {
    let (Ok(moon), Ok(nhd)) = (
        ttft_tax(ctx, "mooncake_both", cell),
        ttft_tax(ctx, "mooncake_both_nhd", cell),
    ) else {
        return String::new();
    };
    format!(
        "; mooncake_both asks for the KV layout HND and noop_connector keeps vLLM's default NHD \
         (Engine changes in the Taxes table): mooncake_both_nhd (the same connector on NHD) has \
         tax {} here against mooncake_both's {}, so part of the implementation share may be the \
         layout",
        pct(&est(ctx, &nhd)),
        pct(&est(ctx, &moon))
    )
}

/// SC3's label for a ratio estimate, read from its point estimate alone.
pub(crate) fn h3_point_label(e: &Estimate) -> String {
    if e.est >= H3_MAX_RATIO {
        "framework-cost-dominated".into()
    } else if e.est < H3_IMPLEMENTATION_RATIO {
        "implementation-cost-dominated".into()
    } else {
        format!("mixed (ratio between {H3_IMPLEMENTATION_RATIO} and {H3_MAX_RATIO})")
    }
}

/// Whether the whole interval of the ratio lies in one of SC3's three label ranges.
fn h3_label_decided(e: &Estimate) -> bool {
    e.lo.zip(e.hi).is_some_and(|(lo, hi)| {
        lo >= H3_MAX_RATIO
            || hi < H3_IMPLEMENTATION_RATIO
            || (lo >= H3_IMPLEMENTATION_RATIO && hi < H3_MAX_RATIO)
    })
}

/// The H3/SC3 label column: the label when the whole interval lies in its range, else
/// `undecided (point estimate: …)`, as H4 says "additivity undecided" (a label read from a
/// point estimate alone would state what the CI does not).
pub(crate) fn h3_label(e: &Estimate) -> String {
    let point = h3_point_label(e);
    if h3_label_decided(e) {
        point
    } else {
        format!("undecided (point estimate: {point})")
    }
}

/// The H5/H6 label column: how the tax changes along the lengths, qualified as undecided when the
/// interval of the mean change includes 0.
pub(crate) fn change_label(e: &Estimate) -> String {
    let point = match e.est {
        x if x > 0.0 => format!("grows by {:.1} pp", x * 100.0),
        x => format!("shrinks by {:.1} pp", -x * 100.0),
    };
    match (e.lo, e.hi) {
        (Some(lo), Some(hi)) if lo > 0.0 || hi < 0.0 => point,
        _ => format!("undecided (point estimate: {point})"),
    }
}

fn h3(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "h3",
        title: "H3: framework-vs-implementation split",
        statement: "noop_connector (vLLM connector framework only, every hook a no-op) tax is < 50% of mooncake_both's tax.",
        unit: "ratio",
        threshold: format!("tax(noop_connector) / tax(mooncake_both) < {H3_MAX_RATIO:.1}"),
    };
    match h3_ratio(ctx) {
        Err((VerdictKind::NotTestable, r)) => d.not_testable(r),
        Err((v, r)) => d.finish(None, v, r, None),
        Ok((e, cell)) => {
            let v = below(&e, H3_MAX_RATIO);
            let reason = match v {
                VerdictKind::Supported => {
                    format!(
                        "ratio {} < {H3_MAX_RATIO} at {cell}: the connector implementations carry most of the tax",
                        num(&e)
                    )
                }
                VerdictKind::Refuted => {
                    format!(
                        "ratio {} >= {H3_MAX_RATIO} at {cell}: vLLM's connector framework alone carries half or more",
                        num(&e)
                    )
                }
                _ => format!("ratio {} straddles {H3_MAX_RATIO} at {cell}", num(&e)),
            };
            let reason = format!("{reason}{}", h3_layout_note(ctx, &cell));
            d.finish(Some(e), v, reason, Some(h3_label(&e)))
        }
    }
}

/// H4's relative deviation |multi − (mooncake + lmcache)| / |multi|, the signed difference, and
/// where they were measured (the cell, plus the configs when they are the NHD variants).
pub(crate) fn h4_deviation(
    ctx: &Ctx,
) -> Result<(Estimate, Estimate, String), (VerdictKind, String)> {
    let cfgs = configs_in(ctx, "h4");
    let cell = ctx
        .ref_safe_cell(cfgs)
        .map_err(|r| (VerdictKind::NotTestable, r))?;
    let m = ttft_tax(ctx, cfgs[0], &cell).map_err(|r| (VerdictKind::NotTestable, r))?;
    let l = ttft_tax(ctx, cfgs[1], &cell).map_err(|r| (VerdictKind::NotTestable, r))?;
    let x = ttft_tax(ctx, cfgs[2], &cell).map_err(|r| (VerdictKind::NotTestable, r))?;
    let xe = est(ctx, &x);
    if detection(&xe) != Detection::Tax {
        return Err((
            VerdictKind::Inconclusive,
            format!(
                "the MultiConnector's tax {} is not distinguishable from 0: the relative deviation is undefined",
                pct(&xe)
            ),
        ));
    }
    let dev = map3(&x, &m, &l, |x, m, l| (x - (m + l)).abs() / x.abs());
    let signed = map3(&x, &m, &l, |x, m, l| x - (m + l));
    // Which engines were compared, when they are not the seed's.
    let at = if *cfgs == H4_NHD {
        format!(
            "{cell} on the NHD variants ({}, {}, {}: VLLM_KV_CACHE_LAYOUT=NHD for the two \
             Mooncake configs, not the seed's engine; {})",
            cfgs[0],
            cfgs[1],
            cfgs[2],
            ctx.has_data(H4_SEED[2]).err().unwrap_or_default()
        )
    } else {
        cell
    };
    Ok((est(ctx, &dev), est(ctx, &signed), at))
}

/// H4's rule on the relative deviation: additive when the whole CI is within
/// [`H4_MAX_DEVIATION`], not additive when it lies entirely beyond it.
pub(crate) fn h4_additive(e: &Estimate) -> VerdictKind {
    match (e.lo, e.hi) {
        (_, Some(hi)) if hi <= H4_MAX_DEVIATION => VerdictKind::Supported,
        (Some(lo), _) if lo > H4_MAX_DEVIATION => VerdictKind::Refuted,
        (Some(_), Some(_)) => VerdictKind::Inconclusive,
        _ => VerdictKind::NotTestable,
    }
}

fn h4(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "h4",
        title: "H4: MultiConnector tax is additive",
        statement: "tax(Mooncake+LMCache) ~ tax(Mooncake) + tax(LMCache), within 30%.",
        unit: "ratio",
        threshold: format!(
            "|tax(multi) - (tax(mooncake_both) + tax(lmcache_only))| / tax(multi) <= {H4_MAX_DEVIATION:.2}"
        ),
    };
    match h4_deviation(ctx) {
        Err((VerdictKind::NotTestable, r)) => d.not_testable(r),
        Err((v, r)) => d.finish(None, v, r, None),
        Ok((e, signed, cell)) => {
            let v = h4_additive(&e);
            let label = match detection(&signed) {
                Detection::Tax if v == VerdictKind::Refuted => {
                    "super-additive (cross-connector interference)"
                }
                Detection::Negative if v == VerdictKind::Refuted => {
                    "sub-additive (shared per-step cost amortised)"
                }
                _ if v == VerdictKind::Supported => "additive (linear)",
                _ => "additivity undecided",
            };
            let reason = format!(
                "relative deviation {} at {cell}; multi - (mooncake + lmcache) = {}",
                num(&e),
                pct(&signed)
            );
            d.finish(Some(e), v, reason, Some(label.into()))
        }
    }
}

/// Taxes of `metric` for mooncake_both over the Phase B grid: outer key = the dimension held
/// fixed, inner = the dimension that varies.
fn grid(
    ctx: &Ctx,
    metric: Metric,
    vary_input: bool,
) -> Result<BTreeMap<u32, BTreeMap<u32, Pair>>, String> {
    ctx.has_data("mooncake_both")?;
    let mut g: BTreeMap<u32, BTreeMap<u32, Pair>> = BTreeMap::new();
    let mut why: Option<String> = None;
    for c in ctx.cells.iter().filter(|c| {
        c.launch.is_none() && c.key.phase == Phase::B && c.key.config == "mooncake_both"
    }) {
        let t = match ctx
            .engine
            .relative("mooncake_both", Phase::B, &c.key.cell, metric)
        {
            Ok(t) => t,
            Err(r) => {
                why.get_or_insert(r);
                continue;
            }
        };
        let Some(shape) = Cell::parse(&c.key.cell) else {
            continue;
        };
        let (fixed, varying) = if vary_input {
            (shape.output_len, shape.input_len)
        } else {
            (shape.input_len, shape.output_len)
        };
        g.entry(fixed).or_default().insert(varying, t);
    }
    g.retain(|_, row| row.len() >= 2);
    if g.is_empty() {
        let mut r = String::from(
            "mooncake_both and plain share no Phase B cells with at least two lengths along this axis",
        );
        if let Some(why) = why {
            r.push_str(&format!(" (e.g. {why})"));
        }
        return Err(r);
    }
    Ok(g)
}

/// Directional test shared by H5 and H6: mean over the fixed dimension of
/// tax(longest) − tax(shortest), plus a monotonicity check of the point estimates.
fn directional(ctx: &Ctx, d: Draft, metric: Metric, vary_input: bool, what: &str) -> Verdict {
    let g = match grid(ctx, metric, vary_input) {
        Ok(g) => g,
        Err(r) => return d.not_testable(r),
    };
    let rows: Vec<&BTreeMap<u32, Pair>> = g.values().collect();
    let n = rows.len() as f64;
    let nrep = rows[0].values().next().map_or(0, |p| p.1.len());
    let mut point = 0.0;
    let mut reps = vec![0.0; nrep];
    let mut non_monotone = Vec::new();
    for (fixed, row) in &g {
        let first = row.values().next().expect("row has 2+ entries");
        let last = row.values().next_back().expect("row has 2+ entries");
        point += (last.0 - first.0) / n;
        for (r, (a, b)) in reps.iter_mut().zip(last.1.iter().zip(&first.1)) {
            *r += (a - b) / n;
        }
        let ests: Vec<f64> = row.values().map(|p| p.0).collect();
        if ests.windows(2).any(|w| w[1] < w[0]) {
            non_monotone.push(*fixed);
        }
    }
    let e = ctx.engine.rep.estimate(point, &reps);
    let fixed_name = if vary_input { "output" } else { "input" };
    let v = match (e.lo, e.hi) {
        (Some(lo), _) if lo > 0.0 && non_monotone.is_empty() => VerdictKind::Supported,
        (_, Some(hi)) if hi < 0.0 => VerdictKind::Refuted,
        (Some(_), Some(_)) => VerdictKind::Inconclusive,
        _ => VerdictKind::NotTestable,
    };
    let lengths: std::collections::BTreeSet<u32> =
        g.values().flat_map(|row| row.keys().copied()).collect();
    let lengths: Vec<String> = lengths.iter().map(u32::to_string).collect();
    let mut reason = format!(
        "mean change of the tax from the shortest to the longest {what} ({what} lengths {}): {} \
         (over {} {fixed_name} lengths)",
        lengths.join(", "),
        pp(&e),
        g.len()
    );
    if !non_monotone.is_empty() {
        reason.push_str(&format!(
            "; the point estimate falls between neighbouring {what} lengths at {fixed_name} length {}",
            non_monotone
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let label = Some(change_label(&e));
    d.finish(Some(e), v, reason, label)
}

fn h5(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "h5",
        title: "H5: the tax is shape-dependent (input length)",
        statement: "tax_TTFT_p90 of mooncake_both grows monotonically with input length (Phase B).",
        unit: "pp",
        threshold: "tax(longest input) - tax(shortest input) > 0, monotone".into(),
    };
    directional(ctx, d, Metric::TtftP90, true, "input")
}

fn h6(ctx: &Ctx) -> Verdict {
    let d = Draft {
        id: "h6",
        title: "H6: the tax compounds in decode (output length)",
        statement: "tax_TPOT_p90 of mooncake_both grows with output length (Phase B).",
        unit: "pp",
        threshold: "tax(longest output) - tax(shortest output) > 0, monotone".into(),
    };
    directional(ctx, d, Metric::TpotP90, false, "output")
}
