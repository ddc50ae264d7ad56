#!/usr/bin/env python3
"""make bench, part 6: model warmup (issue #18). densenet_onnx from the example repository,
served alone, started BENCH_ROUNDS times without and with a model_warmup sample (zero data,
one run), on the CPU provider and on OpenVINO (which compiles on first use), interleaved.
Reported (medians): the time from exec to READY, and the latency of the first request and of
the second (JSON, one image of zeros, over a fresh connection each).

    .venv/bin/python bench/warmup.py      # BENCH_ROUNDS=5
"""
import http.client, json, os, shutil, statistics, subprocess, tempfile, time

from benchlib import NEREID, REPO, stop_server, wait_live

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
PORT = 18960
OPENVINO = ('optimization { execution_accelerators { cpu_execution_accelerator : '
            '[ { name : "openvino" } ] } }\n')
WARMUP = ('model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "data_0" value: '
          '{ data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } } } ]\n')


def repo(tmp, warm, ov):
    d = os.path.join(tmp, f"{'warm' if warm else 'cold'}_{'ov' if ov else 'cpu'}")
    shutil.copytree(os.path.join(REPO, "densenet_onnx"), os.path.join(d, "densenet_onnx"))
    with open(os.path.join(d, "densenet_onnx", "config.pbtxt"), "a") as f:
        f.write((WARMUP if warm else "") + (OPENVINO if ov else ""))
    return d


def one(path, body):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    t0 = time.perf_counter()
    c.request("POST", "/v2/models/densenet_onnx/infer", body=body,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status == 200
    return time.perf_counter() - t0


def run(path, body):
    t0 = time.perf_counter()
    p = subprocess.Popen([NEREID, f"--model-repository={path}", f"--http-port={PORT}",
                          "--http-address=127.0.0.1", "--allow-grpc=false", "--allow-metrics=false"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_live(PORT, p, 120, "/v2/health/ready")
        ready = time.perf_counter() - t0
        return ready, one(path, body), one(path, body)
    finally:
        stop_server(p)


def main():
    body = json.dumps({"inputs": [{"name": "data_0", "shape": [3, 224, 224], "datatype": "FP32",
                                   "data": [0.0] * (3 * 224 * 224)}]}).encode()
    tmp = tempfile.mkdtemp()
    try:
        keys = [(w, ov) for ov in (False, True) for w in (False, True)]
        paths = {k: repo(tmp, *k) for k in keys}
        res = {k: [] for k in keys}
        name = {k: f"{'OpenVINO' if k[1] else 'CPU provider'}, "
                   f"{'with warmup' if k[0] else 'no warmup'}" for k in keys}
        for r in range(ROUNDS):
            for k in (keys if r % 2 == 0 else keys[::-1]):
                res[k].append(run(paths[k], body))
                ready, first, second = res[k][-1]
                print(f"  round {r + 1} {name[k]}: ready after {ready * 1e3:.0f} ms, first "
                      f"request {first * 1e3:.1f} ms, second {second * 1e3:.1f} ms", flush=True)
        print("warmup (densenet_onnx, medians):")
        for k in keys:
            m = [statistics.median(x[i] for x in res[k]) for i in range(3)]
            print(f"  {name[k]}: ready {m[0] * 1e3:.0f} ms, first request {m[1] * 1e3:.1f} ms, "
                  f"second {m[2] * 1e3:.1f} ms")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
