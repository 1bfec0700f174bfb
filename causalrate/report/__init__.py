"""Stage 7 — report: the files a run leaves behind."""
