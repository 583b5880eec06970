"""Evaluation reports and figures: aggregation (eval_report), intervals and pass@k
(eval_stats over the statistics helper stats), the files (eval_output,
eval_markdown, plots), what ran (manifest/), OSWorld's results layout
(osworld_layout) and comparisons of two evaluations (compare, compare_sides,
compare_plot); learning curves (curves). The command is cua_rl/cli/eval.py and its
progress bar runtime/telemetry/eval_progress.py."""
