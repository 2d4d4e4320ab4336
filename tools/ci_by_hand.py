#!/usr/bin/env python3
"""Independent check of a report's tax CIs (TTFT and TPOT p90) by the t-interval they stand for.

    python3 tools/ci_by_hand.py SUMMARY_JSON [VERDICTS_JSON]

The report draws a tax's CI by a bootstrap (DESIGN.md §4.3 "Launch-to-launch noise"): each
launch's log p90 gets replicates `log est + sqrt(max(s2_b, v_req)) * z`, s2_b = s2 * df / chi2_df
drawn once per replicate and shared by every launch that carries the same variance, and the tax
is the within-machine weighted mean of the config's launches minus plain's. This tool reads only
SUMMARY_JSON (a report's `data/summary.json`) and works the same interval out in closed form,
with none of the tool's code:

  - the launches per machine (the complete launch-cells of the config and of plain, on machines
    where both ran) and the weights w_m = k_X k_p / (k_X + k_p), by `tools/tax_by_hand.py`'s
    `machine_weights` / `within_machines`;
  - the variance each side carries, looked up as DESIGN.md says: the config's own in the cell
    (`launch_noise.own` with that cell), else the cell's pool (`launch_noise.cells`, >= 4 df),
    else the config's own over every cell (`own` without a cell), else the pool over every cell
    (`launch_noise.metrics`);
  - when both sides carry the same variance (one chi2 draw): the log tax is
    d +- t_{df, 0.975} * s / sqrt(sum w_m), exactly t-distributed (Var of a machine's
    difference is s2 (1/k_X + 1/k_p) = s2 / w_m; the weighted mean's is s2 / sum w_m) -- "exact";
  - when they carry different variances (a config, or plain, with its own): Var =
    sum_m w_m^2 (s2_X / k_X + s2_p / k_p) / (sum w_m)^2 with Welch-Satterthwaite's df -- "Welch";
  - the request-level floor v_req (each launch's own bootstrap variance, here read back from its
    p90 CI as ((ln hi - ln lo) / 3.92)^2) can only widen the report's interval. Where it binds with
    more than 1% probability for some launch (P(chi2_df > df s2 / v_req)), the check is one-sided:
    the report's interval must contain the t-interval -- "floor".

Tolerances, on the log scale, as a fraction of the t-interval's half-width: three Monte Carlo
standard errors of a bootstrap's 97.5% point of a t_df variable (the report's resamples, from
`conventions`; 1.5% of the half-width at df 28 and 10,000 resamples, 2.0% at df 5, 2.6% at
df 3), plus a slack of 1% (exact) or 8% (Welch: the approximation's own error at df >= 3 is a
few %). Every tax
whose detection (`tax`: CI above 0; `negative`: below) disagrees with its own reported interval
is printed as bad, and so is one the t-interval would read differently, unless a bound of that
lies within the tolerance of 0 or the floor binds.
With VERDICTS_JSON it also checks that H1's interval is mooncake_both's TTFT p90 tax at ref_safe
and that it lies above, below or across 10% as the t-interval does, that SC1-SC4 carry H1-H4's
intervals, and H1-H6's intervals against
a simulation of the same model (`simulate`: per replicate one s2_b per variance, every
launch-cell's log p90 + sqrt(max(s2_b, v_req)) z, the taxes by the weighting, then H2's gap, H3's
ratio, H4's deviation, H5/H6's mean change), within three Monte Carlo errors of both plus 5% of
the half-width; one-sided (the report's must contain the simulation's) where the floor binds
for a launch whose CI is lopsided, as its width then does not give v_req. The step p50 taxes (a
difference in µs of log-normal replicates) have no closed form and are not checked, nor are
the success criteria. Prints every disagreement and `checked N bounds and D detections in M taxes
(exact E, Welch W, floor F) and H1's, B bounds of H1-H6 by simulation, K bad; largest gap ...`;
exits 1 when any disagrees or nothing was checked. Standard library only (~5 s).
"""
import collections
import json
import math
import random
import sys

from tax_by_hand import machine_weights, within_machines

# Slack beyond the bootstrap's Monte Carlo error, as a fraction of the half-width: none is
# needed by the exact interval but rounding; Welch-Satterthwaite's own error at df >= 3 is a few %.
EXACT_SLACK, WELCH_SLACK, FLOOR_BIND_P = 0.01, 0.08, 0.01
Z975 = 1.959963984540054


def betacf(a, b, x):
    """Continued fraction of the regularized incomplete beta (Lentz; Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betai(a, b, x):
    """The regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * betacf(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """Student's t CDF: 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0."""
    tail = 0.5 * betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p, df):
    """The p-quantile of Student's t (bisection on t_cdf; df may be fractional)."""
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def t_pdf(t, df):
    """Student's t density."""
    return math.exp(
        math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
        - (df + 1) / 2 * math.log1p(t * t / df)
    )


def mc_error(df, resamples):
    """The relative standard error of a bootstrap's 97.5% point of a t_df variable drawn from
    `resamples` replicates: sqrt(p (1 - p) / R) / f(q) / q (the sample quantile's asymptotics)."""
    q = t_quantile(0.975, df)
    return math.sqrt(0.025 * 0.975 / resamples) / t_pdf(q, df) / q


def chi2_sf(x, df):
    """P(chi2_df > x) = 1 - P(df/2, x/2), the regularized lower gamma by its series / continued
    fraction (Numerical Recipes 6.2)."""
    a, x = df / 2.0, x / 2.0
    if x <= 0:
        return 1.0
    gln = math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(1000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return 1.0 - total * math.exp(-x + a * math.log(x) - gln)
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - gln) * h


def self_check():
    """The t table (two-sided 95%) and a chi2 table value, so a slip in the special functions
    cannot pass silently."""
    for df, t in ((1, 12.706), (3, 3.182), (4, 2.776), (7, 2.365), (28, 2.048)):
        assert abs(t_quantile(0.975, df) - t) < 1e-3, (df, t_quantile(0.975, df))
    assert abs(chi2_sf(11.070, 5) - 0.05) < 1e-4 and abs(chi2_sf(3.841, 1) - 0.05) < 1e-4
    assert abs(t_pdf(0.0, 1) - 1 / math.pi) < 1e-12


def variance(noise, metric, tag, config):
    """(var, df, which) the config carries for `metric` in cell `tag`, in DESIGN's lookup order."""
    own = {(o["metric"], o.get("cell"), o["config"]): o["variance"] for o in noise.get("own", [])}
    cell = (noise.get("cells", {}).get(tag) or {}).get(metric)
    for v, which in (
        (own.get((metric, tag, config)), f"{config}'s own in {tag}"),
        (cell if cell and cell["df"] >= 4 else None, f"{tag}'s pool"),
        (own.get((metric, None, config)), f"{config}'s own over every cell"),
        (noise.get("metrics", {}).get(metric), "the pool over every cell"),
    ):
        if v and v.get("df", 0) > 0:
            return v["var"], v["df"], which
    return None


def linear_quantile(sorted_xs, q):
    """numpy's default (linear) quantile of an already sorted list."""
    h = (len(sorted_xs) - 1) * q
    i = int(math.floor(h))
    j = min(i + 1, len(sorted_xs) - 1)
    return sorted_xs[i] + (h - i) * (sorted_xs[j] - sorted_xs[i])


def simulate(units, noise, functions, reps, seed=20261207):
    """H1-H6's replicates by simulating the launch-noise model directly (DESIGN.md §4.3), not by
    the tool's code: per replicate one s2_b = s2 df / chi2_df for each variance (keyed as the
    lookup names it, so launches that carry one variance share its draw), every launch-cell's
    log p90 + sqrt(max(s2_b, v_req)) z, and each config's tax in each cell by the within-machine
    weighting. `units` maps (metric, tag, config) -> machine -> [(log est, v_req, lopsided)]
    (plain's too; each config's shares a machine with plain's and has a variance); `functions`
    maps a name to f(tax) -> value, `tax(metric, tag, config)` the fraction tax. Returns name ->
    its list of replicates."""
    rng = random.Random(seed)
    keys = {}
    for (metric, tag, config) in units:
        keys[(metric, tag, config)] = variance(noise, metric, tag, config)
    out = {name: [] for name in functions}
    for _ in range(reps):
        draws = {}
        logs = {}
        for unit, by_machine in units.items():
            var, df, which = keys[unit]
            k = (unit[0], which)
            if k not in draws:
                draws[k] = var * df / rng.gammavariate(df / 2.0, 2.0)
            s2 = draws[k]
            logs[unit] = {
                m: [e + math.sqrt(max(s2, v_req)) * rng.gauss(0.0, 1.0) for e, v_req, _ in xs]
                for m, xs in by_machine.items()
            }

        def tax(metric, tag, config):
            return math.expm1(within_machines(logs[(metric, tag, config)], logs[(metric, tag, "plain")]))

        for name, f in functions.items():
            out[name].append(f(tax))
    return out


def check_hypotheses(s, v, noise, launch_logs, resamples, reps=20000, batches=10):
    """H1-H6's intervals against `simulate`'s: each bound within three Monte Carlo errors (the
    simulation's and the report's bootstrap's, from the spread of the bound over `batches`
    batches of the simulation) plus 5% of the half-width for v_req, read back from each launch's
    CI here. Where the floor binds (> 1%) for a launch whose CI is lopsided, v_req is not known
    from its CI, and the check is one-sided: the report's interval must contain the
    simulation's (the floor only widens). `v` maps hypothesis id -> verdict. Returns (bounds
    checked, bad)."""
    safe = next(
        (t for t in s["taxes"] if t["config"] == "mooncake_both" and t["context"] == "ref_safe"), None
    )
    if safe is None:
        return 0, 0
    tag = f"{safe['phase']}/{safe['cell']}"
    at_safe = {
        t["config"] for t in s["taxes"] if t["context"] == "ref_safe" and (t.get("ttft_p90") or {}).get("value")
    }
    h4 = ("mooncake_both", "lmcache_only", "multi_mooncake_lmcache")
    if "multi_mooncake_lmcache" not in at_safe:
        h4 = ("mooncake_both_nhd", "lmcache_only", "multi_mooncake_lmcache_nhd")
    units = {}

    def add(metric, field, phase, cell, config):
        """Adds the config's and plain's launch-cells where both carry a variance and share a
        machine; whether they do."""
        tag_ = f"{phase}/{cell}"
        x, p = launch_logs(config, phase, cell, field), launch_logs("plain", phase, cell, field)
        if not set(x) & set(p) or None in (variance(noise, metric, tag_, c) for c in (config, "plain")):
            return False
        units[(metric, tag_, config)], units[(metric, tag_, "plain")] = x, p
        return True

    for c in ("mooncake_both", "nixl_both", "noop_connector") + h4:
        add("ttft_p90", "ttft_ms", safe["phase"], safe["cell"], c)
    # Phase B's grid of mooncake_both: (input, output) -> tag, per metric.
    grid = {"ttft_p90": {}, "tpot_p90": {}}
    for t in s["taxes"]:
        if t["config"] == "mooncake_both" and t["phase"] == "B":
            i, o = (int(x[1:]) for x in t["cell"].split("_")[1:3])
            for metric, field in (("ttft_p90", "ttft_ms"), ("tpot_p90", "tpot_ms")):
                if add(metric, field, "B", t["cell"], "mooncake_both"):
                    grid[metric][(i, o)] = f"B/{t['cell']}"

    def at(*configs):
        """The units of `configs` (and plain) at ref_safe, or None when one is missing."""
        us = [("ttft_p90", tag, c) for c in configs + ("plain",)]
        return us if all(u in units for u in us) else None

    def along(metric, vary_input):
        rows = collections.defaultdict(dict)
        for (i, o), g in grid[metric].items():
            fixed, varying = (o, i) if vary_input else (i, o)
            rows[fixed][varying] = g
        rows = [r for r in rows.values() if len(r) >= 2]
        if not rows:
            return None, None
        used = [(metric, g, c) for r in rows for g in r.values() for c in ("mooncake_both", "plain")]
        return (
            lambda tax: sum(
                tax(metric, r[max(r)], "mooncake_both") - tax(metric, r[min(r)], "mooncake_both") for r in rows
            )
            / len(rows)
        ), used

    def mb(tax):
        return tax("ttft_p90", tag, "mooncake_both")

    def dev(tax):
        m, l, x = (tax("ttft_p90", tag, c) for c in h4)
        return abs(x - (m + l)) / abs(x)

    candidates = {
        "h1": (mb, at("mooncake_both")),
        "h2": (lambda tax: mb(tax) - tax("ttft_p90", tag, "nixl_both"), at("mooncake_both", "nixl_both")),
        "h3": (lambda tax: tax("ttft_p90", tag, "noop_connector") / mb(tax), at("mooncake_both", "noop_connector")),
        "h4": (dev, at(*h4)),
        "h5": along("ttft_p90", True),
        "h6": along("tpot_p90", False),
    }
    chosen = {
        k: (f, used)
        for k, (f, used) in candidates.items()
        if f and used and (v.get(k, {}).get("estimate") or {}).get("lo") is not None
    }
    if not chosen:
        return 0, 0
    sims = simulate(units, noise, {k: f for k, (f, _) in chosen.items()}, reps)
    checked = bad = 0
    for hid, xs in sims.items():
        est = v[hid]["estimate"]
        loose = False
        for u in chosen[hid][1]:
            var, df, _ = variance(noise, *u)
            for launches in units[u].values():
                for _, v_req, lopsided in launches:
                    if lopsided and v_req > 0 and chi2_sf(df * var / v_req, df) > FLOOR_BIND_P:
                        loose = True
        n_b = reps // batches
        parts = [sorted(xs[b * n_b : (b + 1) * n_b]) for b in range(batches)]
        whole = sorted(xs)
        half = (linear_quantile(whole, 0.975) - linear_quantile(whole, 0.025)) / 2
        line = []
        for name, q in (("lo", 0.025), ("hi", 0.975)):
            per = [linear_quantile(p, q) for p in parts]
            mean = sum(per) / batches
            var_b = sum((x - mean) ** 2 for x in per) / (batches - 1)
            mc = math.sqrt(var_b * n_b / reps + var_b * n_b / resamples)
            hand = linear_quantile(whole, q)
            tol = 3 * mc + 0.05 * half
            checked += 1
            line.append(f"{name} {hand:+.4f} vs {est[name]:+.4f} (±{tol:.4f})")
            if loose:
                off = est[name] > hand + tol if name == "lo" else est[name] < hand - tol
            else:
                off = abs(hand - est[name]) > tol
            if off:
                bad += 1
                print(
                    f"{hid.upper()} interval: {name} by simulation {hand:+.4f}, report {est[name]:+.4f}, "
                    f"tolerance {tol:.4f}{' (one-sided: a lopsided launch CI under the floor)' if loose else ''}"
                )
        kind = "one-sided, a lopsided launch CI under the floor" if loose else "two-sided"
        print(f"{hid.upper()} by simulation ({kind}): " + ", ".join(line))
    return checked, bad


def main(path, verdicts_path=None):
    self_check()
    s = json.load(open(path))
    noise = s["launch_noise"]
    resamples = s["conventions"]["bootstrap"]["resamples"]
    rows = collections.defaultdict(list)
    for c in s["per_launch"]:
        k = c["key"]
        if c.get("complete"):
            rows[(k["config"], k["phase"], k["cell"])].append(c)

    def launch_logs(config, phase, cell, field):
        """machine -> [(log p90, v_req, lopsided)] of the config's complete launch-cells: v_req
        read back from the p90's CI, and whether that CI is lopsided (one side more than 3x the
        other on the log scale: its bootstrap distribution is far from normal, so the CI's width
        does not give its variance)."""
        out = collections.defaultdict(list)
        for c in rows[(config, phase, cell)]:
            q = (c.get(field) or {}).get("p90")
            if q and q["est"] > 0:
                v_req, lopsided = 0.0, False
                if 0 < q["lo"] <= q["est"] <= q["hi"]:
                    below, above = math.log(q["est"] / q["lo"]), math.log(q["hi"] / q["est"])
                    v_req = ((below + above) / (2 * Z975)) ** 2
                    lopsided = max(below, above) > 3 * min(below, above)
                out[c["machine"]].append((math.log(q["est"]), v_req, lopsided))
        return out

    checked = detections = bad = hyp_bounds = 0
    h1_checked = ""
    kinds = collections.Counter()
    worst = collections.Counter()
    interval_of = {}
    for t in s["taxes"]:
        config, phase, cell = t["config"], t["phase"], t["cell"]
        tag = f"{phase}/{cell}"
        for metric, field in (("ttft_p90", "ttft_ms"), ("tpot_p90", "tpot_ms")):
            rep = (t.get(metric) or {}).get("value")
            if not rep or rep.get("lo") is None or rep.get("hi") is None:
                continue
            where = f"{config} {t['context']} {tag} {metric}"
            vx, vp = variance(noise, metric, tag, config), variance(noise, metric, tag, "plain")
            if vx is None or vp is None:
                continue
            x, p = launch_logs(config, phase, cell, field), launch_logs("plain", phase, cell, field)
            logs_x = {m: [e for e, *_ in xs] for m, xs in x.items()}
            logs_p = {m: [e for e, *_ in ps] for m, ps in p.items()}
            w = machine_weights(logs_x, logs_p)
            if not w:
                continue
            machines, sw = list(w), sum(w.values())
            d = within_machines(logs_x, logs_p)
            a = sum(w[m] ** 2 / len(x[m]) for m in machines) / sw**2
            b = sum(w[m] ** 2 / len(p[m]) for m in machines) / sw**2
            if vx[2] == vp[2]:
                var, df, kind = vx[0] * (a + b), vx[1], "exact"
            else:
                ax, bp = vx[0] * a, vp[0] * b
                var, kind = ax + bp, "Welch"
                df = (ax + bp) ** 2 / (ax**2 / vx[1] + bp**2 / vp[1])
            half = t_quantile(0.975, df) * math.sqrt(var)
            # Does the request-level floor bind for some launch with more than 1% probability?
            binds = max(
                chi2_sf(v_df * v_s2 / v_req, v_df) if v_req > 0 else 0.0
                for side, (v_s2, v_df, _) in ((x, vx), (p, vp))
                for m in machines
                for _, v_req, _ in side[m]
            )
            floor = binds > FLOOR_BIND_P
            kind = "floor" if floor else kind
            kinds[kind] += 1
            lo_h, hi_h = d - half, d + half
            lo_r, hi_r = math.log1p(rep["lo"]), math.log1p(rep["hi"])
            slack = EXACT_SLACK if kind == "exact" else WELCH_SLACK
            tol = (3 * mc_error(df, resamples) + slack) * half
            worst[kind] = max(worst[kind], abs(lo_r - lo_h) / half, abs(hi_r - hi_h) / half)
            interval_of[(config, t["context"], phase, cell, metric)] = (lo_h, hi_h, tol, rep)
            checked += 2
            if floor:
                off = [n for n, ok in (("lo", lo_r <= lo_h + tol), ("hi", hi_r >= hi_h - tol)) if not ok]
            else:
                off = [n for n, r, h in (("lo", lo_r, lo_h), ("hi", hi_r, hi_h)) if abs(r - h) > tol]
            if off:
                bad += len(off)
                print(
                    f"{where}: report [{rep['lo']:+.4f}, {rep['hi']:+.4f}], by hand ({kind}, df {df:.1f}, "
                    f"{vx[2]} / {vp[2]}) [{math.expm1(lo_h):+.4f}, {math.expm1(hi_h):+.4f}]: {', '.join(off)} off"
                )
            # Detection: as the report's own bounds read it (always), and as the t-interval does
            # (unless a bound lies within the tolerance of 0, or the floor widens the report's).
            said = (t.get(metric) or {}).get("detection")
            if said in ("tax", "negative", "inconclusive"):
                own = "tax" if lo_r > 0 else "negative" if hi_r < 0 else "inconclusive"
                hand = "tax" if lo_h > 0 else "negative" if hi_h < 0 else "inconclusive"
                near = min(abs(lo_h), abs(hi_h)) <= tol
                detections += 1
                if said != own:
                    bad += 1
                    print(f"{where}: detection {said}, its own interval reads {own}")
                elif said != hand and not near and not floor:
                    bad += 1
                    print(f"{where}: detection {said}, by hand {hand}")
    if verdicts_path:
        verdicts = json.load(open(verdicts_path))
        v = {h["id"]: h for h in verdicts["hypotheses"]}
        # SC1-SC4 read H1-H4's intervals against the seed's expected ranges: the same numbers.
        for sc in verdicts.get("success_criteria", []):
            h = v.get("h" + sc["id"][2:]) if sc["id"] in ("sc1", "sc2", "sc3", "sc4") else None
            if h is not None and sc.get("estimate") != h.get("estimate"):
                bad += 1
                print(f"{sc['id'].upper()}'s interval {sc.get('estimate')} is not {h['id'].upper()}'s {h.get('estimate')}")
        h1 = v.get("h1", {})
        est = h1.get("estimate") or {}
        safe = [k for k in interval_of if k[0] == "mooncake_both" and k[1] == "ref_safe" and k[4] == "ttft_p90"]
        if est.get("lo") is not None and safe:
            lo_h, hi_h, tol, tax = interval_of[safe[0]]
            h1_checked = " and H1's"
            if (est["lo"], est["hi"]) != (tax["lo"], tax["hi"]):
                bad += 1
                print(f"H1's interval {est} is not mooncake_both's TTFT p90 tax at ref_safe {tax}")
            t10 = math.log1p(0.10)
            side = lambda lo, hi: "above" if lo >= t10 else "below" if hi < t10 else "straddles"
            if min(abs(lo_h - t10), abs(hi_h - t10)) > tol and side(lo_h, hi_h) != side(
                math.log1p(est["lo"]), math.log1p(est["hi"])
            ):
                bad += 1
                print(f"H1: the report's interval {side(math.log1p(est['lo']), math.log1p(est['hi']))} 10%, by hand it {side(lo_h, hi_h)}")
            print(
                f"H1 by hand: [{math.expm1(lo_h):+.4f}, {math.expm1(hi_h):+.4f}], report [{est['lo']:+.4f}, {est['hi']:+.4f}]"
            )
        hyp_bounds, hyp_bad = check_hypotheses(s, v, noise, launch_logs, resamples)
        bad += hyp_bad
    print(
        f"checked {checked} bounds and {detections} detections in {len(s['taxes'])} taxes (exact "
        f"{kinds['exact']}, Welch {kinds['Welch']}, floor {kinds['floor']}){h1_checked}, {hyp_bounds} bounds of H1-H6 by simulation, {bad} bad; "
        "largest gap in half-widths: "
        f"exact {worst['exact']:.3f}, Welch {worst['Welch']:.3f}, floor {worst['floor']:.3f}"
    )
    return 0 if checked and not bad else 1


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
