#!/usr/bin/env python3
"""make bench, part 7: host policies (issue #18). inception_onnx with 2 instances, pinned one per
core (instance_group [ { count: 1, host_policy: "core0" }, { count: 1, host_policy: "core1" } ]
with --host-policy=core<i>,cpu-cores=<i>) against the same 2 instances unpinned, each instance's
session with one intra-op thread in both cases (so the only difference is the pinning), at
concurrency 2 and 8 (wrk, binary tensors), interleaved rounds, medians. This machine has one NUMA
node and two cores: what pinning can win here is fewer migrations and a warm cache per core,
not memory locality.

    .venv/bin/python bench/host_policy.py      # BENCH_ROUNDS=3 BENCH_SECONDS=8
"""
import os, shutil, statistics, tempfile

from benchlib import REPO, cnn_lua, start_server, stop_server, wrk

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("BENCH_SECONDS", "8"))
PORT = 18970
PATH = "/v2/models/inception_onnx/infer"


def repo(tmp, pinned):
    d = os.path.join(tmp, "pinned" if pinned else "free", "inception_onnx")
    shutil.copytree(os.path.join(REPO, "inception_onnx"), d, symlinks=True)
    with open(os.path.join(d, "config.pbtxt")) as f:
        cfg = f.read()
    if pinned:
        groups = ('instance_group [ { count: 1, kind: KIND_CPU, host_policy: "core0" }, '
                  '{ count: 1, kind: KIND_CPU, host_policy: "core1" } ]\n')
    else:
        groups = "instance_group [ { count: 2, kind: KIND_CPU } ]\n"
    params = 'parameters { key: "intra_op_thread_count" value: { string_value: "1" } }\n'
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(cfg + groups + params)
    return os.path.dirname(d)


def main():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("needs two cores")
    tmp = tempfile.mkdtemp()
    try:
        lua = cnn_lua(tmp, "inception_onnx", "input", (1, 3, 224, 224))
        res = {(p, c): [] for p in (False, True) for c in (2, 8)}
        for r in range(ROUNDS):
            for pinned in ((False, True) if r % 2 == 0 else (True, False)):
                args = [f"--host-policy=core0,cpu-cores={cores[0]}",
                        f"--host-policy=core1,cpu-cores={cores[1]}"] if pinned else []
                p = start_server(repo(tmp, pinned) if r == 0 else
                                 os.path.join(tmp, "pinned" if pinned else "free"), PORT,
                                 "--allow-grpc=false", "--allow-metrics=false", *args)
                try:
                    wrk(PORT, PATH, lua, 2, 2)  # warm
                    for c in (2, 8):
                        rps, p50, p99 = wrk(PORT, PATH, lua, c, SECS)
                        res[(pinned, c)].append((rps, p99))
                        print(f"  round {r + 1} {'pinned' if pinned else 'unpinned'} c={c}: "
                              f"{rps:.1f} infer/s, p99 {p99 / 1e3:.1f} ms", flush=True)
                finally:
                    stop_server(p)
        print("host policies (inception_onnx, 2 instances x 1 intra-op thread, medians):")
        for c in (2, 8):
            u = [statistics.median(x[i] for x in res[(False, c)]) for i in (0, 1)]
            q = [statistics.median(x[i] for x in res[(True, c)]) for i in (0, 1)]
            print(f"  c={c}: unpinned {u[0]:.1f} infer/s p99 {u[1] / 1e3:.1f} ms | pinned "
                  f"{q[0]:.1f} infer/s p99 {q[1] / 1e3:.1f} ms | pinned/unpinned "
                  f"{q[0] / u[0]:.3f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
