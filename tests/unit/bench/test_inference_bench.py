"""`cua-rl bench inference`: figures from latencies, and arguments refused up front."""

from click.testing import CliRunner

from cua_rl.bench.inference import summarize
from cua_rl.cli.bench.inference import bench_inference


def test_summary_figures() -> None:
    latencies = [0.1] * 98 + [0.5, 2.0]
    figures = summarize(latencies, wall_s=10.0)
    assert figures == {"rps": 10.0, "p50_ms": 100.0, "p99_ms": 500.0, "requests": 100}
    assert summarize([], 5.0)["rps"] == 0.0


def test_bad_arguments_fail_before_anything_starts() -> None:
    runner = CliRunner()
    out = runner.invoke(bench_inference, ["--engines", "hf,tgi"])
    assert out.exit_code != 0 and "unknown engines ['tgi']" in out.output
    out = runner.invoke(bench_inference, ["--concurrency", "1,x"])
    assert out.exit_code != 0 and "1,8,32" in out.output


def test_missing_vllm_fails_in_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUA_RL_VLLM_ENV", str(tmp_path / "none"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    out = CliRunner().invoke(bench_inference, ["--engines", "vllm"])
    assert out.exit_code == 1
    assert out.output.strip().splitlines() == [
        f"Error: no vLLM environment at {tmp_path / 'none'}: run ./setup.sh --vllm (or set "
        "python: in the pool's model_servers to a vLLM interpreter)"
    ]
