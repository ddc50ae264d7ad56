"""Triton's Model Analyzer itself (1.58, its own venv: scripts/requirements-ma.txt) drives
nereid-perf (--perf-analyzer-path) against a nereid in explicit model control, as its remote
launch mode wants: issue #19's "tools that drive perf_analyzer can drive it". The perf tool is
reached through a wrapper that records each command line, so the test sees what Model Analyzer
asked of nereid-perf and that every run ended well."""
import csv
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MA = Path(os.environ.get("MA_VENV") or ROOT / ".venv-ma") / "bin" / "model-analyzer"
PERF = Path(os.environ.get("NEREID_BIN") or ROOT / "build" / "bin" / "nereid").parent / "nereid-perf"

pytestmark = pytest.mark.skipif(not MA.exists(), reason="Model Analyzer's venv missing: make setup")


def test_model_analyzer_profiles_with_nereid_perf(repos, server_factory, tmp_path):
    srv = server_factory([repos["repo_small"]], ["--model-control-mode=explicit",
                                                 "--load-model=simple"])
    calls = tmp_path / "calls.txt"
    wrapper = tmp_path / "perf.sh"
    wrapper.write_text(f'#!/bin/sh\n"{PERF}" "$@"\nrc=$?\necho "$rc $*" >> "{calls}"\n'
                       'exit $rc\n')
    wrapper.chmod(0o755)
    export = tmp_path / "export"
    r = subprocess.run(
        [str(MA), "profile", "--triton-launch-mode", "remote",
         "--triton-http-endpoint", f"127.0.0.1:{srv.port}",
         "--triton-grpc-endpoint", srv.grpc_url,
         "--triton-metrics-url", f"http://127.0.0.1:{srv.metrics_port}/metrics",
         "--perf-analyzer-path", str(wrapper),
         "--model-repository", str(repos["repo_small"]), "--profile-models", "simple",
         "--output-model-repository-path", str(tmp_path / "out"),
         "--checkpoint-directory", str(tmp_path / "ckpt"), "--export-path", str(export),
         "--run-config-search-max-concurrency", "2",
         "--run-config-search-max-model-batch-size", "1",
         "--override-output-model-repository"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = [line.split(" ", 1) for line in calls.read_text().splitlines()]
    # a level that did not settle exits 2, and Model Analyzer measures it again with a larger
    # --measurement-request-count, as it does with perf_analyzer; each level ends measured
    assert runs and all(rc in ("0", "2") for rc, _ in runs), runs
    for c in ("1", "2"):
        assert any(rc == "0" and f"--concurrency-range {c} " in args for rc, args in runs), runs
    # Model Analyzer's own flags: gRPC, count windows, its metrics collection, a CSV
    for flag in ("-i grpc", "--measurement-mode count_windows", "--collect-metrics",
                 "--verbose-csv", "-f "):
        assert all(flag in args for _, args in runs), (flag, runs)
    with open(export / "results" / "metrics-model-inference.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(int(row["Concurrency"]) for row in rows) == [1, 2], rows
    assert all(float(row["Throughput (infer/sec)"]) > 0 for row in rows), rows
    assert all(row["Model Config Path"] == "simple_config_default" for row in rows), rows
