"""Figures (matplotlib, headless) and reports."""
