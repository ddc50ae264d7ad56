#!/usr/bin/env python3
"""make bench, ensembles (issue #36): a two-step ensemble (identity_fp32 -> identity_fp32, 16
floats, binary tensors both ways) against one direct request to identity_fp32 on the same
server, over HTTP with wrk at concurrency 1 and 16, interleaved rounds, medians of the
per-round figures. The figure that holds on two cores shared with the load generator is the
server's own CPU per request (/proc), next to requests/s.

Goals: the chain at most 1.6x the server CPU of its own direct request (each in-process step
costs less than a request that crosses a socket), and at most half of Triton 2.51's chain on
this machine class (about 190 us of server CPU per request, 1.85x its direct 104 us; the
issue's figures, measured with Triton's own image: not rerun here, no Triton on these
machines).

    .venv/bin/python bench/ensemble.py      # BENCH_ROUNDS=5 BENCH_SECONDS=4
"""
import json, os, shutil, statistics, struct, sys, tempfile

from benchlib import REPO, print_rows, start_server, stop_server, wrk_cpu, write_lua

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SECS = int(os.environ.get("BENCH_SECONDS", "4"))
TRITON_CHAIN_US = 190.0
ROWS = []

CHAIN = """name: "chain2"
platform: "ensemble"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
ensemble_scheduling { step [
  { model_name: "identity_fp32" model_version: -1
    input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "mid" } },
  { model_name: "identity_fp32" model_version: -1
    input_map { key: "INPUT0" value: "mid" } output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }
"""


def repository(tmp):
    repo = os.path.join(tmp, "repo")
    shutil.copytree(os.path.join(REPO, "identity_fp32"), os.path.join(repo, "identity_fp32"))
    os.makedirs(os.path.join(repo, "chain2", "1"))
    with open(os.path.join(repo, "chain2", "config.pbtxt"), "w") as f:
        f.write(CHAIN)
    return repo


def lua(tmp):
    raw = struct.pack("<16f", *[float(i) / 10 for i in range(16)])
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 64}}],
                      "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
                     ).encode()
    path = os.path.join(tmp, "req.lua")
    write_lua(path, {"Content-Type": "application/octet-stream",
                     "Inference-Header-Content-Length": str(len(hdr))}, body=hdr + raw)
    return path


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-bench-ens-")
    port = 18900
    srv = start_server(repository(tmp), port, "--allow-grpc=false", "--allow-metrics=false")
    script = lua(tmp)
    try:
        for conns in (1, 16):
            per = {"direct": [], "chain": []}
            for r in range(ROUNDS):
                order = ("direct", "chain") if r % 2 == 0 else ("chain", "direct")
                for kind in order:
                    model = "identity_fp32" if kind == "direct" else "chain2"
                    rps, p50, _, cpu, _ = wrk_cpu(port, f"/v2/models/{model}/infer", script,
                                                  conns, SECS, srv.pid)
                    per[kind].append((cpu / (rps * SECS) * 1e6, rps, p50))
            d = [statistics.median(x[i] for x in per["direct"]) for i in range(3)]
            c = [statistics.median(x[i] for x in per["chain"]) for i in range(3)]
            ratio = c[0] / d[0]
            ROWS.append((f"two-step chain c={conns}, server CPU per request",
                         f"{c[0]:.1f} us ({c[1]:.0f} req/s, p50 {c[2]:.0f} us)",
                         f"direct {d[0]:.1f} us ({d[1]:.0f} req/s, p50 {d[2]:.0f} us)",
                         ratio, "<= 1.6", ratio <= 1.6))
            print(f"  c={conns}: chain {c[0]:.1f} us/request, direct {d[0]:.1f} us/request, "
                  f"ratio {ratio:.3f}", flush=True)
            if conns == 1:
                t = c[0] / TRITON_CHAIN_US
                ROWS.append(("two-step chain c=1 against Triton 2.51's chain",
                             f"{c[0]:.1f} us", f"Triton {TRITON_CHAIN_US:.0f} us (issue #36)",
                             t, "<= 0.5", t <= 0.5))
    finally:
        stop_server(srv)
        shutil.rmtree(tmp, ignore_errors=True)
    print_rows(ROWS)


if __name__ == "__main__":
    sys.exit(main())
