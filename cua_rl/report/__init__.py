"""Evaluation reports: aggregation (eval_report), figures (plots), `cua-rl eval` (commands)."""
