#!/usr/bin/env python3
"""make bench, part 5: model control (issue #20), against the example repository in
--model-control-mode=explicit.

- Load and unload time of densenet_onnx: POST .../load until it answers (the model is READY
  then), and POST .../unload until the index shows the version UNAVAILABLE "unloaded" (the
  unload call itself returns at once, as Triton's). Medians over BENCH_ROUNDS rounds.
- What a reload costs the client that uses the model: one HTTP client (keep-alive, JSON) sends
  inception_onnx requests back to back for BENCH_SECONDS while nothing happens, then for as long
  while the model is reloaded with a changed config (instance count 1 <-> 2) every
  RELOAD_EVERY seconds; interleaved rounds. Reported: p99 and worst latency without reloads,
  worst latency with them, how many reloads and failed requests (goal: none failed).

    .venv/bin/python bench/model_control.py   # BENCH_ROUNDS=3 BENCH_SECONDS=10
"""
import http.client, json, os, statistics, sys, threading, time

from benchlib import REPO, start_server, stop_server

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECS = float(os.environ.get("BENCH_SECONDS", "10"))
RELOAD_EVERY = float(os.environ.get("RELOAD_EVERY", "1.0"))
PORT = 18950
med = statistics.median


def post(conn, path, body=b""):
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, r.read()


def index_state(conn, model):
    _, body = post(conn, "/v2/repository/index")
    return [(e.get("state"), e.get("reason")) for e in json.loads(body) if e["name"] == model]


def load_unload(conn):
    t0 = time.perf_counter()
    st, body = post(conn, "/v2/repository/models/densenet_onnx/load")
    assert st == 200, body
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    st, body = post(conn, "/v2/repository/models/densenet_onnx/unload")
    assert st == 200, body
    while index_state(conn, "densenet_onnx") != [("UNAVAILABLE", "unloaded")]:
        time.sleep(0.001)
    return t_load, time.perf_counter() - t0


def client_run(seconds, reload, cfg_text):
    """Latencies (s) of back-to-back requests; reloads in a second thread when asked."""
    body = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 224, 224],
                                   "datatype": "FP32", "data": [0.5] * (3 * 224 * 224)}]}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    lat, failed, reloads = [], 0, [0]
    stop = threading.Event()

    def reloader():
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
        k = 0
        while not stop.wait(RELOAD_EVERY):
            k += 1
            cfg = cfg_text.replace('"count": 1', '"count": %d' % (1 + k % 2))
            st, b = post(c, "/v2/repository/models/inception_onnx/load",
                         json.dumps({"parameters": {"config": cfg}}).encode())
            assert st == 200, b
            reloads[0] += 1

    t = threading.Thread(target=reloader) if reload else None
    if t:
        t.start()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        st, _ = post(conn, "/v2/models/inception_onnx/infer", body)
        lat.append(time.perf_counter() - t0)
        failed += st != 200
    stop.set()
    if t:
        t.join()
    return lat, failed, reloads[0]


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def main():
    p = start_server(REPO, PORT, "--model-control-mode=explicit", "--load-model=inception_onnx",
                     "--allow-grpc=false", "--allow-metrics=false")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
        conn.request("GET", "/v2/models/inception_onnx/config")
        cfg = json.loads(conn.getresponse().read())
        cfg["instance_group"] = [{"count": 1, "kind": "KIND_CPU"}]
        cfg_text = json.dumps(cfg)
        loads, unloads, quiet, busy = [], [], [], []
        for r in range(ROUNDS):
            tl, tu = load_unload(conn)
            loads.append(tl)
            unloads.append(tu)
            q = client_run(SECS, False, cfg_text)
            b = client_run(SECS, True, cfg_text)
            quiet.append(q)
            busy.append(b)
            print(f"  round {r + 1}: load {tl * 1e3:.0f} ms, unload {tu * 1e3:.0f} ms | "
                  f"no reloads: p99 {p99(q[0]) * 1e3:.1f} ms, worst {max(q[0]) * 1e3:.1f} ms | "
                  f"{b[2]} reloads: p99 {p99(b[0]) * 1e3:.1f} ms, worst {max(b[0]) * 1e3:.1f} ms, "
                  f"failed {b[1]}", flush=True)
        print("model control (medians over rounds):")
        print(f"  densenet_onnx load {med(loads) * 1e3:.0f} ms, unload {med(unloads) * 1e3:.0f} ms")
        qp99 = med([p99(q[0]) for q in quiet])
        qmax = med([max(q[0]) for q in quiet])
        bmax = med([max(b[0]) for b in busy])
        bp99 = med([p99(b[0]) for b in busy])
        failed = sum(b[1] for b in busy) + sum(q[1] for q in quiet)
        print(f"  inception_onnx client without reloads: p99 {qp99 * 1e3:.1f} ms, "
              f"worst {qmax * 1e3:.1f} ms")
        print(f"  with a reload every {RELOAD_EVERY:g} s: p99 {bp99 * 1e3:.1f} ms, worst "
              f"{bmax * 1e3:.1f} ms ({bmax / qp99:.2f}x the quiet p99); failed requests: {failed}")
        if failed:
            sys.exit("requests failed during reloads")
    finally:
        stop_server(p)


if __name__ == "__main__":
    main()
