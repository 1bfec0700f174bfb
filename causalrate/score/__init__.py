"""Stage 4 — score: per-forecast metrics (METHOD §3) and the raw scores that get rated (METHOD §6)."""
