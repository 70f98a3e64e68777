"""VLM judges: score-token log-prob features (and, later, their extraction)."""
