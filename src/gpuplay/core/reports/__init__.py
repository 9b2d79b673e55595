"""What gpuplay writes and shows: reports, the session log, demo decks, merges and cross-version comparisons."""
