#!/usr/bin/env python3
"""GPUs (issue #18), on a machine with an NVIDIA GPU, the onnxruntime-gpu build
(`make gpu-backend`) and the CUDA 13 libraries on the library path (docs/optimization.md,
"GPUs"). Not part of `make bench` (CI has no GPU).

inception_onnx and densenet_onnx from the example repository, each served alone on: the GPU
(no instance_group: KIND_AUTO takes the GPU, one instance, as Triton), the GPU with dynamic
batching (inception; max_batch_size 4 in its config), and the CPU provider (KIND_CPU, Triton's
default two instances). For each: time from exec to READY, GPU memory in use once ready
(nvidia-smi), then infer/s, p50 and p95 at concurrency 1 and 8 (binary tensors, keep-alive
connections, one Python thread each, SECONDS each; the client is Python, so infer/s at 8 is a
floor where the model is quick).

    .venv/bin/python bench/gpu.py [--backend-directory=DIR]    # BENCH_SECONDS=5
"""
import http.client, os, shutil, statistics, subprocess, sys, tempfile, threading, time

from benchlib import CNNS, NEREID, REPO, cnn_request, stop_server, wait_live

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
PORT = 18970
BACKENDS = next((a.split("=", 1)[1] for a in sys.argv[1:]
                 if a.startswith("--backend-directory=")), os.path.join(ROOT, ".deps/backends-gpu"))
VARIANTS = {"gpu": "", "gpu+batching": "dynamic_batching { }\n",
            "cpu": "instance_group [ { kind: KIND_CPU } ]\n"}


def gpu_mem_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        return sum(int(x) for x in out.split())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return -1


def load(model, inp, shape, conc):
    body, hdrs = cnn_request(model, inp, shape)
    lat, stop = [[] for _ in range(conc)], time.perf_counter() + SECONDS

    def client(i):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            c.request("POST", f"/v2/models/{model}/infer", body=body, headers=hdrs)
            r = c.getresponse()
            r.read()
            if r.status != 200:
                sys.exit(f"{model}: HTTP {r.status}")
            lat[i].append(time.perf_counter() - t0)

    ts = [threading.Thread(target=client, args=(i,)) for i in range(conc)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    all_ = sorted(x for l in lat for x in l)
    return (len(all_) / (time.perf_counter() - t0), 1e3 * statistics.median(all_),
            1e3 * all_[int(0.95 * (len(all_) - 1))])


def main():
    print(f"backend directory: {BACKENDS}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, inp, shape in CNNS:
            for name, extra in VARIANTS.items():
                if name == "gpu+batching" and model != "inception_onnx":
                    continue
                d = os.path.join(tmp, f"{model}_{name}")
                shutil.copytree(os.path.join(REPO, model), os.path.join(d, model))
                with open(os.path.join(d, model, "config.pbtxt"), "a") as f:
                    f.write(extra)
                mem0 = gpu_mem_mib()
                t0 = time.perf_counter()
                p = subprocess.Popen([NEREID, f"--model-repository={d}", f"--http-port={PORT}",
                                      "--http-address=127.0.0.1", "--allow-grpc=false",
                                      "--allow-metrics=false", f"--backend-directory={BACKENDS}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wait_live(PORT, p, 300, "/v2/health/ready")
                ready = time.perf_counter() - t0
                mem = gpu_mem_mib() - mem0
                load(model, inp, shape, 1)  # the first requests (CUDA and cuDNN set-up)
                res = [load(model, inp, shape, c) for c in (1, 8)]
                stop_server(p)
                rows.append((model, name, ready, mem, res))
                print(rows[-1], flush=True)
    print("\n| model | on | ready | GPU memory | c=1 infer/s, p50, p95 | c=8 infer/s, p50, p95 |")
    print("|---|---|---|---|---|---|")
    for model, name, ready, mem, res in rows:
        cells = [f"{r[0]:.0f}, {r[1]:.2f} ms, {r[2]:.2f} ms" for r in res]
        print(f"| {model} | {name} | {ready * 1e3:.0f} ms | {mem} MiB | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
