"""Forecasting with language models: the prompt, the strict parser, and the ask → parse → retry loop.

The prompt follows the direct prompt that the Context-is-Key benchmark (Williams et al., 2024)
found strongest: history as ``(timestamp, value)`` lines, the timestamps to predict, the
answer between ``<forecast>`` tags and nothing else. Numbers are written with six significant
digits and never in scientific notation; missing values are written ``NaN`` and the prompt
says so. Vision systems get the chart of METHOD §2 instead of the history lines.

Subclasses implement ``ask``: one chat turn per request, returning the answer text and facts
(tokens, latency). An answer that does not parse is asked again up to ``parse_retries`` times,
then becomes a failure row that keeps the raw answer.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from causalrate.systems.base import Batch, Prediction, System, TransportError

PROMPT_VERSION = "cik-direct-v1"  # bump whenever the text below changes

DEFAULT_CONTEXT = "The series holds daily values of one stock's closing price."

INSTRUCTIONS = """Now please predict the value at the following timestamps: {targets}.

Return the forecast in (timestamp, value) format in between <forecast> and </forecast> tags.
Do not include any other information (e.g., comments) in the forecast.

Example:
<history>
(t1, v1)
(t2, v2)
(t3, v3)
</history>
<forecast>
(t4, v4)
(t5, v5)
</forecast>"""


class ChatSettings(BaseModel):
    """Settings every language-model system has."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    context: str = Field(DEFAULT_CONTEXT, description="background sentence put in the prompt's <context>")
    max_new_tokens: int = Field(300, ge=1)
    parse_retries: int = Field(2, ge=0, description="extra asks when an answer does not parse")


def number(value: float) -> str:
    """Six significant digits, positional (1234567 → '1234570', never '1.23457e+06'); NaN → 'NaN'."""
    if np.isnan(value):
        return "NaN"
    return np.format_float_positional(value, precision=6, unique=False, fractional=False, trim="-")


def numeric_prompt(values: np.ndarray, dates: np.ndarray, targets: np.ndarray, *, context: str) -> str:
    history = "\n".join(f"({d}, {number(v)})" for d, v in zip(dates, values, strict=True))
    missing = " Missing values are written NaN." if np.isnan(values).any() else ""
    return (
        "I have a time series forecasting task for you.\n\n"
        "Here is some context about the task. Make sure to factor in any background knowledge, "
        f"satisfy any constraints, and respect any scenarios.\n<context>\n{context}{missing}\n</context>\n\n"
        f"Here is a historical time series in (timestamp, value) format:\n<history>\n{history}\n</history>\n\n"
        + INSTRUCTIONS.format(targets=", ".join(str(t) for t in targets))
    )


def plot_prompt(dates: np.ndarray, targets: np.ndarray, *, context: str) -> str:
    return (
        "I have a time series forecasting task for you.\n\n"
        "Here is some context about the task. Make sure to factor in any background knowledge, "
        f"satisfy any constraints, and respect any scenarios.\n<context>\n{context}\n</context>\n\n"
        f"The attached line chart shows the series' last {dates.size} daily values, oldest on the left; "
        f"the last one was observed on {dates[-1]}. Gaps in the line are missing values.\n\n"
        + INSTRUCTIONS.format(targets=", ".join(str(t) for t in targets))
    )


class ParseError(ValueError):
    pass


_TAGS = re.compile(r"<forecast>(.*?)</forecast>", re.DOTALL)
_LINE = re.compile(r"^\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)$")


def parse_forecast(text: str, targets: np.ndarray) -> np.ndarray:
    """The values of exactly the requested timestamps, in order, from one <forecast> block; else ParseError."""
    blocks = _TAGS.findall(text)
    if len(blocks) != 1:
        raise ParseError(f"expected one <forecast>…</forecast> block, found {len(blocks)}")
    lines = [line.strip() for line in blocks[0].strip().splitlines() if line.strip()]
    if len(lines) != targets.size:
        raise ParseError(f"expected {targets.size} (timestamp, value) lines, found {len(lines)}")
    values = np.empty(targets.size)
    for i, (line, target) in enumerate(zip(lines, targets, strict=True)):
        match = _LINE.match(line)
        if match is None:
            raise ParseError(f"line {i + 1} is not '(timestamp, value)': {line[:80]!r}")
        stamp, value = match.groups()
        if stamp != str(target):
            raise ParseError(f"line {i + 1}: timestamp {stamp!r}, expected {target}")
        try:
            values[i] = float(value)
        except ValueError:
            raise ParseError(f"line {i + 1}: {value[:40]!r} is not a number") from None
        if not np.isfinite(values[i]):
            raise ParseError(f"line {i + 1}: {value!r} is not a finite number")
    return values


@dataclass(frozen=True)
class Request:
    prompt: str
    image: bytes | None  # PNG, for vision systems
    seed: int


@dataclass
class Answer:
    text: str
    facts: dict[str, Any] = field(default_factory=dict)  # e.g. prompt_tokens, output_tokens
    error: str | None = None  # the request itself failed (after transport retries)
    unreachable: bool = False  # it failed for want of an answer (timeouts, connection, 429/5xx), not its content


class ChatSystem(System):
    """Base of language-model systems: build prompts, ask, parse strictly, ask again, keep the facts."""

    Settings: type[BaseModel] = ChatSettings
    settings: ChatSettings
    family = "general-purpose LLM"
    architecture = "decoder-only"
    wants_context = True  # the prompt names dates: they enter the cache key

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "prompt": PROMPT_VERSION}

    def ask(self, requests: list[Request], *, attempt: int) -> list[Answer]:
        """One chat turn per request; attempt 0 is the first ask, retries count up."""
        raise NotImplementedError

    def requests(self, batch: Batch) -> list[Request]:
        context = self.settings.context
        if self.modality == "plot":
            prompts = [
                plot_prompt(d, t, context=context) for d, t in zip(batch.input_dates, batch.truth_dates, strict=True)
            ]
        else:
            prompts = [
                numeric_prompt(v, d, t, context=context)
                for v, d, t in zip(batch.inputs, batch.input_dates, batch.truth_dates, strict=True)
            ]
        images = batch.images or (None,) * len(prompts)
        return [Request(p, image, int(seed)) for p, image, seed in zip(prompts, images, batch.seeds, strict=True)]

    def forecast(self, batch: Batch) -> Prediction:
        requests = self.requests(batch)
        b = len(requests)
        point = np.full((b, batch.horizon), np.nan)
        errors: list[str | None] = [None] * b
        info: list[dict[str, Any]] = [{"attempts": 0, "latency_s": 0.0} for _ in range(b)]
        todo = list(range(b))
        for attempt in range(self.settings.parse_retries + 1):
            started = time.perf_counter()
            answers = self.ask([requests[i] for i in todo], attempt=attempt)
            if attempt == 0 and answers and all(a.unreachable for a in answers):  # nothing got through
                raise TransportError(answers[0].error)
            share = (time.perf_counter() - started) / max(len(todo), 1)
            still = []
            for i, answer in zip(todo, answers, strict=True):
                facts = info[i]
                facts["attempts"] += 1
                facts["latency_s"] += answer.facts.pop("latency_s", share)
                for key, value in answer.facts.items():
                    facts[key] = facts.get(key, 0) + value if isinstance(value, int | float) else value
                if answer.error is not None:
                    errors[i] = answer.error
                    continue
                try:
                    point[i] = parse_forecast(answer.text, batch.truth_dates[i])
                    errors[i] = None
                except ParseError as exc:
                    errors[i] = (
                        f"unparsable answer ({exc}) after {facts['attempts']} attempt(s); answer: {answer.text!r}"
                    )
                    still.append(i)
            todo = still
            if not todo:
                break
        for facts in info:
            facts["latency_s"] = round(facts["latency_s"], 6)
        return Prediction(point=point, info=tuple(info), errors=tuple(errors))
