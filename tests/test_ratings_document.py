"""ratings.json is written from its models: a key they do not declare fails on write and is kept on read."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from causalrate.run import RatingRow, RatingsDocument

REFERENCE = Path(__file__).resolve().parents[1] / "ratings" / "quickstart" / "ratings.json"


def test_every_key_of_the_reference_run_is_declared_so_writing_it_again_gives_the_same_bytes():
    text = REFERENCE.read_text(encoding="utf-8")
    assert RatingsDocument.written(**json.loads(text)).to_json() == text


def test_a_misspelt_key_fails_when_written_and_a_newer_key_is_kept_when_read():
    raw = json.loads(REFERENCE.read_text(encoding="utf-8"))
    row = {**raw["ratings"][0], "stabilty": 1.0}
    with pytest.raises(ValidationError, match="stabilty"):
        RatingRow.written(**row)
    raw["ratings"][0] = row
    with pytest.raises(ValidationError, match="stabilty"):  # a section nested as a dict is checked too
        RatingsDocument.written(**raw)
    doc = RatingsDocument.model_validate(raw)  # read (an older causalrate reading a newer run): kept, written back
    assert doc.ratings[0].model_extra == {"stabilty": 1.0}
    assert '"stabilty": 1.0' in doc.to_json()
