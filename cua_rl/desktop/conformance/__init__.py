"""The provider conformance check (`check_provider`), run by the test suite on every
provider of ours and available to anyone who writes one (docs/providers.md)."""

from cua_rl.desktop.conformance.check import check_provider
from cua_rl.desktop.conformance.report import CHECKS, ProviderCheckFailed, ProviderReport

__all__ = ["CHECKS", "ProviderCheckFailed", "ProviderReport", "check_provider"]
