"""What a run reports while it goes: progress snapshots, the live table, metrics,
per-group figures and replica logs."""
