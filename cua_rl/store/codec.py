"""Row encoding of `Step`s for the run store (JSON columns, tuples restored on read)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from cua_rl.types import Action, ParseError, Step, StepTimings


def step_to_row(step: Step) -> tuple[Any, ...]:
    """Columns after (trajectory_id, step_index, run_id), in schema order."""
    return (
        step.screenshot_before,
        step.screenshot_after,
        step.response,
        json.dumps([asdict(a) for a in step.actions]),
        json.dumps(asdict(step.parse_error)) if step.parse_error else None,
        step.code,
        json.dumps(list(step.token_ids)),
        json.dumps(list(step.logprobs)),
        step.policy_version,
        json.dumps(asdict(step.timings)),
    )


def action_from_dict(data: dict[str, Any]) -> Action:
    fields = dict(data)
    for key in ("keys", "coordinate", "start"):
        if fields.get(key) is not None:
            fields[key] = tuple(fields[key])
    return Action(**fields)


def step_from_row(row: tuple[Any, ...]) -> Step:
    """Inverse of `step_to_row`, from (step_index, *columns)."""
    (
        index,
        before,
        after,
        response,
        actions,
        parse_error,
        code,
        token_ids,
        logprobs,
        version,
        timings,
    ) = row
    return Step(
        index=index,
        screenshot_before=before,
        screenshot_after=after,
        response=response,
        actions=tuple(action_from_dict(a) for a in json.loads(actions)),
        parse_error=ParseError(**json.loads(parse_error)) if parse_error else None,
        code=code,
        token_ids=tuple(json.loads(token_ids)),
        logprobs=tuple(json.loads(logprobs)),
        policy_version=version,
        timings=StepTimings(**json.loads(timings)),
    )
