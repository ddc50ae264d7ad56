#!/usr/bin/env python3
"""make bench, part 8: execution accelerators (issue #18). inception_onnx and densenet_onnx from
the example repository on ONNX Runtime's default CPU provider against the OpenVINO provider
(the guide's `cpu_execution_accelerator : [ { name : "openvino" } ]`), both on the library
scripts/setup.sh installs (the onnxruntime-openvino build), default instances (2 on this
machine): time from exec to READY, then wrk with binary tensors at concurrency 1 and 2, and at 8
with `dynamic_batching { }` added (inception only: densenet has max_batch_size 0). Interleaved
rounds, medians.

    .venv/bin/python bench/accelerators.py      # BENCH_ROUNDS=3 BENCH_SECONDS=6
"""
import os, shutil, statistics, subprocess, tempfile, time

from benchlib import NEREID, REPO, cnn_lua, stop_server, wait_live, wrk

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("BENCH_SECONDS", "6"))
PORT = 18990
OPENVINO = ('optimization { execution_accelerators { cpu_execution_accelerator : '
            '[ { name : "openvino" } ] } }\n')
MODELS = [("inception_onnx", "input", (1, 3, 224, 224), True),
          ("densenet_onnx", "data_0", (3, 224, 224), False)]


def repo(tmp, model, ov, batching):
    d = os.path.join(tmp, f"{model}_{int(ov)}{int(batching)}", model)
    shutil.copytree(os.path.join(REPO, model), d, symlinks=True)
    with open(os.path.join(d, "config.pbtxt"), "a") as f:
        f.write((OPENVINO if ov else "") + ("dynamic_batching { }\n" if batching else ""))
    return os.path.dirname(d)


def start(path):
    t0 = time.perf_counter()
    p = subprocess.Popen([NEREID, f"--model-repository={path}", f"--http-port={PORT}",
                          "--http-address=127.0.0.1", "--allow-grpc=false",
                          "--allow-metrics=false"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_live(PORT, p, 180, "/v2/health/ready")
    return p, time.perf_counter() - t0


def main():
    tmp = tempfile.mkdtemp()
    try:
        for model, inp, shape, batches in MODELS:
            lua = cnn_lua(tmp, model, inp, shape)
            path = f"/v2/models/{model}/infer"
            paths = {(ov, b): repo(tmp, model, ov, b) for ov in (False, True)
                     for b in ((False, True) if batches else (False,))}
            res = {k: [] for k in paths}
            for r in range(ROUNDS):
                keys = list(paths) if r % 2 == 0 else list(paths)[::-1]
                for key in keys:
                    p, ready = start(paths[key])
                    try:
                        wrk(PORT, path, lua, 2, 2)  # the first runs (OpenVINO compiles lazily)
                        row = [ready]
                        for c in ((8,) if key[1] else (1, 2)):
                            rps, _, p99 = wrk(PORT, path, lua, c, SECS)
                            row += [rps, p99]
                        res[key].append(row)
                    finally:
                        stop_server(p)
            print(f"{model} (medians of {ROUNDS} rounds):")
            for (ov, b), rows in res.items():
                m = [statistics.median(x[i] for x in rows) for i in range(len(rows[0]))]
                name = ("OpenVINO" if ov else "CPU provider") + (", dynamic batching" if b else "")
                cs = (8,) if b else (1, 2)
                cells = " | ".join(f"c={c} {m[1 + 2 * k]:.1f} infer/s p99 {m[2 + 2 * k] / 1e3:.1f} ms"
                                   for k, c in enumerate(cs))
                print(f"  {name}: ready {m[0] * 1e3:.0f} ms | {cells}", flush=True)
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
