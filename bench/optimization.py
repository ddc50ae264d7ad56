#!/usr/bin/env python3
"""make bench, part 2: the optimization guide's experiment (docs/optimization.md).

For inception_onnx and a small MLP (2 x MatMul 1024x1024 + Relu, where batching pays on a CPU),
throughput and p95 latency at concurrency 1, 2, 4, 8 for four configs of the same model:
  (a) default: no dynamic_batching, one instance
  (b) dynamic_batching { }, one instance
  (c) instance_group [ { count: 2 } ], no batching (Triton's own CPU default for ONNX Runtime)
  (d) both
plus the ceiling: ONNX Runtime called in-process (build/bin/bench-ort-direct) at batch
1..max_batch_size, and the ratio "dynamic batching at concurrency 2*max_batch_size / direct ORT
at max_batch_size", its direct ORT figure the mean of runs just before and just after the
server's run (this machine's speed drifts; a ceiling measured at the end would carry it). Temporary repositories: inception's model.onnx is symlinked, the MLP is
generated with the onnx package. Driven by Triton's perf_analyzer (binary tensors, batch 1).
Prints markdown tables; asserts nothing.

    .venv/bin/python bench/optimization.py          # BENCH_CONC=1,2,4,8 BENCH_PA_MS=2000
"""
import os, re, shutil, signal, subprocess, sys, tempfile, time
import http.client

from benchlib import wait_live  # bench/benchlib.py, beside this file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEREID = os.path.join(ROOT, "build/bin/nereid")
ORT_DIRECT = os.path.join(ROOT, "build/bin/bench-ort-direct")
PA = os.path.join(ROOT, "scripts/perf_analyzer")
INCEPTION = os.path.join(ROOT, "examples/model_repository/inception_onnx")
PORT = 18600
CONC = [int(c) for c in os.environ.get("BENCH_CONC", "1,2,4,8").split(",")]
PA_MS = int(os.environ.get("BENCH_PA_MS", "2000"))
DIRECT_S = float(os.environ.get("BENCH_DIRECT_SECONDS", "3"))
MLP_WIDTH = 1024

VARIANTS = [
    ("a", "default (1 instance)", "instance_group [ { count: 1 kind: KIND_CPU } ]\n"),
    ("b", "dynamic_batching", "dynamic_batching { }\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n"),
    ("c", "2 instances", "instance_group [ { count: 2 kind: KIND_CPU } ]\n"),
    ("d", "both", "dynamic_batching { }\ninstance_group [ { count: 2 kind: KIND_CPU } ]\n"),
]

MODELS = {
    "inception": {
        "max_batch": 4,
        "io": ('input [ { name: "input" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] } ]\n'
               'output [ { name: "output" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n'),
    },
    "mlp": {
        "max_batch": 8,
        "io": (f'input [ {{ name: "x" data_type: TYPE_FP32 dims: [ {MLP_WIDTH} ] }} ]\n'
               f'output [ {{ name: "y" data_type: TYPE_FP32 dims: [ {MLP_WIDTH} ] }} ]\n'),
    },
}


def write_mlp(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((MLP_WIDTH, MLP_WIDTH)) * 0.03).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((MLP_WIDTH, MLP_WIDTH)) * 0.03).astype(np.float32), "w2")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["hr"]),
         helper.make_node("MatMul", ["hr", "w2"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", MLP_WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", MLP_WIDTH])],
        initializer=[w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


def write_repo(root, tag, extra, mlp_path):
    """One repository per variant, holding both models under the same names."""
    repo = os.path.join(root, tag)
    for name, spec in MODELS.items():
        d = os.path.join(repo, name)
        os.makedirs(os.path.join(d, "1"))
        src = os.path.join(INCEPTION, "1/model.onnx") if name == "inception" else mlp_path
        os.symlink(src, os.path.join(d, "1/model.onnx"))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(f'name: "{name}"\nplatform: "onnxruntime_onnx"\n'
                    f'max_batch_size: {spec["max_batch"]}\n{spec["io"]}{extra}')
    return repo


def perf(model, conc):
    """(infer/s, p95 us) from perf_analyzer; a run that does not stabilise within 25% is
    repeated once with a looser bound so that the table stays complete."""
    for stab in ("25", "100"):
        out = subprocess.run([PA, "-m", model, "-u", f"127.0.0.1:{PORT}", "-b", "1",
                              "--concurrency-range", f"{conc}:{conc}", "-p", str(PA_MS),
                              "-s", stab, "--max-trials", "4"], capture_output=True, text=True)
        thr = re.search(r"Throughput: ([\d.]+) infer/sec", out.stdout)
        p95 = re.search(r"p95 latency: (\d+) usec", out.stdout)
        if thr and p95:
            return float(thr.group(1)), int(p95.group(1))
    sys.exit("perf_analyzer failed:\n" + out.stdout + out.stderr)


def stats(model):
    import json
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.request("GET", f"/v2/models/{model}/stats")
    st = json.loads(c.getresponse().read())["model_stats"][0]
    return st["inference_count"], st["execution_count"]


def direct(path, batch):
    """Best of one session with 2 intra-op threads and two sessions with 1 each."""
    best = 0.0
    for threads, intra in ((1, 2), (2, 1)):
        out = subprocess.run([ORT_DIRECT, path, str(threads), str(intra), str(DIRECT_S), str(batch)],
                             capture_output=True, text=True, check=True)
        best = max(best, float(re.search(r"infer_per_sec=([\d.]+)", out.stdout).group(1)))
    return best


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-opt-")
    mlp_path = os.path.join(tmp, "mlp.onnx")
    write_mlp(mlp_path)
    paths = {"inception": os.path.join(INCEPTION, "1/model.onnx"), "mlp": mlp_path}
    res = {}      # (model, variant, conc) -> (thr, p95)
    ratio_runs = {}  # (model, variant) -> (thr at 2*max_batch, direct ORT around it)
    avg_batch = {}   # (model, variant) -> inferences per execution over the whole sweep
    t0 = time.time()
    try:
        for tag, _, extra in VARIANTS:
            repo = write_repo(tmp, tag, extra, mlp_path)
            srv = subprocess.Popen([NEREID, f"--model-repository={repo}", f"--http-port={PORT}",
                                    "--http-address=127.0.0.1"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            try:
                wait_live(PORT, srv, 120, "/v2/health/ready")
                for model, spec in MODELS.items():
                    for conc in CONC:
                        res[(model, tag, conc)] = perf(model, conc)
                    if tag in ("b", "d"):
                        before = direct(paths[model], spec["max_batch"])
                        thr = perf(model, 2 * spec["max_batch"])[0]
                        after = direct(paths[model], spec["max_batch"])
                        ratio_runs[(model, tag)] = (thr, (before + after) / 2)
                    inf, ex = stats(model)
                    avg_batch[(model, tag)] = inf / ex if ex else 0.0
            finally:
                srv.send_signal(signal.SIGTERM)
                srv.wait()
        ceiling = {m: {b: direct(paths[m], b) for b in range(1, s["max_batch"] + 1)}
                   for m, s in MODELS.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n## Optimization experiment (perf_analyzer -b 1 -p {PA_MS} -s 25 --max-trials 4; "
          f"{time.time() - t0:.0f} s)")
    for model, spec in MODELS.items():
        print(f"\n### {model} (max_batch_size {spec['max_batch']}) - infer/s, p95 latency us")
        print("| config | " + " | ".join(f"c={c}" for c in CONC) + " | avg batch |")
        print("|---|" + "---:|" * (len(CONC) + 1))
        for tag, label, _ in VARIANTS:
            cells = [f"{res[(model, tag, c)][0]:.1f} / {res[(model, tag, c)][1]}" for c in CONC]
            print(f"| ({tag}) {label} | " + " | ".join(cells) + f" | {avg_batch[(model, tag)]:.2f} |")
        print("\ndirect ORT (in-process, best of 1x2 and 2x1 threads), infer/s by batch: " +
              ", ".join(f"b={b}: {v:.1f}" for b, v in ceiling[model].items()))
        for tag in ("b", "d"):
            thr, top = ratio_runs[(model, tag)]
            print(f"ratio ({tag}) at concurrency {2 * spec['max_batch']}: {thr:.1f} / direct ORT "
                  f"at batch {spec['max_batch']} just before and after {top:.1f} = "
                  f"{thr / top:.3f} (goal >= 0.9)")


if __name__ == "__main__":
    main()
