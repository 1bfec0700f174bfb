"""Planted systems for the python adapter: fn(inputs[batch, n], horizon) -> [batch, horizon]."""

import os
import time

import numpy as np


def window_median(inputs, horizon):
    """Robust: a single bad point barely moves the median."""
    return np.repeat(np.nanmedian(inputs, axis=1)[:, None], horizon, axis=1)


def window_min(inputs, horizon):
    """Fragile: a point dropped to zero becomes the forecast."""
    return np.repeat(np.nanmin(inputs, axis=1)[:, None], horizon, axis=1)


def last_value(inputs, horizon):
    return np.repeat(inputs[:, -1:], horizon, axis=1)


def biased_high_prices(inputs, horizon):
    """Naive, but 20 % too high whenever the series trades above 500 (the Alpha industry)."""
    base = last_value(inputs, horizon)
    return np.where(base > 500, base * 1.2, base)


def no_nan_please(inputs, horizon):
    if np.isnan(inputs).any():
        raise AssertionError("received NaN although accepts_nan is false")
    return last_value(inputs, horizon)


def flaky(inputs, horizon):
    """Fails in different ways depending on the input's first digit."""
    out = last_value(inputs, horizon)
    first = inputs[:, 0]
    if (np.floor(first) % 7 == 0).any():
        raise RuntimeError("flaky model crashed")
    out[np.floor(first) % 5 == 0] = np.nan
    return out


def wrong_shape(inputs, horizon):
    return np.zeros((inputs.shape[0], horizon + 1))


def interrupts(inputs, horizon):
    raise KeyboardInterrupt("the model's own")


def complex_out(inputs, horizon):
    return last_value(inputs, horizon) + 1j


def text_out(inputs, horizon):
    return last_value(inputs, horizon).astype(str)


def sleepy(inputs, horizon):
    time.sleep(30)
    return last_value(inputs, horizon)


def zero_counter(inputs, horizon):
    """Fragile in proportion: naive, pushed 5 % higher for every zero it sees in its input."""
    last = np.nanmax(inputs[:, -3:], axis=1)
    zeros = (inputs == 0).sum(axis=1)
    return np.repeat((last * (1 + 0.05 * zeros))[:, None], horizon, axis=1)


def slow_last(inputs, horizon):
    """Naive, 0.15 s a batch where $PLANTED_SLOW is set: the run a test interrupts, to give it time (the run that
    resumes it goes at naive's speed)."""
    if os.environ.get("PLANTED_SLOW"):
        time.sleep(0.15)
    return last_value(inputs, horizon)


def steady(inputs, horizon):
    """0.3 s per forecast: a batch's time grows with its rows."""
    time.sleep(0.3 * inputs.shape[0])
    return last_value(inputs, horizon)


def chatty(inputs, horizon):
    """Says what a model's libraries say: two Python warnings per forecast and a banner on stderr per batch."""
    import sys
    import warnings

    for _ in range(2 * inputs.shape[0]):
        warnings.warn("the model is unsure", UserWarning, stacklevel=1)
    print("GPU available: False", file=sys.stderr)
    return last_value(inputs, horizon)


def stubborn(inputs, horizon):
    """Hangs where the in-worker alarm cannot reach it (as C code would): only killing the worker helps."""
    import signal

    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    time.sleep(120)
    return last_value(inputs, horizon)


def worker_pid(inputs, horizon):
    """Forecasts the id of the process that made it: tells which worker ran a batch."""
    import os

    return np.full((inputs.shape[0], horizon), float(os.getpid()))


def sample_paths(inputs, horizon):
    """Eight sample paths per row around the last value: [batch, samples, horizon]."""
    last = np.nan_to_num(inputs[:, -1:], nan=np.nanmean(inputs))
    spread = np.linspace(-0.02, 0.02, 8)[None, :, None] * last[:, :, None]
    return np.repeat(last[:, :, None], horizon, axis=2) + spread


def always_fails(inputs, horizon):
    raise RuntimeError("this model always fails")


def _zero_penalised(inputs, horizon, k):
    """Forecasts 0 (always below the prices), lowered by 100·k per zero seen in the input: the error of a
    window grows by exactly 100·k per zero, whatever else the perturbation changed, so APE ∝ k."""
    zeros = (inputs == 0).sum(axis=1)
    return np.repeat((-100.0 * k * zeros)[:, None], horizon, axis=1)


def effect_none(inputs, horizon):
    return _zero_penalised(inputs, horizon, 0.0)


def effect_tiny(inputs, horizon):
    return _zero_penalised(inputs, horizon, 1e-5)


def effect_mid(inputs, horizon):
    return _zero_penalised(inputs, horizon, 3e-4)


def effect_huge(inputs, horizon):
    return _zero_penalised(inputs, horizon, 1e-2)


def ignores_input(inputs, horizon):
    """Predicts 100 whatever it sees: no perturbation can change its forecast."""
    return np.full((inputs.shape[0], horizon), 100.0)


FRAGILE_ABOVE = 650.0  # the planted threshold of fragile_when_high


def fragile_when_high(inputs, horizon):
    """Robust median, but 50 % too high when it sees a zero in a window that trades above FRAGILE_ABOVE."""
    median = np.nanmedian(inputs, axis=1)
    hit = (inputs == 0).any(axis=1) & (median > FRAGILE_ABOVE)
    return np.repeat(np.where(hit, 1.5 * median, median)[:, None], horizon, axis=1)


def _series_in_folder():
    """The synthetic study's series (prices.csv beside this file), as arrays by series id."""
    from pathlib import Path

    import pandas as pd

    frame = pd.read_csv(Path(__file__).parent / "prices.csv")
    return [group.sort_values("date")["value"].to_numpy(dtype=float) for _, group in frame.groupby("series")]


def oracle(inputs, horizon):
    """Perfect: finds its window in the data it was given (the input agrees on all but its perturbed points)
    and returns the true continuation."""
    out = np.empty((inputs.shape[0], horizon))
    n = inputs.shape[1]
    for i, row in enumerate(inputs):
        best, found = -1, None
        for values in _series_in_folder.__dict__.setdefault("cache", _series_in_folder()):
            views = np.lib.stride_tricks.sliding_window_view(values[: values.size - horizon], n)
            agree = (views == row).sum(axis=1)
            j = int(np.argmax(agree))
            if agree[j] > best:
                best, found = agree[j], values[j + n : j + n + horizon]
        out[i] = found
    return out


def huge_constant(inputs, horizon):
    return np.full((inputs.shape[0], horizon), 1e160)


def collapses_on_missing(inputs, horizon):
    """Robust (the median), except that any missing input value makes it answer 0."""
    out = window_median(inputs, horizon)
    out[np.isnan(inputs).any(axis=1)] = 0.0
    return out


def window_mean_nan_as_zero(inputs, horizon):
    """Takes NaN itself, badly: the mean of its last 5 inputs with a missing value counted as 0, so a NaN among
    them pulls the forecast a fifth down — a harm whichever side of the truth it was on; forward-fill does
    better. (A NaN spread over a whole window's mean moves it by 1/n, too little to be a harm for sure.)"""
    return np.repeat(np.nan_to_num(inputs[:, -5:], nan=0.0).mean(axis=1)[:, None], horizon, axis=1)


def helped_by_zeros(inputs, horizon):
    """Naive 30 % too high, except where its input holds a zero: then the window median. A perturbation that
    drops a point to zero therefore lowers its error: it improves the system (harm, not change)."""
    median = np.nanmedian(np.where(inputs == 0, np.nan, inputs), axis=1)
    high = 1.3 * inputs[:, -1]
    return np.repeat(np.where((inputs == 0).any(axis=1), median, high)[:, None], horizon, axis=1)


def rows_seen(inputs, horizon):
    """Each forecast is the number of rows of the call that made it: which batches the model was handed."""
    return np.full((len(inputs), horizon), float(len(inputs)))


def dies_on_negative(inputs, horizon):
    """Its worker process dies (a crash, no exception) on a batch holding a negative input."""
    if (inputs < 0).any():
        import os

        os._exit(7)
    return last_value(inputs, horizon)


def unreachable(inputs, horizon):
    """An endpoint that cannot be reached: each call is noted in calls.txt beside this file."""
    from pathlib import Path

    from causalrate.systems.base import TransportError

    with open(Path(__file__).parent / "calls.txt", "a") as calls:
        calls.write(f"{len(inputs)}\n")
    raise TransportError("connection refused")
