"""The causal stage's Estimate objects: one draw per (scheme, perturbation, draw), read by every consumer."""

import json
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from causalrate import pipeline
from causalrate.causal.effects import DrawSettings, draws_table, identify_schemes
from causalrate.causal.estimate import estimate_all
from causalrate.causal.resampling import folded, mean_interval
from causalrate.causal.schemes import SCHEMES, Scheme, checked_draw, drawer
from causalrate.cli import main
from causalrate.score.scores import SCORES, Evidence
from causalrate.uncertainty import rigor as rigor_module


class FixedShare(Scheme):
    """A plugin scheme with its own draw: exactly round(share × n) windows of each company are perturbed
    (share = high for the first half of the companies, low for the rest): no window is an independent coin."""

    confounders = ("company",)
    description = "a fixed share of each company's windows is perturbed"
    calls: ClassVar[list[np.ndarray]] = []  # every assignment the draw returned, in call order

    def probabilities(self, table, *, high, low):
        favoured = sorted(table["company"].unique())[: table["company"].nunique() // 2]
        return np.where(table["company"].isin(favoured), high, low)

    def draw(self, table, *, high, low, rng):
        share = self.probabilities(table, high=high, low=low)
        out = np.zeros(len(table), dtype=bool)
        for company in sorted(table["company"].unique()):
            members = np.flatnonzero(table["company"].to_numpy() == company)
            out[rng.permutation(members)[: round(share[members[0]] * members.size)]] = True
        FixedShare.calls.append(out)
        return out


@pytest.fixture
def fixed_share(monkeypatch):
    """FixedShare registered as `fixed_share` (its ape_/pie_ scores too) for this test only."""
    monkeypatch.setattr(SCHEMES, "_entries", dict(SCHEMES._entries))
    monkeypatch.setattr(SCORES, "_entries", dict(SCORES._entries))
    FixedShare.calls = []
    SCHEMES.register("fixed_share")(FixedShare)
    return FixedShare


def test_a_plugin_schemes_draws_feed_effects_rigor_and_refuters_alike(fixed_share, synthetic_study, monkeypatch):
    seen: dict[str, list] = {"estimates": [], "refuted": []}

    def spy_estimates(**kwargs):
        seen["estimates"] = estimate_all(**kwargs)
        return seen["estimates"]

    real_refute = rigor_module.refute

    def spy_refute(data, estimand, estimate, **kwargs):
        seen["refuted"].append((data, estimate))
        return real_refute(data, estimand, estimate, **kwargs)

    monkeypatch.setattr(pipeline, "estimate_all", spy_estimates)
    monkeypatch.setattr(rigor_module, "refute", spy_refute)
    config = synthetic_study(
        "- {name: mean, type: python, function: 'planted.py:zero_counter'}\n- {name: naive, type: naive}\n",
        draws=4,
        stride=10,
        extra="causal: {draws: 4, schemes: [fixed_share]}\n"
        "rigor: {bootstrap_size: 20, refute_simulations: 2}\nheterogeneity: {enabled: false}\n",
    )
    text = config.read_text().replace("causal: {draws: 4}\n", "")
    config.write_text(text)
    out = config.parent / "run"
    assert main(["assess", str(config), "--out", str(out), "--workers", "1", "--no-cards"]) == 0

    estimates = [e for e in seen["estimates"] if e.scheme == "fixed_share"]
    # drawn once per (perturbation, draw) and shared by both systems, never redrawn by rigor or refuters (the
    # first 3 * 2: the preflight's two draws per perturbation on synthetic forecasts, before forecasting)
    assert len(fixed_share.calls) == 3 * 2 + 3 * 4
    assert len(estimates) == 2 * 3 * 4
    assert all(any(e.assignment is a for a in fixed_share.calls) for e in estimates)
    doc = json.loads((out / "ratings.json").read_text())
    rows = {(r["system"], r["score"], r["perturbation"]): r for r in doc["ratings"]}
    for system in ("mean", "naive"):
        mine = sorted((e for e in estimates if e.system == system and e.perturbation == "P1"), key=lambda e: e.draw)
        effect = next(
            r for r in doc["effects"] if (r["system"], r["perturbation"], r["scheme"]) == (system, "P1", "fixed_share")
        )
        assert effect["ape_adj"] == pytest.approx(np.mean([e.ape_adj for e in mine]))  # the effect summary's draws
        lo, hi = folded(*mean_interval(np.array([e.ape_adj for e in mine])))  # |mean over draws|' t interval
        assert rows[(system, "ape_fixed_share", "P1")]["interval"] == pytest.approx([lo, hi])
    # the refuters were handed the first Estimate of each cell and its own sample
    assert {(e.system, e.perturbation) for _, e in seen["refuted"]} == {
        (s, p) for s in ("mean", "naive") for p in ("P1", "P2", "P3")
    }
    for data, estimate in seen["refuted"]:
        assert estimate in estimates and estimate.draw == 0
        assert (data["P"].to_numpy() == estimate.treated).all() and (data["R"].to_numpy() == estimate.outcome).all()
    assert {r["scheme"] for r in doc["refutations"]} == {"fixed_share"}


def test_same_seed_same_draws_and_the_sample_is_the_observed_outcome():
    rng = np.random.default_rng(4)
    n = 400
    windows = pd.DataFrame({"industry": rng.choice(["A", "B"], n), "company": rng.choice(["a", "b", "c", "d"], n)})
    clean = rng.normal(0, 1, n)
    clean[:5] = np.nan  # failed clean forecasts: those windows are in no sample
    outcomes = {"s": pd.DataFrame({"P0": clean, "P1": clean + 2.0}), "t": pd.DataFrame({"P0": clean, "P1": clean})}
    settings = DrawSettings(schemes=("industry",), draws=3, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=9)
    ident = identify_schemes(settings, ["company", "industry"])
    first, again = (
        estimate_all(windows=windows, outcomes=outcomes, control="P0", settings=settings, identification=ident)
        for _ in range(2)
    )
    pd.testing.assert_frame_equal(draws_table(first), draws_table(again))
    s0, t0 = first[0], first[3]
    assert (s0.system, t0.system, s0.draw, t0.draw) == ("s", "t", 0, 0)
    assert s0.assignment is t0.assignment  # one draw shared by both systems
    assert s0.treated.size == n - 5 and s0.ape_true == pytest.approx(2.0)
    y = s0.outcome  # R = perturbed outcome where treated, clean elsewhere: by hand
    assert np.allclose(y[s0.treated], clean[5:][s0.treated] + 2.0) and np.allclose(
        y[~s0.treated], clean[5:][~s0.treated]
    )
    assert s0.ape_obs == pytest.approx(y[s0.treated].mean() - y[~s0.treated].mean())


def test_the_drawer_gives_checked_draws_its_probabilities_computed_once():
    """estimate_all draws through schemes.drawer: a default-draw scheme's probabilities once for all its draws, the
    same assignments as checked_draw stream for stream; a scheme with its own draw is called for every one."""
    rng = np.random.default_rng(2)
    table = pd.DataFrame({"industry": rng.choice(["A", "B", "C"], 300), "company": rng.choice(["a", "b"], 300)})
    industry = SCHEMES.get("industry")()
    computed = []
    original = type(industry).probabilities

    class Counted(type(industry)):  # the built-in scheme, counting its probabilities() calls
        def probabilities(self, table, *, high, low):
            computed.append(1)
            return original(self, table, high=high, low=low)

    draw = drawer(Counted(), table, high=0.8, low=0.2)
    assert computed == []  # nothing computed before the first draw
    for seed in range(5):
        expected = checked_draw(industry, table, high=0.8, low=0.2, rng=np.random.default_rng(seed))
        assert np.array_equal(draw(np.random.default_rng(seed)), expected)
    assert len(computed) == 1
    FixedShare.calls = []
    own = drawer(FixedShare(), table, high=0.8, low=0.2)
    drawn = [own(np.random.default_rng(seed)) for seed in range(3)]
    assert len(FixedShare.calls) == 3 and all(a is b for a, b in zip(drawn, FixedShare.calls, strict=True))


def test_recency_and_ape_worst_bootstrap_their_own_paired_differences():
    """Planted: 6 windows in 2 series; P1 moves the error by +1 where the change is recent (distance ≤ 2), by
    +10 elsewhere; P9 is a worst placement adding 3. Unit counts give back the raw score exactly."""
    from causalrate.causal.resampling import Resamples, block_counts, replicate_means
    from causalrate.score.recency import ApeWorst, Recency
    from causalrate.score.scores import Resampler

    offsets = {0: "[79]", 1: "[78]", 2: "[10]", 3: "[79]", 4: "[70]", 5: "[0]"}  # n = 80: distances 1, 2, 70, 1, 10, 80
    rows = []
    for w in range(6):
        rows.append(
            {"system": "s", "window": w, "series": w // 3, "perturbation": "P0", "outcome": 1.0, "offsets": None}
        )
        rows.append({"system": "s", "window": w, "series": w // 3, "perturbation": "P1", "offsets": offsets[w],
                     "outcome": 1.0 + (1.0 if w in (0, 1, 3) else 10.0)})  # fmt: skip
        rows.append(
            {"system": "s", "window": w, "series": w // 3, "perturbation": "P9", "outcome": 4.0, "offsets": "[5]"}
        )
    evidence = Evidence(
        forecasts=pd.DataFrame(rows), wrs=pd.DataFrame(), effects=pd.DataFrame(), control="P0", severity={},
        table=pd.DataFrame({"series": [0, 0, 0, 1, 1, 1]}), input_length=80, recency_k=2,
        recency_perturbations=("P1",), worst_perturbations=("P9",),
    )  # fmt: skip
    recent = Recency().window_values(evidence)[("s", "P1")]
    assert np.array_equal(np.isnan(recent), [False, False, True, False, True, True]) and np.nanmean(recent) == 1.0
    assert Recency().compute(evidence)["raw"].tolist() == [1.0]
    worst = ApeWorst().window_values(evidence)[("s", "P9")]
    assert np.allclose(worst, 3.0)
    assert replicate_means(np.ones((1, 6)), recent)[0] == 1.0  # unit counts: the raw score itself
    series = np.array([0, 0, 0, 1, 1, 1])
    counts = block_counts(series, block=1, bootstrap_size=50, rng=np.random.default_rng(0))
    resampler = Resampler(Resamples(counts), series_index=series)
    row = Recency().replicates(evidence, resampler)[("s", "P1")]  # Score's default: |mean| of window_values
    assert np.nanmin(row.values) == np.nanmax(row.values) == 1.0  # every recent window moved by exactly 1: no spread
    assert row.interval == pytest.approx((1.0, 1.0))
    assert ApeWorst().replicates(evidence, resampler)[("s", "P9")].interval == pytest.approx((3.0, 3.0))
