"""Stage 4 — analyze, second half (score): per-forecast metrics (METHOD §3) and the raw scores that get
rated (METHOD §6)."""

from causalrate.score import recency  # noqa: F401  (registers recency and ape_worst after the core scores)
