"""What `check_provider` found: one line per check that failed, saying why."""

from __future__ import annotations

from dataclasses import dataclass, field

from cua_rl.errors import DesktopError

CHECKS = ("start", "auth", "isolation", "limits", "reset", "cleanup", "stop")
"""Every check, in the order they run."""


class ProviderCheckFailed(DesktopError):
    """A provider failed `check_provider`; the message has one line per failure."""


@dataclass
class ProviderReport:
    """The outcome of `check_provider` on one provider."""

    provider: str
    passed: list[str] = field(default_factory=list)
    """Names of the checks that passed."""
    failures: list[str] = field(default_factory=list)
    """`check: why`, one line per failed check (the first reason each)."""
    notes: list[str] = field(default_factory=list)
    """What was not checked, and why (e.g. a provider whose desktops do not die with
    their owner says how they go instead)."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each check."""

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, check: str, why: str) -> None:
        line = " ".join(why.split())  # one line, whatever the error said
        self.failures.append(f"{check}: {line[:400]}")

    def failed(self, check: str) -> bool:
        return any(f.startswith(f"{check}: ") for f in self.failures)

    def __str__(self) -> str:
        head = f"provider {self.provider!r}: " + (
            "passes" if self.ok else f"{len(self.failures)} check(s) failed"
        )
        return "\n".join([head, *self.failures, *(f"note: {n}" for n in self.notes)])

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise ProviderCheckFailed(str(self))
