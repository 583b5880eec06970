"""Evaluation reports: aggregation (eval_report) and figures (plots); the command is
cua_rl/cli/eval.py and its progress bar runtime/telemetry/eval_progress.py."""
