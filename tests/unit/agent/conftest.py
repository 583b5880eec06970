"""Shared checks for the agent tests: the generated-code safety walk."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest

from cua_rl.agent.pyautogui_code import ALLOWED_CALLS


def check_code_is_safe(code: str) -> None:
    """Fail unless `code` is only top-level calls from ALLOWED_CALLS with literal args.

    Walks every AST node, so anything smuggled in (imports, names, attribute access,
    nested calls, f-strings, subscripts) shows up as an unexpected node type.
    """
    compile(code, "<actions>", "exec")
    tree = ast.parse(code)
    for statement in tree.body:
        assert isinstance(statement, ast.Expr), ast.dump(statement)
        call = statement.value
        assert isinstance(call, ast.Call), ast.dump(statement)
        func = call.func
        assert isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        assert f"{func.value.id}.{func.attr}" in ALLOWED_CALLS
        values = list(call.args) + [kw.value for kw in call.keywords]
        assert all(kw.arg is not None for kw in call.keywords)
        for value in values:
            if isinstance(value, ast.UnaryOp):  # negative numbers parse as USub(Constant)
                assert isinstance(value.op, ast.USub)
                value = value.operand
                assert isinstance(value.value, int | float)
            assert isinstance(value, ast.Constant), ast.dump(value)
            assert isinstance(value.value, int | float | str)
            assert not isinstance(value.value, bool)


@pytest.fixture(scope="session")
def safe_code() -> Callable[[str], None]:
    return check_code_is_safe
