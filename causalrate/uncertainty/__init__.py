"""Stage 5 — uncertainty: each rating row's interval, power and stability, from the analysis's evidence
resampled by block (the resampler itself is `causal.resampling`)."""
