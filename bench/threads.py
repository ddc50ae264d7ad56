#!/usr/bin/env python3
"""make bench, part 2: CPU sizing of ONNX Runtime inside the server, measured every way the
issue "Faster than Triton on the CPU" asks: instances x intra-op threads, and intra-op spinning
on and off. For inception_onnx and densenet_onnx (batch 1, binary tensors, wrk client):

  p50 at concurrency 1, infer/s at concurrency 2, and the server's CPU time per inference at
  concurrency 1 (what spinning burns), for each sizing below, next to ONNX Runtime called
  directly with the same sessions and threads (build/bin/bench-ort-direct).

  2x1       the default: 2 instances (Triton's CPU default), intra-op threads = cores / 2
  1x2       1 instance, intra-op threads = cores, spinning off
  1x2 spin  the same, spinning on
  2x2       2 instances, each with a pool over all cores (Triton's ORT backend default)
  2x2 spin  the same with ORT's default spinning: what Triton runs out of the box
  2x2 nice  2 instances, pools over all cores whose workers run at nice 19
            (`intra_op_worker_nice: 19`): the callers keep the cores, workers take idle ones

Prints a markdown table; asserts nothing.

    .venv/bin/python bench/threads.py      # BENCH_ROUNDS=2 BENCH_SECONDS=4
"""
import os, shutil, statistics, tempfile, time

from benchlib import (CNNS, REPO, cnn_lua, ort_direct, start_server, stop_server, wrk,
                      wrk_cpu)

PORT = 18620
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
SECS = int(os.environ.get("BENCH_SECONDS", "4"))
CORES = os.cpu_count()

# (label, instances, intra-op threads, spinning, nice of the intra-op workers)
SIZINGS = [("2x1 (default)", 2, max(1, CORES // 2), False, 0),
           ("1x2", 1, CORES, False, 0),
           ("1x2 spin", 1, CORES, True, 0),
           ("2x2", 2, CORES, False, 0),
           ("2x2 spin", 2, CORES, True, 0),
           ("2x2 nice", 2, CORES, False, 19)]


def write_repo(root, tag, instances, intra, spin, nice):
    """The example repository's CNNs with an explicit instance group and thread settings."""
    repo = os.path.join(root, tag)
    for model, _, _ in CNNS:
        d = os.path.join(repo, model)
        os.makedirs(os.path.join(d, "1"))
        os.symlink(os.path.join(REPO, model, "1/model.onnx"), os.path.join(d, "1/model.onnx"))
        with open(os.path.join(REPO, model, "config.pbtxt")) as f:
            cfg = f.read()
        cfg += (f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n"
                f'parameters {{ key: "intra_op_thread_count" value: {{ string_value: "{intra}" }} }}\n'
                f'parameters {{ key: "allow_spinning" value: {{ string_value: '
                f'"{"true" if spin else "false"}" }} }}\n'
                f'parameters {{ key: "intra_op_worker_nice" value: {{ string_value: "{nice}" }} }}\n')
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(cfg)
    return repo


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-threads-")
    res = {}  # (model, label) -> list of (p50 us, cpu ms/inf, rps, direct p50, direct rps)
    t0 = time.time()
    try:
        luas = {m: cnn_lua(tmp, m, i, s) for m, i, s in CNNS}
        for rnd in range(ROUNDS):
            for label, inst, intra, spin, nice in SIZINGS:
                repo = write_repo(tmp, f"r{rnd}-{inst}x{intra}{'s' if spin else ''}n{nice}", inst,
                                  intra, spin, nice)
                srv = start_server(repo, PORT)
                try:
                    for model, _, _ in CNNS:
                        path = f"/v2/models/{model}/infer"
                        s1 = wrk_cpu(PORT, path, luas[model], 1, SECS, srv.pid)
                        cpu_ms = s1[3] * 1e3 / (s1[0] * SECS)
                        s2 = wrk(PORT, path, luas[model], 2, SECS)
                        onnx = os.path.join(REPO, model, "1/model.onnx")
                        pool = ("nice" if nice else "session", "spin" if spin else "nospin")
                        d1 = ort_direct(onnx, 1, intra, SECS, 1, *pool)
                        d2 = ort_direct(onnx, inst, intra, SECS, 1, *pool)
                        res.setdefault((model, label), []).append(
                            (s1[1], cpu_ms, s2[0], d1["p50_us"], d2["infer_per_sec"]))
                finally:
                    stop_server(srv)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    print(f"\n## CPU sizing ({CORES} cores; wrk, {SECS} s per run, {ROUNDS} rounds, medians; "
          f"{time.time() - t0:.0f} s)")
    for model, _, _ in CNNS:
        print(f"\n### {model}, batch 1")
        print("| instances x intra-op threads | c=1 p50 ms | CPU ms per inference at c=1 | "
              "c=2 infer/s | direct ORT c=1 p50 ms | direct ORT saturated infer/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, *_ in SIZINGS:
            r = res[(model, label)]
            col = lambda i: med(x[i] for x in r)
            print(f"| {label} | {col(0) / 1e3:.2f} | {col(1):.1f} | {col(2):.1f} | "
                  f"{col(3) / 1e3:.2f} | {col(4):.1f} |")


if __name__ == "__main__":
    main()
