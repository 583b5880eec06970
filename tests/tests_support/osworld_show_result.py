"""OSWorld's documented reader of its results layout (its `show_result.py`),
re-implemented from its description, to check our layout against what OSWorld's
own script would print:

- the target folder is `<result_dir>/<action_space>/<observation_type>/<model>`;
- every `<domain>/<example_id>/` folder holding a `result.txt` counts, its score
  `float(text)`, or `float(bool(text))` when the text is not a number;
- a domain's success rate is the mean of its counted scores; the current success
  rate the mean over every counted folder.
"""

from __future__ import annotations

import os


def show_result(
    result_dir: str, action_space: str, model: str, observation_type: str
) -> tuple[dict[str, float], float | None]:
    """(domain -> success rate, overall success rate) in [0, 1] as OSWorld reads them."""
    target = os.path.join(result_dir, action_space, observation_type, model)
    if not os.path.exists(target):
        return {}, None
    by_domain: dict[str, list[float]] = {}
    every: list[float] = []
    for domain in sorted(os.listdir(target)):
        domain_path = os.path.join(target, domain)
        if not os.path.isdir(domain_path):
            continue
        for example in sorted(os.listdir(domain_path)):
            example_path = os.path.join(domain_path, example)
            if not os.path.isdir(example_path) or "result.txt" not in os.listdir(example_path):
                continue
            with open(os.path.join(example_path, "result.txt")) as f:
                text = f.read()
            try:
                value = float(text)
            except ValueError:
                value = float(bool(text))
            by_domain.setdefault(domain, []).append(value)
            every.append(value)
    rates = {d: sum(v) / len(v) for d, v in by_domain.items()}
    return rates, (sum(every) / len(every) if every else None)
