"""Stage 4 — analyze, first half (causal): WRS (RQ1), observational draws, tie-safe matching, APE and
PIE% (RQ2/RQ3), and the block resampler every interval uses."""
