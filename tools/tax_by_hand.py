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
estimates of H1-H3 from the by-hand taxes at ref_safe (seed §H1-H3): H1 the TTFT p90 tax of
mooncake_both, H2 its TTFT p90 tax minus nixl_both's, H3 noop_connector's over mooncake_both's
(which the report leaves undefined unless mooncake_both's tax CI lies above 0: then none is
expected).

Prints every disagreement (relative 1e-6) and `checked N values in M taxes, K bad`; exits 1 when
any value or launch list disagrees, or nothing was checked. Standard library only.
"""
import collections
import json
import math
import sys


def weighted(config, by_machine, f):
    """The weighted within-machine difference of `f` of the config's estimates minus plain's,
    or None when no machine has both."""
    num = den = 0.0
    for v in by_machine.values():
        x, p = v.get(config, []), v.get("plain", [])
        if x and p:
            w = len(x) * len(p) / (len(x) + len(p))
            num += w * (sum(map(f, x)) / len(x) - sum(map(f, p)) / len(p))
            den += w
    return num / den if den else None


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

    def by_machine(config, phase, cell, field):
        """machine -> config -> the complete launch-cells' estimates (plain and the config)."""
        out = collections.defaultdict(lambda: collections.defaultdict(list))
        for who in (config, "plain"):
            for c in rows[(who, phase, cell)]:
                v = value(c, field)
                if c.get("complete") and v is not None:
                    out[c["machine"]][who].append(v)
        return out

    checked = bad = 0
    hand_ttft = {}
    for t in s["taxes"]:
        config, phase, cell = t["config"], t["phase"], t["cell"]
        where = f"{config} {t['context']} {phase}/{cell}"
        # The launches compared.
        complete = lambda who: [c for c in rows[(who, phase, cell)] if c.get("complete")]
        x_machines = {c["machine"] for c in complete(config)}
        p_machines = {c["machine"] for c in complete("plain")}
        mine = sorted(c["launch"] for c in complete(config) if c["machine"] in p_machines)
        plain = sorted(c["launch"] for c in complete("plain") if c["machine"] in x_machines)
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
            if metric == "ttft_p90":
                hand_ttft[(config, t["context"])] = hand
            est = None if reported is None else reported["est"]
            if hand is None or est is None or abs(hand - est) > 1e-9 + 1e-6 * abs(est):
                print(f"{where} {metric}: by hand {hand}, report {est}")
                bad += 1
    if verdicts_path:
        v = {h["id"]: h for h in json.load(open(verdicts_path))["hypotheses"]}
        tax = lambda c: hand_ttft.get((c, "ref_safe"))
        mb, nixl, noop = tax("mooncake_both"), tax("nixl_both"), tax("noop_connector")
        ci = next(
            (
                (t.get("ttft_p90") or {}).get("value")
                for t in s["taxes"]
                if t["config"] == "mooncake_both" and t["context"] == "ref_safe"
            ),
            None,
        )
        mb_not_above_0 = ci is not None and ci["lo"] <= 0
        for hid, hand in (
            ("h1", mb),
            ("h2", None if mb is None or nixl is None else mb - nixl),
            ("h3", None if mb is None or noop is None or mb == 0 else noop / mb),
        ):
            est = (v.get(hid, {}).get("estimate") or {}).get("est")
            if hid == "h3" and est is None and mb_not_above_0:
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
