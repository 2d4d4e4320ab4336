#!/usr/bin/env python3
"""Independent check of a report's tax point estimates and of the launches each tax compares.

    python3 tools/tax_by_hand.py SUMMARY_JSON [VERDICTS_JSON]

Reads SUMMARY_JSON (a report's `data/summary.json`) and, with none of the tool's analysis code,
recomputes every tax in its `taxes` list from the per-launch rows of the same file (whose
TTFT and TPOT p90s `tools/p90_by_hand.py` checks against the raw requests) by the definition in
DESIGN.md §4.3 "Machines":

  - the launches compared: the config's complete launch-cells of the tax's (phase, cell) on a
    machine where plain has a complete launch-cell of it, and plain's complete launch-cells on
    a machine where the config has one (they must equal the tax's `paired_launches` and
    `plain_launches`);
  - TTFT and TPOT p90 taxes: on each machine with both, the mean log p90 of the config's
    launches minus plain's, weighted over the machines by k_X k_plain / (k_X + k_plain); the tax
    is exp(weighted mean) - 1;
  - the step p50 tax (µs): the same weighting of the difference of the mean step p50s, over the
    launch-cells with step data.

With VERDICTS_JSON (the same report's `data/verdicts.json`) it also recomputes the point
estimates of H1-H6 from the by-hand taxes (seed §H1-H6):
  - at ref_safe, TTFT p90: H1 mooncake_both's tax; H2 it minus nixl_both's; H3 noop_connector's
    over mooncake_both's; H4 |multi - (mooncake + lmcache)| / |multi| over mooncake_both,
    lmcache_only and multi_mooncake_lmcache, or their NHD variants (mooncake_both_nhd,
    lmcache_only, multi_mooncake_lmcache_nhd) when multi_mooncake_lmcache has no tax there. The
    report leaves H3 (H4) undefined unless mooncake_both's (the multi config's) tax CI lies
    above 0: then none is expected;
  - over Phase B's shapes of mooncake_both: H5 the mean, over the output lengths with at least
    two input lengths, of the TTFT p90 tax at the longest input minus at the shortest; H6 the
    same of the TPOT p90 tax along output lengths, over the input lengths.

Prints every disagreement (relative 1e-6) and `checked N values in M taxes, K bad`; exits 1 when
any value or launch list disagrees, or nothing was checked. Standard library only.
"""
import collections
import json
import math
import sys


def machine_weights(x, p):
    """machine -> k_x k_p / (k_x + k_p), over the machines where both `x` and `p` (machine ->
    list of per-launch values) have launches."""
    return {m: len(xs) * len(p[m]) / (len(xs) + len(p[m])) for m, xs in x.items() if xs and p.get(m)}


def within_machines(x, p):
    """The machine-weighted mean of mean(x[m]) - mean(p[m]), or None when no machine has both."""
    w = machine_weights(x, p)
    if not w:
        return None
    return sum(w[m] * (sum(x[m]) / len(x[m]) - sum(p[m]) / len(p[m])) for m in w) / sum(w.values())


def weighted(config, by_machine, f):
    """The weighted within-machine difference of `f` of the config's estimates minus plain's,
    or None when no machine has both."""
    x = {m: [f(e) for e in v.get(config, [])] for m, v in by_machine.items()}
    p = {m: [f(e) for e in v.get("plain", [])] for m, v in by_machine.items()}
    return within_machines(x, p)


def main(path, verdicts_path=None):
    s = json.load(open(path))
    rows = collections.defaultdict(list)
    for c in s["per_launch"]:
        k = c["key"]
        rows[(k["config"], k["phase"], k["cell"])].append(c)

    def value(c, field):
        if field == "step":
            q = ((c.get("step") or {}).get("step_duration_us") or {}).get("p50")
        else:
            q = (c.get(field) or {}).get("p90")
        return q["est"] if q else None

    def complete(who, phase, cell):
        """`who`'s complete launch-cells of (phase, cell)."""
        return [c for c in rows[(who, phase, cell)] if c.get("complete")]

    def by_machine(config, phase, cell, field):
        """machine -> config -> the complete launch-cells' estimates (plain and the config)."""
        out = collections.defaultdict(lambda: collections.defaultdict(list))
        for who in (config, "plain"):
            for c in complete(who, phase, cell):
                v = value(c, field)
                if v is not None:
                    out[c["machine"]][who].append(v)
        return out

    checked = bad = 0
    hand_of = {}
    for t in s["taxes"]:
        config, phase, cell = t["config"], t["phase"], t["cell"]
        where = f"{config} {t['context']} {phase}/{cell}"
        # The launches compared.
        xs, ps = complete(config, phase, cell), complete("plain", phase, cell)
        x_machines, p_machines = {c["machine"] for c in xs}, {c["machine"] for c in ps}
        mine = sorted(c["launch"] for c in xs if c["machine"] in p_machines)
        plain = sorted(c["launch"] for c in ps if c["machine"] in x_machines)
        if mine != sorted(t["paired_launches"]) or plain != sorted(t["plain_launches"]):
            print(
                f"{where}: launches by hand {mine} vs plain {plain}; "
                f"report {t['paired_launches']} vs {t['plain_launches']}"
            )
            bad += 1
        for metric, field, f, back in (
            ("ttft_p90", "ttft_ms", math.log, lambda d: math.exp(d) - 1),
            ("tpot_p90", "tpot_ms", math.log, lambda d: math.exp(d) - 1),
            ("step_p50_us", "step", lambda v: v, lambda d: d),
        ):
            reported = (t.get(metric) or {}).get("value")
            d = weighted(config, by_machine(config, phase, cell, field), f)
            if reported is None and d is None:
                continue
            checked += 1
            hand = None if d is None else back(d)
            hand_of[(config, t["context"], phase, cell, metric)] = hand
            est = None if reported is None else reported["est"]
            if hand is None or est is None or abs(hand - est) > 1e-9 + 1e-6 * abs(est):
                print(f"{where} {metric}: by hand {hand}, report {est}")
                bad += 1
    if verdicts_path:
        v = {h["id"]: h for h in json.load(open(verdicts_path))["hypotheses"]}
        a_cells = {}
        for (c, ctx, ph, cell, m), x in hand_of.items():
            if ctx == "ref_safe" and m == "ttft_p90":
                a_cells[c] = x

        def lo_of(config):
            """The report's lower CI bound of `config`'s TTFT p90 tax at ref_safe."""
            for t in s["taxes"]:
                if t["config"] == config and t["context"] == "ref_safe":
                    return ((t.get("ttft_p90") or {}).get("value") or {}).get("lo")
            return None

        def both(*xs):
            return None if any(x is None for x in xs) else xs

        mb, nixl, noop = (a_cells.get(c) for c in ("mooncake_both", "nixl_both", "noop_connector"))
        h4_cfgs = ("mooncake_both", "lmcache_only", "multi_mooncake_lmcache")
        if "multi_mooncake_lmcache" not in a_cells:
            h4_cfgs = ("mooncake_both_nhd", "lmcache_only", "multi_mooncake_lmcache_nhd")
        m4, l4, x4 = (a_cells.get(c) for c in h4_cfgs)
        undefined = {
            "h3": (lo_of("mooncake_both") or 0) <= 0,
            "h4": (lo_of(h4_cfgs[2]) or 0) <= 0,
        }

        def along(metric, vary_input):
            """H5/H6: mean over the fixed length of tax(longest) - tax(shortest)."""
            g = collections.defaultdict(dict)
            for (c, ctx, ph, cell, m), x in hand_of.items():
                if c == "mooncake_both" and ph == "B" and m == metric and x is not None:
                    i, o = (int(p[1:]) for p in cell.split("_")[1:3])
                    fixed, varying = (o, i) if vary_input else (i, o)
                    g[fixed][varying] = x
            rows = [r for r in g.values() if len(r) >= 2]
            if not rows:
                return None
            return sum(r[max(r)] - r[min(r)] for r in rows) / len(rows)

        for hid, hand in (
            ("h1", mb),
            ("h2", both(mb, nixl) and mb - nixl),
            ("h3", both(mb, noop) and noop / mb if mb else None),
            ("h4", both(m4, l4, x4) and abs(x4 - (m4 + l4)) / abs(x4) if x4 else None),
            ("h5", along("ttft_p90", True)),
            ("h6", along("tpot_p90", False)),
        ):
            est = (v.get(hid, {}).get("estimate") or {}).get("est")
            if est is None and undefined.get(hid):
                continue
            if hand is None and est is None:
                continue
            checked += 1
            if hand is None or est is None or abs(hand - est) > 1e-9 + 1e-6 * abs(est):
                print(f"{hid.upper()} estimate: by hand {hand}, report {est}")
                bad += 1
    print(f"checked {checked} values in {len(s['taxes'])} taxes, {bad} bad")
    return 0 if checked and not bad else 1


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
