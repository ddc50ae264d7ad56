"""Triton's own perf_analyzer 2.51 (scripts/perf_analyzer) runs against nereid unchanged: it reads
metadata, config, server metadata and statistics, drives inference with binary tensors, and
reports the server-side statistics it read. `-s 1000` makes any measurement "stable": these
tests check behaviour, never speed, and must not fail on a loaded machine."""

import re
import subprocess
from pathlib import Path

import pytest

PA = Path(__file__).resolve().parents[2] / "scripts" / "perf_analyzer"


def run_pa(args, timeout=120):
    return subprocess.run([str(PA), *args], capture_output=True, text=True, timeout=timeout)


def check_sweep(r):
    """perf_analyzer finished a sweep of concurrency 1 and 2 and found the server's statistics
    (it needs the `statistics` extension)."""
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    rows = re.findall(r"Concurrency: (\d+), throughput: ([\d.]+) infer/sec", out)
    assert [c for c, _ in rows] == ["1", "2"], out
    assert all(float(t) > 0 for _, t in rows), out
    m = re.search(r"Server:\s+Inference count: (\d+)\s+Execution count: (\d+)\s+"
                  r"Successful request count: (\d+)", out)
    assert m and int(m.group(1)) > 0 and int(m.group(3)) > 0, out


@pytest.mark.parametrize("model,extra", [("simple", []),
                                         ("identity_fp32", ["--shape", "INPUT0:16"]),
                                         ("simple", ["--input-tensor-format", "json",
                                                     "--output-tensor-format", "json"]),
                                         # inputs and outputs in system shared memory regions
                                         # perf_analyzer creates and registers itself
                                         ("simple", ["--shared-memory", "system"]),
                                         ("identity_fp32", ["--shape", "INPUT0:16",
                                                            "--shared-memory", "system"])])
def test_perf_analyzer_runs(small_server, model, extra):
    check_sweep(run_pa(["-m", model, "-u", f"127.0.0.1:{small_server.port}",
                        "--concurrency-range", "1:2", "-p", "500", "-s", "1000",
                        "--max-trials", "3", *extra]))


def test_perf_analyzer_version_path(small_server):
    r = run_pa(["-m", "simple", "-x", "1", "-u", f"127.0.0.1:{small_server.port}",
                "-p", "500", "-s", "1000", "--max-trials", "3"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "throughput:" in r.stdout


def test_perf_analyzer_unknown_model_fails(small_server):
    r = run_pa(["-m", "nosuchmodel", "-u", f"127.0.0.1:{small_server.port}", "-p", "500"])
    assert r.returncode != 0
    assert "Request for unknown model: 'nosuchmodel' is not found" in r.stdout + r.stderr


@pytest.mark.parametrize("model,extra", [("simple", []),
                                         ("simple", ["--async"]),
                                         ("identity_fp32", ["--shape", "INPUT0:16",
                                                            "--streaming"]),
                                         ("simple", ["--streaming", "--async"]),
                                         ("simple", ["--shared-memory", "system"]),
                                         ("identity_fp32", ["--shape", "INPUT0:16",
                                                            "--shared-memory", "system",
                                                            "--streaming"])])
def test_perf_analyzer_grpc(small_server, model, extra):
    """-i grpc: ModelMetadata, ModelConfig, ServerMetadata, ModelStatistics, then ModelInfer (or
    ModelStreamInfer), a sweep of two concurrencies."""
    check_sweep(run_pa(["-m", model, "-i", "grpc", "-u", small_server.grpc_url,
                        "--concurrency-range", "1:2", "-p", "500", "-s", "1000",
                        "--max-trials", "3", *extra]))
