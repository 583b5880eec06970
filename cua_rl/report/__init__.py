"""Evaluation reports: aggregation (eval_report), figures (plots), the progress of
`cua-rl eval` (eval_progress); the command itself is cua_rl/cli/eval.py."""
