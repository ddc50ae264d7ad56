#!/usr/bin/env python3
"""make bench, the C API (issue #36): a request through include/nereid.h, in-process, with the
output copied into the caller's buffer (build/bin/bench-capi-load: one thread, one request at a
time), against the same request (identity_fp32, 16 floats, binary tensors both ways) over HTTP
at concurrency 1 (wrk), interleaved rounds, medians. The figure is CPU per request: the whole
process's for the C API (caller and server are one), the server's own for HTTP (/proc).
Goal: the C API at most 1/3 of HTTP's.

    .venv/bin/python bench/capi.py      # BENCH_ROUNDS=5 BENCH_SECONDS=4 BENCH_CAPI_REQUESTS=200000
"""
import os, re, shutil, statistics, subprocess, sys, tempfile

from benchlib import REPO, ROOT, print_rows, start_server, stop_server, wrk_cpu
from ensemble import lua

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SECS = int(os.environ.get("BENCH_SECONDS", "4"))
N = int(os.environ.get("BENCH_CAPI_REQUESTS", "200000"))
LOAD = os.path.join(ROOT, "build/bin/bench-capi-load")


def capi(repo):
    out = subprocess.run([LOAD, repo, str(N)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"cpu_us_per_request=([\d.]+) rps=(\d+)", out)
    return float(m.group(1)), float(m.group(2))


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-bench-capi-")
    repo = os.path.join(tmp, "repo")
    shutil.copytree(os.path.join(REPO, "identity_fp32"), os.path.join(repo, "identity_fp32"))
    script, port = lua(tmp), 18910
    api, http = [], []
    try:
        for r in range(ROUNDS):
            for kind in (("capi", "http") if r % 2 == 0 else ("http", "capi")):
                if kind == "capi":
                    api.append(capi(repo))
                    continue
                srv = start_server(repo, port, "--allow-grpc=false", "--allow-metrics=false")
                try:
                    rps, p50, _, cpu, _ = wrk_cpu(port, "/v2/models/identity_fp32/infer",
                                                  script, 1, SECS, srv.pid)
                finally:
                    stop_server(srv)
                http.append((cpu / (rps * SECS) * 1e6, rps))
        a = [statistics.median(x[i] for x in api) for i in range(2)]
        h = [statistics.median(x[i] for x in http) for i in range(2)]
        ratio = a[0] / h[0]
        rows = [("C API request (caller's buffer) against HTTP c=1, CPU per request",
                 f"{a[0]:.2f} us ({a[1]:.0f} req/s, one thread)",
                 f"HTTP server {h[0]:.1f} us ({h[1]:.0f} req/s)", ratio, "<= 0.333",
                 ratio <= 1 / 3)]
        print_rows(rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
