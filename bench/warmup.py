#!/usr/bin/env python3
"""make bench, part 6: model warmup (issue #18). densenet_onnx from the example repository,
served alone, started BENCH_ROUNDS times without and with a model_warmup sample (zero data,
one run), interleaved. Reported (medians): the time from exec to READY, and the latency of the
first request and of the second (JSON, one image of zeros, over a fresh connection each).

    .venv/bin/python bench/warmup.py      # BENCH_ROUNDS=5
"""
import http.client, json, os, shutil, statistics, subprocess, tempfile, time

from benchlib import NEREID, REPO, stop_server, wait_live

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
PORT = 18960
WARMUP = ('model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "data_0" value: '
          '{ data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } } } ]\n')


def repo(tmp, warm):
    d = os.path.join(tmp, "warm" if warm else "cold")
    shutil.copytree(os.path.join(REPO, "densenet_onnx"), os.path.join(d, "densenet_onnx"))
    if warm:
        with open(os.path.join(d, "densenet_onnx", "config.pbtxt"), "a") as f:
            f.write(WARMUP)
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
        paths = {False: repo(tmp, False), True: repo(tmp, True)}
        res = {False: [], True: []}
        for r in range(ROUNDS):
            for warm in ((False, True) if r % 2 == 0 else (True, False)):
                res[warm].append(run(paths[warm], body))
                ready, first, second = res[warm][-1]
                print(f"  round {r + 1} {'warmup' if warm else 'no warmup'}: ready after "
                      f"{ready * 1e3:.0f} ms, first request {first * 1e3:.1f} ms, second "
                      f"{second * 1e3:.1f} ms", flush=True)
        print("warmup (densenet_onnx, medians):")
        for warm in (False, True):
            m = [statistics.median(x[i] for x in res[warm]) for i in range(3)]
            print(f"  {'with warmup   ' if warm else 'without warmup'}: ready {m[0] * 1e3:.0f} ms, "
                  f"first request {m[1] * 1e3:.1f} ms, second {m[2] * 1e3:.1f} ms")
        f0 = statistics.median(x[1] for x in res[False])
        f1 = statistics.median(x[1] for x in res[True])
        print(f"  first request with warmup / without: {f1 / f0:.2f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
