"""Issue 8: forecast cache, kill-and-resume, re-rating, executors, export, corrupt stores."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.errors import UserError
from causalrate.forecast import local, ray_executor
from causalrate.forecast.encoding import forecast_values

SYSTEMS = """\
- {name: naive, type: naive}
- {name: random, type: random}
- {name: median, type: python, function: "planted.py:window_median"}
"""


def made(run: Path) -> dict[str, int]:
    """Forecasts made and taken from the cache by the run (its per-system tally left out)."""
    with sqlite3.connect(run / "forecasts.sqlite") as db:
        counts = json.loads(db.execute("SELECT value FROM meta WHERE key = 'counts'").fetchone()[0])
    return {k: counts[k] for k in ("made", "cached")}


def test_cache_reuses_forecasts_across_runs(synthetic_study, cli, tmp_path):
    config = synthetic_study(SYSTEMS, draws=2, stride=5)
    assert cli("assess", config, "--out", tmp_path / "a", "--no-cards", "--workers", "1")[0] == 0
    total = made(tmp_path / "a")["made"]
    assert total == 3 * 4 * 6 * 23 and made(tmp_path / "a")["cached"] == 0
    # same study again: nothing is forecast, and the ratings are the same bytes
    assert cli("assess", config, "--out", tmp_path / "b", "--no-cards", "--workers", "1")[0] == 0
    assert made(tmp_path / "b") == {"made": 0, "cached": total}
    assert (tmp_path / "a" / "ratings.json").read_bytes() == (tmp_path / "b" / "ratings.json").read_bytes()
    # rating settings only: still nothing to forecast
    config.write_text(config.read_text().replace("causal: {draws: 2}", "causal: {draws: 3}\nrating: {levels: 2}"))
    assert cli("assess", config, "--out", tmp_path / "c", "--no-cards", "--workers", "1")[0] == 0
    assert made(tmp_path / "c")["made"] == 0
    # one perturbation changed (halve → double) and one system added: only those are forecast
    config.write_text(
        config.read_text().replace("operator: halve", "operator: double")
        + '  - {name: mean, type: python, function: "planted.py:last_value"}\n'
    )
    text = config.read_text()
    config.write_text(
        text.replace(
            '- {name: median, type: python, function: "planted.py:window_median"}\n\n',
            '- {name: median, type: python, function: "planted.py:window_median"}\n',
        )
    )
    assert cli("assess", config, "--out", tmp_path / "d", "--no-cards", "--workers", "1")[0] == 0
    windows = 6 * 23
    assert made(tmp_path / "d") == {"made": 3 * windows + 4 * windows, "cached": 3 * 3 * windows}


MODEL = """\
import json
from pathlib import Path

import numpy as np
from helpers import scale  # a sibling module, found without PYTHONPATH

WEIGHTS = Path(__file__).with_name("weights.json")


def predict(inputs, horizon):
    return scale(np.repeat(inputs[:, -1:], horizon, axis=1), json.loads(WEIGHTS.read_text())["level"])
"""


def test_cache_follows_the_model_files_and_can_be_bypassed(synthetic_study, cli, tmp_path):
    """A retrained weights file (declared in files:) or an edited sibling module means new forecasts, not
    the old model's from the cache; --no-cache makes them afresh; stderr says how many came from the cache."""
    config = synthetic_study(
        '- {name: m, type: python, function: "model.py:predict", files: [weights.json]}\n', draws=2, stride=20
    )
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "helpers.py").write_text("def scale(values, weight):\n    return values * weight\n")
    (tmp_path / "weights.json").write_text('{"level": 1.0}')
    total = 4 * 36

    def run(name: str, *flags: str) -> tuple[dict[str, int], str, float]:
        code, _, err = cli("assess", config, "--out", tmp_path / name, "--no-cards", "--workers", "1", *flags)
        assert code == 0, err
        with sqlite3.connect(tmp_path / name / "forecasts.sqlite") as db:
            first = db.execute("SELECT forecast FROM forecasts ORDER BY window, perturbation LIMIT 1").fetchone()[0]
        return made(tmp_path / name), err, forecast_values(first)[0]

    counts, err, before = run("a")
    assert counts == {"made": total, "cached": 0} and f"m: {total} forecasts (0 from the cache)" in err, err
    (tmp_path / "weights.json").write_text('{"level": 2.0}')  # retrained
    counts, err, after = run("b")
    assert counts == {"made": total, "cached": 0} and after == pytest.approx(2 * before)
    assert run("c")[0] == {"made": 0, "cached": total}
    (tmp_path / "helpers.py").write_text("def scale(values, weight):\n    return values * weight + 1\n")
    counts, _, edited = run("d")
    assert counts == {"made": total, "cached": 0} and edited == pytest.approx(after + 1)
    counts, err, _ = run("e", "--no-cache")
    assert counts == {"made": total, "cached": 0} and f"m: {total} forecasts (0 from the cache)" in err
    config.write_text(config.read_text().replace("files: [weights.json]", "files: [gone.pkl]"))
    code, _, err = cli("assess", config, "--out", tmp_path / "f", "--no-cards")
    assert code == 2 and "files: no such file or folder: " in err and "gone.pkl" in err, err


def test_kill_and_resume_loses_nothing_and_duplicates_nothing(synthetic_study, cli, tmp_path):
    systems = '- {name: slow, type: python, function: "planted.py:slow_last"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(systems, draws=2, stride=6, extra="forecast: {batch_size: 4, cache: false}\n")
    env = {**os.environ, "CAUSALRATE_CACHE_DIR": str(tmp_path / "cache"), "PLANTED_SLOW": "1"}
    command = [sys.executable, "-m", "causalrate", "assess", str(config), "--no-cards", "--workers", "2"]
    run = tmp_path / "killed"
    process = subprocess.Popen([*command, "--out", str(run)], env=env, stderr=subprocess.PIPE, start_new_session=True)
    store = run / "forecasts.sqlite"
    deadline = time.monotonic() + 60
    rows = 0
    while time.monotonic() < deadline and rows < 40:
        time.sleep(0.2)
        if store.exists():
            try:
                with sqlite3.connect(store) as db:
                    rows = db.execute("SELECT count(*) FROM forecasts").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    os.killpg(process.pid, signal.SIGKILL)  # the whole process group: main and workers, no clean-up
    process.wait()
    with sqlite3.connect(store) as db:
        before = db.execute("SELECT count(*) FROM forecasts").fetchone()[0]
    total = 2 * 4 * 6 * 19  # (160 - 50) // 6 + 1 windows per series
    assert 40 <= before < total
    # the killed process is the test's subject; what follows runs in this one (same command, no slowness)
    code, _, err = cli("assess", config, "--no-cards", "--workers", "2", "--out", run)
    assert code == 2 and f"--resume {run}" in err  # the store is not overwritten by accident
    code, _, err = cli("assess", config, "--no-cards", "--workers", "2", "--resume", run)
    assert code == 0, err
    assert made(run)["made"] == total - before
    with sqlite3.connect(store) as db:
        assert db.execute(
            "SELECT count(*), count(DISTINCT system || window || perturbation) FROM forecasts"
        ).fetchone() == (total, total)
    code, _, err = cli("assess", config, "--no-cards", "--workers", "2", "--out", tmp_path / "clean")
    assert code == 0, err
    assert (run / "ratings.json").read_bytes() == (tmp_path / "clean" / "ratings.json").read_bytes()


def test_resume_needs_the_same_config(synthetic_study, cli, tmp_path):
    config = synthetic_study("- {name: naive, type: naive}\n", draws=2, stride=10)
    assert cli("assess", config, "--out", tmp_path / "run", "--no-cards")[0] == 0
    config.write_text(config.read_text().replace("seed: 3", "seed: 4"))
    code, _, err = cli("assess", config, "--resume", tmp_path / "run", "--no-cards")
    assert code == 2 and "different config" in err


def test_a_hung_worker_is_killed_and_replaced(synthetic_study, cli, tmp_path, monkeypatch):
    monkeypatch.setattr(local, "GRACE_SECONDS", 1.0)
    systems = '- {name: stuck, type: python, function: "planted.py:stubborn"}\n- {name: naive, type: naive}\n'
    config = synthetic_study(
        systems, draws=2, stride=40, extra="forecast: {timeout: 0.05, retries: 1, batch_size: 64}\n"
    )
    started = time.monotonic()
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--no-cards", "--workers", "2")
    assert code == 3 and "stuck: timeout: its worker hung and was killed" in err, err  # failed every row: said so
    assert time.monotonic() - started < 60
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as db:
        errors = dict(db.execute("SELECT system, group_concat(DISTINCT error) FROM forecasts GROUP BY system"))
    assert errors["naive"] is None  # the replacement worker carried on
    assert errors["stuck"].startswith("timeout: its worker hung and was killed after")  # a timeout: not retried


def test_rate_without_forecasting(synthetic_study, cli, tmp_path):
    config = synthetic_study(SYSTEMS, draws=2, stride=5)
    assert cli("assess", config, "--out", tmp_path / "run", "--no-cards")[0] == 0
    before = (tmp_path / "run" / "forecasts.sqlite").stat().st_mtime_ns
    code, _, err = cli(
        "rate",
        tmp_path / "run",
        "--levels",
        "2",
        "--systems",
        "naive,median",
        "--scores",
        "ape,smape",
        "--out",
        tmp_path / "rerated",
        "--no-cards",
    )
    assert code == 0, err
    doc = json.loads((tmp_path / "rerated" / "ratings.json").read_text())
    assert doc["levels"] == 2 and [s["name"] for s in doc["systems"]] == ["naive", "median"]
    assert {r["score"] for r in doc["ratings"]} == {"ape", "smape"}
    assert (tmp_path / "run" / "forecasts.sqlite").stat().st_mtime_ns == before
    # the same settings re-rated in place reproduce the original file exactly
    original = (tmp_path / "run" / "ratings.json").read_bytes()
    assert cli("rate", tmp_path / "run", "--no-cards")[0] == 0
    assert (tmp_path / "run" / "ratings.json").read_bytes() == original
    code, _, err = cli("rate", tmp_path / "run", "--systems", "ghost")
    assert code == 2 and "ghost" in err


def test_rate_in_a_fresh_process_reads_a_run_whose_schemes_are_its_own_attributes(synthetic_study, cli, tmp_path):
    """The stored config names its resolved schemes, one per data attribute (`region` here, `season` on the
    electricity study); only loading the data registers them, so `causalrate rate` in a new process refused every
    run not on industry/company data: "causal.schemes: unknown assignment scheme 'region'" (exit 2)."""
    config = synthetic_study(SYSTEMS, draws=2, stride=5)
    prices = config.parent / "prices.csv"
    prices.write_text(prices.read_text().replace("industry,company", "region,site", 1))
    config.write_text(config.read_text().replace("[industry, company]", "[region, site]"))
    assert cli("assess", config, "--out", tmp_path / "run", "--no-cards", "--workers", "1")[0] == 0
    stored = json.loads((tmp_path / "run" / "ratings.json").read_text())["provenance"]["config"]["causal"]["schemes"]
    assert "region" in stored
    done = subprocess.run(  # a fresh interpreter: nothing registered but what the run itself brings
        [sys.executable, "-m", "causalrate", "rate", str(tmp_path / "run"), "--no-cards"],
        env={**os.environ, "CAUSALRATE_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    rated = json.loads((tmp_path / "run" / "ratings.json").read_text())["ratings"]
    assert any(r["score"] == "ape_region" for r in rated)


def test_export_parquet(synthetic_study, cli, tmp_path):
    systems = '- {name: naive, type: naive}\n- {name: median, type: python, function: "planted.py:window_median"}\n'
    config = synthetic_study(systems, draws=2, stride=10)
    assert cli("assess", config, "--out", tmp_path / "run", "--no-cards")[0] == 0
    code, out, _ = cli("export", tmp_path / "run")
    assert code == 0
    frame = pd.read_parquet(out.strip())
    assert len(frame) == 2 * 4 * 6 * 12 and {"forecast", "truth", "input", "attr_industry", "rmax"} <= set(
        frame.columns
    )
    assert len(frame["truth"].iloc[0]) == 10
    # issue 31: what each system saw (NaN for naive, which takes it; forward-filled for the python function)
    missing = frame[frame["perturbation"] == "P3"].set_index(["system", "window"])
    assert (missing["operator"] == "missing").all()
    naive, median = missing.loc[("naive", 0)], missing.loc[("median", 0)]
    gap = [i for i, v in enumerate(naive["input_seen"]) if np.isnan(v)]
    assert gap == list(naive["offsets"]) and all(median["input_seen"][i] == median["input_seen"][i - 1] for i in gap)
    assert [v for i, v in enumerate(naive["input_seen"]) if i not in gap] == [
        v for i, v in enumerate(naive["input"]) if i not in gap
    ]
    assert len(naive["input_dates"]) == 40 and naive["truth_dates"][0] == naive["first_forecast_date"]
    long = pd.read_parquet(tmp_path / "run" / "forecasts_long.parquet")
    assert list(long.columns[:5]) == ["unique_id", "ds", "model", "perturbation", "y_hat"]
    assert len(long) == 10 * frame["forecast"].notna().sum()
    step = long[(long["model"] == "naive") & (long["window"] == 0) & (long["perturbation"] == "P3")]
    assert (
        step["y_hat"].tolist() == list(naive["forecast"]) and str(step["ds"].iloc[0].date()) == naive["truth_dates"][0]
    )


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, None, "windows"])
def test_corrupt_or_foreign_store(tmp_path, cli, content):
    """A damaged file, a foreign SQLite file, or ours with a table dropped (was a traceback of the first query
    that read it, exit 1): exit 2 naming the file, for every command that reads a run."""
    from causalrate.forecast.store import ForecastStore

    run = tmp_path / "run"
    run.mkdir()
    expected = "not a causalrate forecast store"
    if content is None:  # a real SQLite file, but not ours
        with sqlite3.connect(run / "forecasts.sqlite") as db:
            db.execute("CREATE TABLE other (x INTEGER)")
    elif isinstance(content, str):  # ours, a table dropped (by hand, or a tool that 'cleaned' it)
        ForecastStore.create(run / "forecasts.sqlite", metrics=["mae"]).conn.close()
        with sqlite3.connect(run / "forecasts.sqlite") as db:
            db.execute(f"DROP TABLE {content}")
        (run / "ratings.json").write_text("{}")
        expected = f"forecasts.sqlite: not a whole causalrate forecast store (no table {content})"
    else:
        (run / "forecasts.sqlite").write_bytes(content)
    for command in (["rate", run], ["export", run], ["card", run, "--format", "html"]):
        code, _, err = cli(*command)
        assert code == 2 and expected in err and "Traceback" not in err, err


def test_ray_executor_matches_local(synthetic_study, cli, tmp_path):
    pytest.importorskip("ray")
    import ray

    config = synthetic_study(SYSTEMS, draws=2, stride=8)
    assert cli("assess", config, "--out", tmp_path / "local", "--no-cards", "--workers", "2")[0] == 0
    os.environ["CAUSALRATE_CACHE_DIR"] = str(tmp_path / "ray-cache")  # forecast again, on Ray
    try:
        code, _, err = cli(
            "assess", config, "--out", tmp_path / "ray", "--no-cards", "--workers", "2", "--executor", "ray"
        )
    finally:
        ray.shutdown()
    assert code == 0, err
    assert made(tmp_path / "ray")["cached"] == 0
    assert (tmp_path / "local" / "ratings.json").read_bytes() == (tmp_path / "ray" / "ratings.json").read_bytes()


def test_a_ray_address_that_refuses_or_wants_a_token_is_exit_2_at_once(synthetic_study, cli, tmp_path, monkeypatch):
    """Nothing listening at --address: exit 2 within seconds, naming the flag, and no run folder written.
    A cluster with token authentication: exit 2 saying what to set."""
    ray = pytest.importorskip("ray")
    import socket

    config = synthetic_study("- {name: naive, type: naive}\n", draws=2, stride=20)
    with socket.socket() as probe:  # a local port that surely refuses: bound, never listening
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
        started = time.monotonic()
        code, _, err = cli("assess", config, "--out", tmp_path / "run", "--executor", "ray", "--address", address)
    assert code == 2 and time.monotonic() - started < 30, err
    assert f"--address {address}: no Ray cluster answers there" in err and "ray start --head" in err, err
    assert not (tmp_path / "run").exists()

    def token_needed(**options):  # what Ray 2.60 does at a `ray start --head` cluster without RAY_AUTH_MODE=token
        for _ in range(20):  # its C++ core logs each attempt on fd 2 ...
            os.write(2, b"gcs_client.cc:210: Failed to get cluster ID from GCS server: Unauthenticated: RPC error: "
                        b"InvalidAuthToken: Authentication token is missing or incorrect\n")  # fmt: skip
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.9:6379")  # ... then gives up, saying no more

    monkeypatch.setattr(ray_executor, "reachable", lambda address: None)
    monkeypatch.setattr(ray, "init", token_needed)
    code, _, err = cli("assess", config, "--out", tmp_path / "run", "--executor", "ray", "--address", "10.0.0.9:6379")
    assert code == 2 and "uses token authentication; set RAY_AUTH_MODE=token" in err and "Traceback" not in err, err
    assert "InvalidAuthToken" not in err and not (tmp_path / "run").exists()


def test_a_ray_address_that_accepts_but_is_not_ray_is_exit_2_within_the_connect_time(synthetic_study, cli, tmp_path):
    """A port that accepts connections and never answers (another service, a firewall holding them) cost
    ray.init 20 tries of about 40 s each, in silence; one that answers in another protocol (HTTP), 20 s. Both
    are exit 2 within CONNECT_SECONDS of the handshake, naming the address; a real cluster's GCS passes."""
    ray = pytest.importorskip("ray")
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    config = synthetic_study("- {name: naive, type: naive}\n", draws=2, stride=20)
    with socket.socket() as silent:  # accepts (the kernel's backlog), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        code, _, err = cli("assess", config, "--out", tmp_path / "run", "--executor", "ray", "--address", address)
    assert code == 2 and time.monotonic() - started < 30, err  # was 20 tries of ~40 s
    assert f"--address {address}: something accepts connections there, but no Ray cluster answered within 5 s" in err
    assert "Traceback" not in err and "rpc_client" not in err and not (tmp_path / "run").exists()

    web = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # HTTP/1 (a dashboard's port): no Ray
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        with pytest.raises(UserError, match=r"127\.0\.0\.1:\d+: something accepts connections there"):
            ray_executor.reachable(f"127.0.0.1:{web.server_address[1]}")
    finally:
        web.shutdown()
        web.server_close()

    with socket.socket() as h2:  # an HTTP/2 server that answers every request 404 (a proxy, another gRPC service)
        h2.bind(("127.0.0.1", 0))
        h2.listen(8)
        threading.Thread(target=_http2_not_found, args=(h2,), daemon=True).start()
        with pytest.raises(UserError, match=r"what answers there is not a Ray cluster \(RpcError: .*404"):
            ray_executor.reachable(f"127.0.0.1:{h2.getsockname()[1]}")

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray_executor.reachable(ray.get_runtime_context().gcs_address)  # a cluster answers: no error
    finally:
        ray.shutdown()


def _http2_not_found(server) -> None:
    """Answer each HTTP/2 request on `server`'s connections with status 404 (HPACK static entry 13), nothing else."""
    while True:
        try:
            conn, _ = server.accept()
        except OSError:  # closed: the test is over
            return
        conn.recv(24)  # the client's preface
        conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # our SETTINGS (none)
        buffer = b""
        while chunk := conn.recv(65536):
            buffer += chunk
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                size, kind, flags, stream = int.from_bytes(buffer[:3], "big"), buffer[3], buffer[4], buffer[5:9]
                buffer = buffer[9 + size :]
                if kind == 4 and not flags & 1:  # their SETTINGS: acknowledged
                    conn.sendall(bytes([0, 0, 0, 4, 1, 0, 0, 0, 0]))
                elif kind == 1:  # a request's HEADERS: ":status: 404", END_STREAM | END_HEADERS
                    conn.sendall(bytes([0, 0, 1, 1, 5]) + stream + b"\x8d")
        conn.close()


def test_accelerator_batches_stay_in_one_worker_per_device(tmp_path):
    """Each device's jobs run in one (spawned) worker of their own while the other workers take the rest."""
    from causalrate.forecast.jobs import Job
    from causalrate.forecast.local import LocalExecutor
    from causalrate.systems.base import Batch

    (tmp_path / "planted.py").write_text((Path(__file__).parent / "planted.py").read_text())
    spec = {"name": "pid", "type": "python", "function": "planted.py:worker_pid"}
    batch = Batch(
        inputs=np.ones((2, 5)),
        horizon=1,
        seeds=np.zeros(2, dtype=np.uint64),
        attributes=({}, {}),
        input_dates=np.zeros((2, 5), dtype="datetime64[D]"),
        truth_dates=np.zeros((2, 1), dtype="datetime64[D]"),
    )
    devices = ["cuda:0", "cuda:1", None]
    jobs = [Job("pid", "P0", np.arange(2), spec, tmp_path, 30.0, batch, accelerator=devices[i % 3]) for i in range(18)]
    pids: dict[str | None, set[float]] = {d: set() for d in devices}
    LocalExecutor(3).run(jobs, lambda job, outcome: pids[job.accelerator].add(outcome.forecasts[0, 0]))
    assert len(pids["cuda:0"]) == len(pids["cuda:1"]) == 1
    assert pids["cuda:0"] != pids["cuda:1"]
    assert os.getpid() not in pids[None] and len(pids[None] - pids["cuda:0"] - pids["cuda:1"]) >= 1
