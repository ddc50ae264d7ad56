#!/usr/bin/env python3
"""Soak (issue #22): mixed valid and invalid traffic at concurrency 16 on several models for a
long time, and whether memory, fds and threads come back.

16 client threads, each on its own keep-alive connection (a new one after any answer that
closes it), pick requests from a fixed mix with a seeded random generator: JSON and binary
inferences on identity_fp32 and simple, a 1 MB JSON body, gzip bodies, now and then an
inception_onnx inference (602 KB binary input), and the refusals: malformed JSON, wrong
datatype, wrong shape, an unknown model, a body over --http-max-input-size, a bad
Inference-Header-Content-Length, a body cut short and the connection dropped.

Every 5 s the server's RSS, fds and threads are sampled from /proc. Printed at the end:
- RSS at 60 s (after warm-up), at the end of the load and its peak; growth after warm-up;
- RSS, fds and threads 30 s after the load stopped, against the warm-up RSS and the counts
  before any load;
- requests sent, by answer status.
Goals: growth after warm-up < 5%; RSS after the load within 10% of the warm-up figure; fds and
threads back to their idle counts.

    .venv/bin/python bench/soak.py [seconds]      # default 1800
"""
import collections, gzip, json, os, random, socket, struct, sys, threading, time
import http.client

from benchlib import REPO, start_server, stop_server

PORT = 18620
CONNS = 16


def proc_sample(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(ln.split(":", 1) for ln in f)
    rss = int(st["VmRSS"].split()[0]) * 1024
    threads = int(st["Threads"])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return rss, fds, threads


def json_infer(n, dtype="FP32", shape=None):
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": shape or [1, n], "datatype": dtype,
                                   "data": [float(i % 97) for i in range(n)]}]}).encode()


def binary_simple():
    hdr = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
         "parameters": {"binary_data_size": 64}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    data = struct.pack("<16i", *range(16)) + struct.pack("<16i", *([1] * 16))
    return hdr + data, {"Inference-Header-Content-Length": str(len(hdr)),
                        "Content-Type": "application/octet-stream"}


def cnn_binary():
    n = 3 * 224 * 224
    hdr = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32",
                                  "parameters": {"binary_data_size": n * 4}}],
                      "outputs": [{"name": "output",
                                   "parameters": {"classification": 3}}]}).encode()
    return hdr + bytes(n * 4), {"Inference-Header-Content-Length": str(len(hdr)),
                                "Content-Type": "application/octet-stream"}


IDENT = "/v2/models/identity_fp32/infer"
SIMPLE = "/v2/models/simple/infer"
JSONH = {"Content-Type": "application/json"}


def mix():
    """[(weight, name, path, body, headers, expected statuses)]"""
    small = json_infer(16)
    sb, sh = binary_simple()
    cb, ch = cnn_binary()
    return [
        (40, "json", IDENT, small, JSONH, {200}),
        (15, "binary", SIMPLE, sb, sh, {200}),
        (4, "json 1 MB", IDENT, json_infer(100_000), JSONH, {200}),
        (5, "gzip", IDENT, gzip.compress(small), {**JSONH, "Content-Encoding": "gzip"}, {200}),
        (1, "cnn", "/v2/models/inception_onnx/infer", cb, ch, {200}),
        (6, "malformed", IDENT, small[:-7] + b"]]]}", JSONH, {400}),
        (5, "datatype", IDENT, json_infer(16, "INT8"), JSONH, {400}),
        (5, "shape", IDENT, json_infer(16, shape=[1, 15]), JSONH, {400}),
        (5, "unknown model", "/v2/models/nope/infer", small, JSONH, {400, 404}),
        (3, "bad header length", SIMPLE, sb, {**sh, "Inference-Header-Content-Length": "9999"},
         {400}),
        (3, "over the limit", IDENT, None, JSONH, {400}),
        (3, "cut short", IDENT, small, JSONH, {None}),
    ]


def client(seed, stop, counts, errors):
    rnd = random.Random(seed)
    items = mix()
    weights = [w for w, *_ in items]
    conn = None
    while not stop.is_set():
        _, name, path, body, headers, ok = rnd.choices(items, weights)[0]
        try:
            if name == "cut short" or name == "over the limit":
                s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
                cl = len(body) if body else 80 << 20
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {cl}\r\n\r\n"
                          .encode() + (body[: len(body) // 2] if body else b""))
                if name == "over the limit":
                    s.settimeout(30)
                    status = int(s.recv(4096).split(b" ", 2)[1])
                else:
                    status = None
                s.close()
            else:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
                conn.request("POST", path, body=body, headers=headers)
                r = conn.getresponse()
                r.read()
                status = r.status
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
        except (OSError, http.client.HTTPException) as e:
            errors.append(f"{name}: {e!r}")
            if conn is not None:
                conn.close()
            conn = None
            continue
        counts[(name, status)] += 1
        if status not in ok:
            errors.append(f"{name}: status {status}")


def main():
    secs = int(sys.argv[1]) if len(sys.argv) > 1 else 1800
    srv = start_server(REPO, PORT, "--grpc-port=0", "--metrics-port=0")
    try:
        time.sleep(2)
        idle_rss, idle_fds, idle_threads = proc_sample(srv.pid)
        stop, counts, errors = threading.Event(), collections.Counter(), []
        threads = [threading.Thread(target=client, args=(i, stop, counts, errors), daemon=True)
                   for i in range(CONNS)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        samples = []
        while time.monotonic() - t0 < secs:
            time.sleep(5)
            samples.append((time.monotonic() - t0, *proc_sample(srv.pid)))
            el, rss, fds, thr = samples[-1]
            print(f"{el:6.0f} s  RSS {rss / 2**20:7.1f} MiB  fds {fds:4d}  threads {thr:3d}  "
                  f"requests {sum(counts.values())}", flush=True)
        stop.set()
        for t in threads:
            t.join(150)
        time.sleep(30)
        after_rss, after_fds, after_threads = proc_sample(srv.pid)
    finally:
        stop_server(srv)
    warm = next(s for s in samples if s[0] >= 60)[1] if secs >= 60 else samples[0][1]
    end = samples[-1][1]
    peak = max(s[1] for s in samples)
    mib = lambda b: f"{b / 2**20:.1f} MiB"
    print(f"\n## soak, {time.strftime('%Y-%m-%d %H:%M')}, {secs} s at c={CONNS}")
    print(f"RSS idle before load {mib(idle_rss)}; at 60 s {mib(warm)}; at the end {mib(end)}; "
          f"peak {mib(peak)}")
    print(f"growth after warm-up: {(end - warm) / warm * 100:+.1f}% (goal < 5%)")
    print(f"30 s after the load: RSS {mib(after_rss)} ({(after_rss - warm) / warm * 100:+.1f}% "
          f"against warm-up; goal within 10%), fds {after_fds} (idle {idle_fds}), threads "
          f"{after_threads} (idle {idle_threads})")
    total = sum(counts.values())
    print(f"requests {total} ({total / secs:.0f}/s): " + ", ".join(
        f"{n} {s}: {c}" for (n, s), c in sorted(counts.items(), key=lambda kv: -kv[1])))
    print(f"client errors: {len(errors)}" + (f" (first: {errors[:5]})" if errors else ""))


if __name__ == "__main__":
    main()
