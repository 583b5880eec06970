import pytest

from cua_rl.adapt.acceptance import AdaptBand

BAND = AdaptBand()


@pytest.mark.parametrize(
    ("acc", "goal"),
    [
        (0.0, "easier"),
        (0.19, "easier"),
        (0.2, None),
        (0.5, None),
        (0.8, None),
        (0.81, "harder"),
        (1.0, "harder"),
    ],
)
def test_goal_at_and_around_the_band(acc: float, goal: str | None) -> None:
    assert BAND.goal(acc) == goal


@pytest.mark.parametrize(
    ("parent", "candidate", "ok"),
    [
        (1.0, 0.5, True),  # inside the band, lower
        (1.0, 0.2, False),  # at alpha_low: overshoot (strict)
        (1.0, 0.21, True),
        (1.0, 0.1, False),  # below the band
        (0.9, 0.9, False),  # not harder
        (0.9, 0.95, False),  # easier, not harder
    ],
)
def test_accept_harder(parent: float, candidate: float, ok: bool) -> None:
    assert BAND.accept("harder", parent, candidate) is ok


@pytest.mark.parametrize(
    ("parent", "candidate", "ok"),
    [
        (0.0, 0.5, True),
        (0.0, 0.8, False),  # at alpha_high: overshoot (strict)
        (0.0, 0.79, True),
        (0.0, 0.0, False),  # no change
        (0.1, 0.05, False),  # harder, not easier
        (0.0, 1.0, False),
    ],
)
def test_accept_easier(parent: float, candidate: float, ok: bool) -> None:
    assert BAND.accept("easier", parent, candidate) is ok


def test_band_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="alpha_low"):
        AdaptBand(alpha_low=0.8, alpha_high=0.2)
