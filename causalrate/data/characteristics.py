"""Per-window characteristics of the clean input, usable as confounders, covariates and WRS groups.

Definitions follow TFB (Qiu et al., "TFB: Towards Comprehensive and Fair Benchmarking of
Time Series Forecasting Methods", PVLDB 2024, §3.2) where it defines them:
- trend strength       = max(0, 1 − Var(R) / Var(X − S))   (STL decomposition X = T + S + R)
- seasonality strength = max(0, 1 − Var(R) / Var(X − T))
- stationarity: the ADF test's p-value (statsmodels `adfuller`; low = stationary)
- transition / shifting: catch22 features (pycatch22, optional extra `characteristics`):
  SB_TransitionMatrix_quantile_3_ac_sumdiagcov (TFB's transition) and DN_OutlierInclude_p_001_mdrmd
  (the timing of extreme values; TFB's shifting is built on the same idea)
plus `level` (mean price, METHOD §5.1) and `volatility` (standard deviation of simple returns).
Add your own with ``@characteristic("name")`` on a function of one window.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

from causalrate.contracts import ContractError, describe
from causalrate.errors import UserError
from causalrate.registry import Registry

Characteristic = Callable[[np.ndarray, int], float]  # (clean input window, STL period) -> value
CHARACTERISTICS: Registry[Characteristic] = Registry("window characteristic")


def _fits(name: str, fn: Characteristic) -> None:
    """A function of (clean input window, STL period), as the window table calls it."""
    try:
        inspect.signature(fn).bind(np.zeros(2), 1)
    except (TypeError, ValueError):
        raise ContractError(
            f"window characteristic {name!r} ({describe(fn)}): expected a function of (window, period)"
        ) from None


CHARACTERISTICS.contract({}, _fits)


def characteristic(name: str) -> Callable[[Characteristic], Characteristic]:
    return CHARACTERISTICS.register(name)


@characteristic("level")
def level(x: np.ndarray, period: int) -> float:
    return float(np.mean(x))


@characteristic("volatility")
def volatility(x: np.ndarray, period: int) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        returns = np.diff(x) / x[:-1]
    return float(np.nanstd(returns[np.isfinite(returns)], ddof=1))


def _stl(x: np.ndarray, period: int):
    from statsmodels.tsa.seasonal import STL

    return STL(x, period=period, robust=False).fit()


@characteristic("trend_strength")
def trend_strength(x: np.ndarray, period: int) -> float:
    fit = _stl(x, period)
    return _strength(fit.resid, x - fit.seasonal)


@characteristic("seasonality_strength")
def seasonality_strength(x: np.ndarray, period: int) -> float:
    fit = _stl(x, period)
    return _strength(fit.resid, x - fit.trend)


def _strength(resid: np.ndarray, deseasoned_or_detrended: np.ndarray) -> float:
    total = np.var(deseasoned_or_detrended)
    return float(max(0.0, 1.0 - np.var(resid) / total)) if total > 0 else 0.0


@characteristic("adf_pvalue")
def adf_pvalue(x: np.ndarray, period: int) -> float:
    from statsmodels.tsa.stattools import adfuller

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(adfuller(x, autolag="AIC")[1])


def adf_pvalues(inputs: np.ndarray) -> np.ndarray:
    """adf_pvalue of every row [w, n], the same numbers at a fraction of the cost.

    adfuller's lag search fits one OLS per candidate lag; those models are nested, so one batched QR of the
    largest design gives every candidate's residual sum of squares, hence its AIC. adfuller then runs once per
    row at the chosen lag. Rows where the choice is not clear-cut (an AIC gap under 1e-6, a rank-deficient
    design, missing values) take the plain adfuller search.
    """
    from statsmodels.tsa.stattools import adfuller, lagmat

    w, n = inputs.shape
    maxlag = min(n // 2 - 2, int(np.ceil(12.0 * np.power(n / 100.0, 1 / 4.0))))  # adfuller's default, constant
    diff = np.diff(inputs, axis=1)
    rows = n - 1 - maxlag
    lags = np.stack([lagmat(d[:, None], maxlag, trim="both", original="in") for d in diff])  # [w, rows, 1 + maxlag]
    lags[:, :, 0] = inputs[:, -rows - 1 : -1]  # the level, as adfuller replaces the zero-lag difference
    design = np.concatenate([np.ones((w, rows, 1)), lags], axis=2)  # constant first (add_trend prepend)
    q, r = np.linalg.qr(design, mode="complete")
    z = np.einsum("wji,wj->wi", q, diff[:, -rows:])
    tail = np.cumsum((z**2)[:, ::-1], axis=1)[:, ::-1]  # tail[:, k]: RSS of the first k columns
    k = np.arange(2, maxlag + 3)  # constant, level and 0 … maxlag lagged differences
    with np.errstate(divide="ignore", invalid="ignore"):
        aic = rows * np.log(tail[:, k] / rows) + 2 * k
    ranked = np.sort(aic, axis=1)
    diag = np.abs(np.diagonal(r, axis1=1, axis2=2))
    clear = (ranked[:, 1] - ranked[:, 0] > 1e-6) & (diag.min(axis=1) > 1e-10 * diag.max(axis=1))
    clear &= np.isfinite(aic).all(axis=1)
    best = np.argmin(np.nan_to_num(aic, nan=np.inf), axis=1)
    out = np.empty(w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, row in enumerate(inputs):
            out[i] = float(adfuller(row, maxlag=int(best[i]), autolag=None)[1]) if clear[i] else adf_pvalue(row, 0)
    return out


BATCHED = {adf_pvalue: adf_pvalues}  # whole-matrix versions of the characteristics above


def _catch22(feature: str) -> Characteristic:
    def compute(x: np.ndarray, period: int) -> float:
        try:
            import pycatch22
        except ImportError:
            raise UserError(
                f"the characteristic built on catch22's {feature} needs pycatch22: "
                "pip install 'causalrate[characteristics]'"
            ) from None
        return float(getattr(pycatch22, feature)(x.tolist()))

    return compute


characteristic("transition")(_catch22("SB_TransitionMatrix_quantile_3_ac_sumdiagcov"))
characteristic("shifting")(_catch22("DN_OutlierInclude_p_001_mdrmd"))


def compute_characteristics(inputs: np.ndarray, names: list[str], *, period: int) -> dict[str, np.ndarray]:
    """Each named characteristic for every clean input window [w, n]."""
    out = {}
    for name in names:
        compute = CHARACTERISTICS.get(name)
        batched = BATCHED.get(compute)
        out[name] = batched(inputs) if batched else np.array([compute(row, period) for row in inputs])
    return out


def terciles(values: np.ndarray) -> np.ndarray:
    """'low' / 'mid' / 'high' by the 1/3 and 2/3 quantiles: a characteristic as a grouping attribute."""
    lo, hi = np.quantile(values, [1 / 3, 2 / 3])
    return np.where(values <= lo, "low", np.where(values <= hi, "mid", "high"))


def attribute_columns(table: pd.DataFrame) -> list[str]:
    """The window table's data attributes (the confounders Z, in the data's order): every column that is not
    the window's own bookkeeping (series, start), a registered characteristic or a characteristic's tercile."""
    internal = {"series", "start", *CHARACTERISTICS.names()}
    return [c for c in table.columns if c not in internal and not str(c).endswith("_tercile")]
