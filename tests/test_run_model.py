"""The typed run: ratings.json's model round-trips the reference byte for byte, a damaged ratings.json is
a clear user error (exit 2, file and field), and the forecast store reads metrics by name."""

import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from causalrate.forecast.encoding import forecast_values
from causalrate.forecast.store import ForecastStore
from causalrate.report.estimators import facts
from causalrate.report.outputs import render_report
from causalrate.run import RatingsDocument, Run

REFERENCE = Path(__file__).resolve().parents[1] / "ratings" / "quickstart"


def test_model_round_trips_the_reference_byte_for_byte():
    text = (REFERENCE / "ratings.json").read_text(encoding="utf-8")
    doc = RatingsDocument.read(REFERENCE / "ratings.json")
    assert doc.to_json() == text
    assert not doc.model_extra and not doc.ratings[0].model_extra  # every field of v3 is modelled
    assert doc.counts.n_windows == json.loads(text)["counts"]["windows"]  # the JSON name stays `windows`


def test_report_md_is_the_template_of_ratings_json():
    """report.md renders from the typed document alone; the reference's not-rated lines come in the run's
    order (ratings.json sorts its keys), every other line is the same."""
    doc = RatingsDocument.read(REFERENCE / "ratings.json")
    rendered, rendered_notes = split_notes(render_report(doc).splitlines())
    reference, reference_notes = split_notes((REFERENCE / "report.md").read_text(encoding="utf-8").splitlines())
    # a score's description is this version's registry text (facts), not the reference run's: compared by name
    described = re.compile(r"^(- \*\*\w+\*\*): (?!not rated).*$")
    for line in rendered:
        if found := described.match(line):
            assert line == f"{found.group(1)}: {facts(found.group(1)[4:-2]).description}"
    rendered, reference = ([described.sub(r"\1", x) for x in lines] for lines in (rendered, reference))
    assert sorted(rendered) == sorted(reference)
    assert [x for x in rendered if "not rated" not in x] == [x for x in reference if "not rated" not in x]
    # the notes are grouped by (score, note) now; either form names the same rows with the same notes
    assert (
        rendered_notes
        == reference_notes
        == {(r.system, r.perturbation, r.score, r.note) for r in doc.ratings if r.note}
    )
    assert len([x for x in render_report(doc).splitlines() if "not applicable" in x]) <= 1


def split_notes(lines: list[str]) -> tuple[list[str], set[tuple[str, str, str, str]]]:
    """report.md's lines outside "Insufficient and undefined scores", and that section's notes as (system,
    perturbation, score, note) rows, read from one line per row ("- s / p / score: note") or per (note, where)
    ("- score for a, b on P1, P3: note", "- score, score2 for a on P1: note", "- score for a on P1; b on P3: note")."""
    start = (
        lines.index("## Insufficient and undefined scores") if "## Insufficient and undefined scores" in lines else 0
    )
    end = next((i for i in range(start + 1, len(lines)) if start and lines[i].startswith("## ")), start)
    notes = set()
    for line in lines[start + 1 : end]:
        if not line.startswith("- "):
            continue
        head, _, note = line[2:].partition(": ")
        if " / " in head:
            system, perturbation, score = head.split(" / ")
            notes.add((system, perturbation, score, note))
            continue
        scores, _, where = head.partition(" for ")
        for part in where.split("; "):
            systems, _, perturbations = part.partition(" on ")
            notes |= {
                (s, p, score, note)
                for score in scores.split(", ")
                for s in systems.split(", ")
                for p in perturbations.split(", ")
            }
    return lines[:start] + lines[end:] if start else lines, notes


@pytest.mark.parametrize(
    ("edit", "field", "expected"),
    [
        (lambda d: d["systems"][0].update(architecture=12), "systems.0.architecture", "valid string"),
        (lambda d: d["ratings"][3].update(rating="best"), "ratings.3.rating", "valid integer"),
        (lambda d: d["provenance"].pop("seed"), "provenance.seed", "Field required"),
        (lambda d: d["headlines"]["naive"]["bias"].update(tied_with="arima"), "headlines.naive.bias.tied_with", ""),
    ],
)
def test_damaged_ratings_json_is_exit_2_naming_file_and_field(tmp_path, cli, edit, field, expected):
    doc = json.loads((REFERENCE / "ratings.json").read_text(encoding="utf-8"))
    edit(doc)
    (tmp_path / "ratings.json").write_text(json.dumps(doc), encoding="utf-8")
    store = ForecastStore.create(tmp_path / "forecasts.sqlite", metrics=["mase"])
    store.put_meta("plugins", [])
    store.close()
    code, _, err = cli("card", tmp_path, "--format", "json")
    assert code == 2
    assert f"{tmp_path / 'ratings.json'}: invalid ratings.json" in err
    (line,) = [x for x in err.splitlines() if x.startswith(f"  {field}: ")]
    assert expected in line
    assert "Traceback" not in err


def test_not_json_and_other_schema_are_user_errors(tmp_path):
    (tmp_path / "forecasts.sqlite").write_bytes(b"")
    (tmp_path / "ratings.json").write_text("{", encoding="utf-8")
    with pytest.raises(Exception, match=r"ratings\.json: not valid JSON"):
        Run.open(tmp_path)
    (tmp_path / "ratings.json").write_text(json.dumps({"schema": "causalrate/ratings-v2"}), encoding="utf-8")
    with pytest.raises(Exception, match=r"schema .causalrate/ratings-v2.; this causalrate reads"):
        Run.open(tmp_path)


def test_store_reads_metrics_by_name(tmp_path):
    """Planted: window 1 under P1 raises mase by 3.0, the most of any row; the reader names the metric, never m_."""
    store = ForecastStore.create(tmp_path / "forecasts.sqlite", metrics=["mase", "smape"])
    store.put_series([("AAA", {"industry": "Tech"})])
    store.put_windows([(w, "AAA", 10 * w, f"2022-01-0{w + 1}", [1.0, 2.0, 3.0], [4.0, 5.0]) for w in range(2)])
    mase = {("P0", 0): 1.0, ("P0", 1): 1.0, ("P1", 0): 1.5, ("P1", 1): 4.0}
    for perturbation in ("P0", "P1"):
        store.put_forecasts(
            system="naive",
            window_ids=np.array([0, 1]),
            perturbations=[perturbation] * 2,
            forecasts=np.array([[3.0, 3.0], [3.0, 3.5 if perturbation == "P1" else 3.0]]),
            errors=[None, None],
            seconds=np.array([0.1, 0.1]),
            metrics={"mase": np.array([mase[(perturbation, w)] for w in range(2)]), "smape": np.full(2, np.nan)},
            samples=[None, None],
            info=[None, None],
            offsets=[[], []] if perturbation == "P0" else [[2], [2]],
        )
    rows = store.forecasts()
    assert {"mase", "smape"} <= set(rows.columns) and not any(c.startswith("m_") for c in rows.columns)
    assert rows["smape"].dtype == np.float64 and rows["smape"].isna().all()  # all-NULL metric stays numeric
    top = store.largest_harm(system="naive", control="P0", metric="mase", among=["P1"])
    assert (int(top.window), top.perturbation, top.harm, top.offsets) == (1, "P1", 3.0, "[2]")
    assert store.largest_harm(system="naive", control="P0", metric="mase", among=["P2"]) is None  # P1 not asked
    assert store.largest_harm(system="naive", control="P0", metric="smape", among=["P1"]) is None  # nothing to rank
    values = store.forecast_values(system="naive", window=1, perturbations=["P0", "P1"])
    assert values["P1"].tolist() == [3.0, 3.5] and values["P0"].tolist() == [3.0, 3.0]
    window = store.window(1)
    assert (window.series, window.start, window.input.tolist(), window.truth.tolist()) == ("AAA", 10, [1, 2, 3], [4, 5])
    per, examples = store.failures("naive")
    assert (
        per.to_dict("records")
        == [
            {"perturbation": "P0", "total": 2, "failed": 0},
            {"perturbation": "P1", "total": 2, "failed": 0},
        ]
        and examples.empty
    )
    assert store.series_attributes().to_dict("records") == [{"series": "AAA", "industry": "Tech"}]
    store.close()


def test_a_v2_store_is_still_re_rated_exported_and_carded(synthetic_study, cli, tmp_path):
    """A run made before forecasts-v3 (no perturbed offsets) opens read-only: rate, export and card work."""
    systems = '- {name: naive, type: naive}\n- {name: median, type: python, function: "planted.py:window_median"}\n'
    config = synthetic_study(systems, draws=2, stride=10)
    assert cli("assess", config, "--out", tmp_path / "run", "--no-cards")[0] == 0
    with sqlite3.connect(tmp_path / "run" / "forecasts.sqlite") as conn:
        conn.execute("ALTER TABLE forecasts DROP COLUMN offsets")
        conn.execute("UPDATE meta SET value = 'causalrate/forecasts-v2' WHERE key = 'schema'")
        texts = [  # stores before v4 keep each forecast as its JSON text
            (json.dumps(forecast_values(f).tolist()), rowid)
            for rowid, f in conn.execute("SELECT rowid, forecast FROM forecasts WHERE forecast IS NOT NULL")
        ]
        conn.executemany("UPDATE forecasts SET forecast = ? WHERE rowid = ?", texts)
    conn.close()
    code, _, err = cli("rate", tmp_path / "run", "--out", tmp_path / "rerated", "--no-cards")
    assert code == 0, err
    assert RatingsDocument.read(tmp_path / "rerated" / "ratings.json").system_names == ["naive", "median"]
    code, out, err = cli("export", tmp_path / "rerated")
    assert code == 0, err
    exported = pd.read_parquet(out.strip())
    assert exported["offsets"].isna().all()
    assert sorted(tuple(f) for f in exported["forecast"].dropna()) == sorted(tuple(json.loads(t)) for t, _ in texts)
    code, out, err = cli("card", tmp_path / "rerated", "--format", "md")
    assert code == 0, err
    assert any(line.endswith(".example.svg") for line in out.splitlines())  # replayed by the series rule
    with Run.open(tmp_path / "rerated").store() as store:
        assert not store.has_offsets
