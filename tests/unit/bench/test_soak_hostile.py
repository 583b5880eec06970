"""The soak's hostile programs: the run accepts their desktop limits, and a report is
judged against those limits (the programs themselves run on real desktops in the
soak test and the escape suite)."""

from __future__ import annotations

from cua_rl.bench.soak.hostile import PROGRAMS, SOAK_LIMITS, limit_overrides
from cua_rl.config import RunConfig, load_config
from cua_rl.desktop import attack_scripts


def test_the_soak_run_gets_the_limits_its_programs_are_judged_by() -> None:
    cfg = load_config(RunConfig, preset="quickstart", overrides=limit_overrides())
    assert cfg.desktops.provider.limits == SOAK_LIMITS.model_copy(
        update={"enabled": True, "cpu_weight": cfg.desktops.provider.limits.cpu_weight}
    )


def test_each_program_goes_past_its_limit_and_a_report_is_judged_by_it() -> None:
    lim = SOAK_LIMITS
    assert f"range({lim.memory_mb + 256} // 64)" in PROGRAMS["memory_hog"].script(lim)
    assert f"< {lim.pids + 300}" in PROGRAMS["fork_loop"].script(lim)
    assert f"count={lim.home_mb + 64}" in PROGRAMS["disk_fill"].script(lim)
    held = attack_scripts.report(
        f"HOSTILE memory_hog held_mib={lim.memory_mb - 128} rc=137", "memory_hog"
    )
    assert PROGRAMS["memory_hog"].contained(held, lim)
    assert not PROGRAMS["memory_hog"].contained({"held_mib": str(lim.memory_mb + 64)}, lim)
    assert PROGRAMS["fork_loop"].contained({"started": str(lim.pids - 15)}, lim)
    assert not PROGRAMS["fork_loop"].contained({"started": str(lim.pids + 300)}, lim)
    assert not PROGRAMS["disk_fill"].contained({"written_mib": str(lim.home_mb + 64)}, lim)
