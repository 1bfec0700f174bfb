"""The bias scores (METHOD §4): WRS (wrs_<attr>) and the largest group gap (bias_<attr>) per attribute of the
data, the generated scores of attributes no built-in names, and the bias question's words."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from causalrate.causal.resampling import bias_corrected_interval, group_sums, replicate_wrs
from causalrate.causal.wrs import Grouping, grouped_wrs, unit_scaled, wrs_plans
from causalrate.score.bias import bias_gap, observed_bias
from causalrate.score.contract import SCORES, Margin, Score
from causalrate.score.evidence import Evidence, Resampler, RowReplicates, Unavailable, dimensions_of, wide_column


class WrsScore(Score):
    headline = "bias"
    rows = "perturbed"
    coverage = "perturbed"
    resampling = "windows"
    margin = Margin("wrs_max", 0.1)  # 0.1 of its maximum (2.3 per pair)
    radar = True  # every attribute's WRS, whatever its name (METHOD §4): wrs_month on hourly demand as wrs_industry
    attribute: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        rows = evidence.wrs[evidence.wrs["attribute"] == self.attribute]
        if rows.empty:
            return Unavailable(f"the run has no {self.attribute!r} grouping (data attribute or causal.wrs_groups)")
        frame = rows[["system", "perturbation"]].assign(raw=rows["wrs"].to_numpy())
        return frame.assign(note=rows["note"].to_numpy()) if "note" in rows else frame

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """The WRS under every resample's group counts, on the observed test's design effects and df; the
        bias-corrected percentile interval."""
        out = {}
        for key, values, plan in perturbed_groups(evidence, resampler, self.attribute):
            deff = plan.design_effects(values, resampler.series_index, bandwidth=resampler.bandwidth)
            sizes = plan.df_sizes(values, resampler.series_index, bandwidth=resampler.bandwidth)
            sums = group_sums(resampler.grouped[self.attribute], values)
            reps = replicate_wrs(sums, design_effects=deff, df_sizes=sizes)
            observed = grouped_wrs(plan.samples(values), design_effects=deff, df_sizes=sizes)[0]
            out[key] = RowReplicates(reps, bias_corrected_interval(observed, reps))
        return out


def perturbed_groups(
    evidence: Evidence, resampler: Resampler, attribute: str
) -> list[tuple[tuple[str, str], np.ndarray, Grouping]]:
    """Per (system, perturbed input), when the run groups on `attribute`: the outcomes (unit-scaled: WRS and
    bias do not change with the scale) and the grouping."""
    plan = resampler.groupings.get(attribute)
    if plan is None:
        return []
    return [
        ((system, p), unit_scaled(wide[p].to_numpy()), plan)
        for system, wide in wide_column(evidence, "outcome").items()
        for p in wide.columns
        if p != evidence.control
    ]


@SCORES.register("wrs_industry")
class WrsIndustry(WrsScore):
    attribute = "industry"
    estimator = "WRS over industry groups (Welch t, weighted pair count)"
    label = "WRS by industry"
    description = (
        "how much its errors differ between industries (0 = not at all; each pair of industries adds up to 2.3, "
        "more the surer their errors differ)"
    )


@SCORES.register("wrs_domain")
class WrsDomain(WrsScore):
    attribute = "domain"
    estimator = "WRS over domain groups (Welch t, weighted pair count)"
    label = "WRS by domain"
    description = (
        "how much its errors differ between data domains (0 = not at all; each pair of domains adds up to 2.3, more "
        "the surer their errors differ)"
    )


@SCORES.register("wrs_company")
class WrsCompany(WrsScore):
    attribute = "company"
    estimator = "WRS over company groups (Welch t, weighted pair count)"
    label = "WRS by company"
    description = "how much its errors differ between companies of the same industry (0 = not at all)"


@SCORES.register("wrs_volatility")
class WrsVolatility(WrsScore):
    attribute = "volatility"
    estimator = "WRS over volatility groups (Welch t, weighted pair count)"
    label = "WRS by volatility"
    description = "how much its errors differ between calm, middling and volatile windows (terciles; 0 = not at all)"


def bias_groups(evidence: Evidence, attribute: str) -> Grouping | None:
    """The groups a bias score compares: its attribute's WRS grouping (a nested attribute within its parent)."""
    if evidence.table is None:
        return None
    return next((g for g in wrs_plans(evidence.table, [], dimensions_of(evidence)) if g.attribute == attribute), None)


class BiasScore(Score):
    """bias_<attr> (METHOD §4): the largest relative gap between one group's mean outcome and the rest."""

    headline = "bias"
    rows = "perturbed"
    coverage = "perturbed"
    resampling = "windows"
    margin = Margin("none", 0.05)  # a gap of 5 % of the mean (the score is already a share of the mean)
    attribute: ClassVar[str]

    def compute(self, evidence: Evidence) -> pd.DataFrame | Unavailable:
        grouping = bias_groups(evidence, self.attribute)
        if grouping is None:
            return Unavailable(f"the data has no {self.attribute!r} attribute")
        rows = [
            {"system": s, "perturbation": p, "raw": observed_bias(table[p].to_numpy(), grouping)}
            for s, table in wide_column(evidence, "outcome").items()
            for p in table.columns
        ]
        return pd.DataFrame(rows, columns=["system", "perturbation", "raw"]).sort_values(["system", "perturbation"])

    def replicates(self, evidence: Evidence, resampler: Resampler) -> dict[tuple[str, str], RowReplicates]:
        """The gap under every resample's group counts; the bias-corrected percentile interval."""
        out = {}
        for key, values, plan in perturbed_groups(evidence, resampler, self.attribute):
            gaps = bias_gap(group_sums(resampler.grouped[self.attribute], values))
            out[key] = RowReplicates(gaps, bias_corrected_interval(observed_bias(values, plan), gaps))
        return out


@SCORES.register("bias_industry")
class BiasIndustry(BiasScore):
    attribute = "industry"
    estimator = "largest gap between one industry's mean outcome and the rest's, divided by the mean outcome"
    label = "Bias by industry"
    description = "largest gap between one industry's mean error and the other industries', relative to the mean"


@SCORES.register("bias_domain")
class BiasDomain(BiasScore):
    attribute = "domain"
    estimator = "largest gap between one domain's mean outcome and the rest's, divided by the mean outcome"
    label = "Bias by domain"
    description = "largest gap between one domain's mean error and the other domains', relative to the mean"


@SCORES.register("bias_company")
class BiasCompany(BiasScore):
    attribute = "company"
    estimator = "largest gap between one company's mean outcome and its industry's others', divided by the mean outcome"
    label = "Bias by company"
    description = "largest gap between one company's mean error and its industry peers', relative to the mean"


def register_dimension(attribute: str) -> None:
    """wrs_<attr> and bias_<attr> for a data attribute that no registered score covers (METHOD §4: every
    categorical attribute is a bias dimension, whatever its name). Registered once per process; a run rates
    those of its own data's dimensions only (score_all skips another data's, by `generated_for`)."""
    entries = (
        ("wrs", WrsScore, f"WRS by {attribute}", f"WRS over {attribute} groups (Welch t, weighted pair count)",
         f"how much its errors differ between values of {attribute} (0 = not at all; each pair of values adds up to "
         "2.3, more the surer their errors differ)"),
        ("bias", BiasScore, f"Bias by {attribute}", f"largest gap between one {attribute}'s mean outcome and the "
         "rest's, divided by the mean outcome",
         f"largest gap between one {attribute}'s mean error and the others', relative to the mean"),
    )  # fmt: skip
    for prefix, base, label, estimator, description in entries:
        name = f"{prefix}_{attribute}"
        if name in SCORES:
            continue
        body = {"attribute": attribute, "label": label, "estimator": estimator, "description": description}
        SCORES.register(name)(type(f"{prefix.title()}_{attribute}", (base,), {**body, "generated_for": attribute}))


def bias_attributes(scores: Iterable[str]) -> list[str]:
    """The attributes the bias scores among `scores` compare (wrs_/bias_<attr>), in the registry's order
    (flat before nested for the built-ins: industry, company); for the bias question in words."""
    given = set(scores)
    found = [cls.attribute for name, cls in SCORES.items() if name in given and issubclass(cls, WrsScore | BiasScore)]
    return list(dict.fromkeys(found))


def differ_by(attributes: Sequence[str]) -> str:
    """ "by industry or company" ("by a, b or c"); "" for none."""
    if not attributes:
        return ""
    head = ", ".join(attributes[:-1])
    return f"by {head} or {attributes[-1]}" if head else f"by {attributes[0]}"


def rated_dimension(score: str) -> str | None:
    """The attribute a generated bias or scheme score name would be for (wrs_region → region), else None."""
    for prefix in ("wrs_", "bias_", "ape_", "pie_"):
        if score.startswith(prefix) and len(score) > len(prefix):
            return score[len(prefix) :]
    return None
