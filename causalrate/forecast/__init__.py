"""Stage 3 — forecast: the full factorial's batches, imputation, the process pool, the cache and the SQLite store."""
