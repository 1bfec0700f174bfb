"""Add the ratings-v3 sections of /work/INTERFACES.md to a real run's ratings.json, with plausible values.

The cards read those sections defensively; this builds a run that has all of them, so the tests
(and a person looking at the pages) see every optional part drawn. Values are derived from the
run's own numbers where one exists (tied_with from equal levels, recency from APE_true), else
set by hand so that at least one of each warning appears:

    python -m tests.card_fixtures RUN_DIR OUT_DIR     # copies the run, then rewrites OUT_DIR/ratings.json
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path
from typing import Any

BINS = ["1", "2-5", "6-20", "21-80"]
ROBUSTNESS = ["ape", "ape_industry", "ape_company", "failure_rate"]


def add_new_sections(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of doc with headlines, checks, per-row ties/absolute/insufficient, recency and heterogeneity."""
    doc = copy.deepcopy(doc)
    systems = [s["name"] for s in doc["systems"]]
    control = doc["perturbations"][0]["id"]
    first, last = systems[0], systems[-1]
    rows = doc["ratings"]
    for r in rows:
        peers = [o for o in rows if o["score"] == r["score"] and o["perturbation"] == r["perturbation"]]
        r["rule"] = "tiers"
        r["tied_with"] = sorted(o["system"] for o in peers if o["rating"] == r["rating"] and o is not r)
        r["absolute_rating"] = min(r["rating"] + 1, doc["levels"]) if r["score"] in ("ape", "mase") else None
        r["insufficient"] = False
        r["note"] = None
    planted = next(r for r in rows if r["system"] == last and r["score"] == "failure_rate")
    planted.update(insufficient=True, note="scored on 61 % of its windows (needs 80 %)", rating=doc["levels"])
    doc["headlines"] = {s: _headlines(doc, s, control) for s in systems}
    doc["overall"] = {s: h["robustness"]["rating"] for s, h in doc["headlines"].items()}
    confounded = [e for e in doc["effects"] if e["scheme"] != "uniform"]
    failing = next(e for e in confounded if e["system"] == first)  # one failed self-check, on the first system
    doc["checks"] = [
        {
            "system": e["system"],
            "perturbation": e["perturbation"],
            "scheme": e["scheme"],
            "ape_true": e["ape_true"],
            "ape_obs": e["ape_obs"],
            "ape_adj": e["ape_adj"],
            "interval": [e["ape_adj_lo"], e["ape_adj_hi"]],
            "noise": 0.004,
            "passed": e is not failing,
            "reason": "APE_adj further from APE_true than APE_obs, beyond the draws' noise"
            if e is failing
            else "APE_true inside the APE_adj interval",
        }
        for e in confounded
    ]
    doc["recency_profile"] = [
        {
            "system": e["system"],
            "perturbation": e["perturbation"],
            "bin": b,
            "ape": round((e["ape_true"] or 0.0) * scale, 6),
            "interval": [
                round((e["ape_true"] or 0.0) * scale - 0.01, 6),
                round((e["ape_true"] or 0.0) * scale + 0.01, 6),
            ],
            "n": 20 * (k + 1),
        }
        for e in _first_effects(doc)
        for k, (b, scale) in enumerate(zip(BINS, (3.0, 1.5, 1.0, 0.6), strict=True))
    ]
    doc["heterogeneity"] = {
        s: {
            p["id"]: {
                "drivers": [
                    {"covariate": "industry", "importance": 0.6},
                    {"covariate": "price level", "importance": 0.3},
                ],
                "rules": [
                    {
                        "text": "industry = Alpha and price level > 500",
                        "cate": 0.05 * (k + 1) * (j + 1),
                        "interval": [0.02 * (k + 1), 0.09 * (k + 1) * (j + 1)],
                        "share": 0.25,
                        "ratio": 2.4,
                    },
                    {
                        "text": "volatility in the top third",
                        "cate": 0.01 * (k + 1),
                        "interval": [0.0, 0.03 * (k + 1)],
                        "share": 0.33,
                        "ratio": 1.2,
                    },
                ],
                "spread": 0.04 * (k + 1),
                "explained": 0.55,
                "selfcheck": [
                    {
                        "scheme": "planted",
                        "learner": "causal_forest",
                        "pehe": 0.01,
                        "rank_corr": 0.8,
                        "pehe_naive": 0.03,
                    }
                ],
            }
            for j, p in enumerate(doc["perturbations"][1:])
        }
        for k, s in enumerate(systems)
    }
    return doc


def _first_effects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for e in doc["effects"]:
        if (e["system"], e["perturbation"]) not in seen:
            seen.add((e["system"], e["perturbation"]))
            out.append(e)
    return out


def _headlines(doc: dict[str, Any], system: str, control: str) -> dict[str, Any]:
    mine = [r for r in doc["ratings"] if r["system"] == system]
    out = {}
    families = {
        "robustness": [r for r in mine if r["score"] in ROBUSTNESS and r["perturbation"] != control],
        "bias": [r for r in mine if r["score"].startswith("wrs_")],
        "accuracy": [r for r in mine if r["score"] == "mase" and r["perturbation"] == control],
    }
    for kind, rows in families.items():
        worst = max(rows, key=lambda r: r["rating"])
        out[kind] = {
            "rating": worst["rating"],
            "absolute_rating": worst.get("absolute_rating"),
            "meaning": f"Planted {kind} headline for {system}: level {worst['rating']} from {worst['score']}.",
            "stability": worst.get("stability"),
            "tied_with": worst["tied_with"],
            "scores": sorted({r["score"] for r in rows}),
        }
    return out


def augment_run(run: Path, out: Path) -> Path:
    """Copy a run directory (without its cards) and rewrite its ratings.json with the new sections."""
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("cards"), dirs_exist_ok=True)
    doc = add_new_sections(json.loads((run / "ratings.json").read_text(encoding="utf-8")))
    (out / "ratings.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    print(augment_run(Path(sys.argv[1]), Path(sys.argv[2])))
