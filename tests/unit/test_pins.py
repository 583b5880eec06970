"""One torch pin per environment: every installer reads it from infra/pins/, none
names its own version."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALLERS = [
    REPO / "setup.sh",
    *sorted((REPO / "infra").rglob("*.yaml")),
    *sorted((REPO / "infra").rglob("*.sh")),
]

OWN_TORCH = re.compile(
    r"""pip install[^\n]*['"\s](torch(?:vision)?(?:[=<>~!][^\s'"]*)?)"""
    r"""(?=[\s'"]|$)""",
    re.M,
)
"""A `pip install ... torch[version]` line: an installer naming torch itself."""


def test_installers_take_torch_from_the_pin_files() -> None:
    pins = {path.name: path.read_text() for path in (REPO / "infra" / "pins").glob("*.txt")}
    for name in ("torch.txt", "torch-vllm.txt"):
        assert re.search(r"^torch==\d", pins[name], re.M), name
        assert re.search(r"^torchvision==\d", pins[name], re.M), name
    for path in INSTALLERS:
        text = path.read_text()
        own = re.findall(OWN_TORCH, text)
        assert own == [], f"{path.relative_to(REPO)} installs {own} itself; use infra/pins/"
    assert "-r infra/pins/torch.txt" in (REPO / "setup.sh").read_text()
    assert "-r infra/pins/torch-vllm.txt" in (REPO / "setup.sh").read_text()
    assert "infra/pins/torch.txt" in (REPO / "infra" / "ray" / "aws-cluster.yaml").read_text()
