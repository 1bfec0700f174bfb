"""Stage 5 — causal: WRS (RQ1), observational draws, tie-safe matching, APE and PIE% (RQ2/RQ3)."""
