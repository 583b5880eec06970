"""Placing a run's components on one machine (and, later, on Ray)."""
