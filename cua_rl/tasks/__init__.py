"""OSWorld task loading, split lists and template/evaluator pairs.

Everything here turns JSON files into `cua_rl.types.TaskVariant`s and reports
malformed input as `Problem` lines (`file: $.json.path: what was expected`), so
that a bad file stops a run before it starts (docs/architecture.md, failure rules).
"""
