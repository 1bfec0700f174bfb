"""The causal stage's in-memory caches live in one RunCache per assess/rate (memo.run), keyed on content."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.causal.effects import DrawSettings, identify_schemes
from causalrate.causal.estimate import estimate_all
from causalrate.causal.refute import backdoor_estimand, refute
from causalrate.memo import OFF, Memo, RunCache

PACKAGE = Path(__file__).resolve().parents[1] / "causalrate"
MUTABLE = re.compile(r"^_?[A-Za-z_]\w* *(?::[^=]*)?= *(\{|\[|set\(|dict\(|defaultdict\(|OrderedDict\()", re.M)


def test_the_causal_stage_keeps_no_module_level_mutable_state():
    """No dict, list or set at module level in causal/ (constant tuples and frozen data are fine), and the
    memo module's only module-level Memo (the default argument OFF) keeps nothing."""
    found = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path in sorted((PACKAGE / "causal").rglob("*.py"))
        for match in MUTABLE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == []
    calls = []
    assert OFF.run.get("k", (1,), lambda: calls.append(1) or len(calls)) == 1
    assert OFF.run.get("k", (1,), lambda: calls.append(1) or len(calls)) == 2  # computed again: nothing kept
    assert len(OFF.run) == 0


def test_run_cache_keys_on_content_and_is_bounded():
    cache, calls = RunCache(), []

    def compute(value):
        calls.append(value)
        return value

    column = pd.Series(["a", "b", "a"], dtype="category")
    assert cache.get("plan", (np.array([True, False]), column), lambda: compute(1)) == 1
    assert cache.get("plan", (np.array([True, False]), column.copy()), lambda: compute(2)) == 1  # same content
    renamed = column.cat.rename_categories(["x", "b"])
    assert cache.get("plan", (np.array([True, False]), renamed), lambda: compute(3)) == 3
    assert cache.get("other", (np.array([True, False]), column), lambda: compute(4)) == 4  # kinds stay apart
    assert calls == [1, 3, 4]
    with pytest.raises(TypeError, match="cannot fingerprint"):  # a key it cannot hash completely is refused
        cache.get("plan", (object(),), lambda: 0)
    for i in range(10):
        cache.get("bounded", (i,), lambda i=i: i, limit=4)
    assert len(cache._entries["bounded"]) <= 4
    assert Memo.off().run is not Memo.off().run  # one per analysis, never shared


def test_refuters_share_matching_plans_across_systems_in_one_run_cache():
    """Two systems on one sample: the refuters' permutations, added causes and subsets repeat (one seed), so the
    second system's refutation matches nothing anew; a fresh cache gives the same numbers."""
    rng = np.random.default_rng(0)
    n = 600
    industry = rng.choice(["A", "B", "C"], n)
    windows = pd.DataFrame({"industry": industry, "company": [f"{i}{k % 2}" for k, i in enumerate(industry)]})
    clean = np.where(industry == "A", 10.0, 1.0) + rng.normal(0, 0.3, n)
    outcomes = {
        "s": pd.DataFrame({"P0": clean, "P1": clean + 0.5}),
        "t": pd.DataFrame({"P0": clean, "P1": clean + 1.0}),
    }
    settings = DrawSettings(schemes=("industry",), draws=1, high=0.8, low=0.2, caliper=0.2, covariates=(), seed=1)
    ident = identify_schemes(settings, ["company", "industry"])
    s, t = estimate_all(windows=windows, outcomes=outcomes, control="P0", settings=settings, identification=ident)
    cache = RunCache()
    results = []
    for estimate in (s, t):
        data = estimate.sample(windows, ["company", "industry"])
        estimand = backdoor_estimand(data, ("company", "industry"), cache)
        results.append(refute(data, estimand, estimate, interval=(0.0, 2.0), seed=1, simulations=3, cache=cache))
        if estimate is s:
            after_first = len(cache)
    assert len(cache) == after_first > 1  # the second system added no plan and no estimand
    data = t.sample(windows, ["company", "industry"])
    alone = refute(
        data, backdoor_estimand(data, ("company", "industry")), t, interval=(0.0, 2.0), seed=1, simulations=3
    )
    assert alone == results[1]
    assert results[0][0] == pytest.approx(0.5, abs=0.1) and results[1][0] == pytest.approx(1.0, abs=0.1)
