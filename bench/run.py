#!/usr/bin/env python3
"""make bench: nereid against its baselines, measured side by side in one run.

HTTP floor: nginx (Debian) returns a fixed reply of the same size as nereid's
answer to the same request; both are driven by wrk with the same Lua script.
Compute: inception_onnx through the server (perf_analyzer, batch 1,
concurrency 2) against ONNX Runtime called directly in-process with the same
session options and thread count (build/bin/bench-ort-direct).
Rounds are interleaved and the median of the per-round ratios is reported,
since this machine is shared and noisy. Prints a table; asserts nothing.
"""
import json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time
import http.client, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEREID = os.path.join(ROOT, "build/bin/nereid")
ORT_DIRECT = os.path.join(ROOT, "build/bin/bench-ort-direct")
REPO = os.path.join(ROOT, "examples/model_repository")
PA = os.path.join(ROOT, "scripts/perf_analyzer")
NR_PORT, NGX_PORT = 18500, 18580
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("BENCH_SECONDS", "5"))
PATH = "/v2/models/identity_fp32/infer"
VALUES = [float(i) / 10 for i in range(16)]


def wait_live(port, proc, timeout=60, path="/v2/health/live"):
    """Waits until GET `path` answers 200; exits if the server died or never did."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"server did not answer 200 on {path}")


def post(port, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("POST", PATH, body=body, headers=headers)
    r = c.getresponse()
    return r.status, r.read(), dict(r.getheaders())


def lua_string(b):
    return '"' + "".join(f"\\{x}" for x in b) + '"'


def write_lua(path, body, headers):
    with open(path, "w") as f:
        f.write('wrk.method = "POST"\n')
        f.write(f"wrk.body = {lua_string(body)}\n")
        for k, v in headers.items():
            f.write(f'wrk.headers["{k}"] = "{v}"\n')


def parse_wrk(out):
    def us(tok):
        m = re.match(r"([\d.]+)(us|ms|s)", tok)
        v = float(m.group(1))
        return v * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = us(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = us(re.search(r"\s99%\s+(\S+)", out).group(1))
    errs = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errs:
        sys.exit("wrk saw errors:\n" + out)
    return rps, p50, p99


def wrk(port, lua, conns):
    threads = 1 if conns == 1 else 2
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{SECS}s", "--latency",
                          "-s", lua, f"http://127.0.0.1:{port}{PATH}"],
                         capture_output=True, text=True, check=True).stdout
    return parse_wrk(out)


def start_nginx(tmp, reply, content_type, extra_header):
    body_file = os.path.join(tmp, "reply.bin")
    with open(body_file, "wb") as f:
        f.write(reply)
    hdr = f'add_header Inference-Header-Content-Length {extra_header};' if extra_header else ""
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""
worker_processes auto; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{
  access_log off; keepalive_requests 100000000; keepalive_timeout 60;
  client_body_buffer_size 64k;
  server {{
    listen 127.0.0.1:{NGX_PORT};
    location / {{ root {tmp}; default_type {content_type}; {hdr}
                 try_files /reply.bin =404; error_page 405 =200 /reply.bin; }}
  }}
}}""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return p


def http_rows(tmp):
    rows = []
    json_body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                        "data": VALUES}]}).encode()
    raw = struct.pack("<16f", *VALUES)
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 64}}],
                      "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    cases = [("JSON", json_body, {"Content-Type": "application/json"}),
             ("binary", hdr + raw, {"Content-Type": "application/octet-stream",
                                    "Inference-Header-Content-Length": str(len(hdr))})]
    for name, body, headers in cases:
        status, reply, rh = post(NR_PORT, body, headers)
        if status != 200:
            sys.exit(f"nereid answered {status}: {reply[:200]}")
        lua = os.path.join(tmp, f"{name}.lua")
        write_lua(lua, body, headers)
        ngx = start_nginx(tmp, reply, rh.get("Content-Type", "application/json"),
                          rh.get("Inference-Header-Content-Length"))
        try:
            for conns in (1, 16):
                ratios_p50, ratios_rps, nr_all, ng_all = [], [], [], []
                for _ in range(ROUNDS):
                    ng = wrk(NGX_PORT, lua, conns)
                    nr = wrk(NR_PORT, lua, conns)
                    ratios_p50.append(nr[1] / ng[1])
                    ratios_rps.append(nr[0] / ng[0])
                    nr_all.append(nr)
                    ng_all.append(ng)
                med = lambda xs, i: statistics.median(x[i] for x in xs)
                rows.append((f"identity_fp32 {name} c={conns} (reply {len(reply)} B)",
                             med(nr_all, 0), med(nr_all, 1), med(nr_all, 2),
                             med(ng_all, 0), med(ng_all, 1), med(ng_all, 2),
                             statistics.median(ratios_p50), statistics.median(ratios_rps)))
        finally:
            ngx.send_signal(signal.SIGQUIT)
            ngx.wait()
    return rows


def perf_analyzer(model, conc):
    out = subprocess.run([PA, "-m", model, "-u", f"127.0.0.1:{NR_PORT}", "-b", "1",
                          "--concurrency-range", f"{conc}:{conc}", "-p", str(SECS * 1000),
                          "-s", "25", "--max-trials", "6"],
                         capture_output=True, text=True)
    m = re.search(r"Throughput: ([\d.]+) infer/sec", out.stdout)
    if not m:
        sys.exit("perf_analyzer failed:\n" + out.stdout + out.stderr)
    return float(m.group(1))


def ort_direct(model, threads, intra):
    out = subprocess.run([ORT_DIRECT, os.path.join(REPO, model, "1/model.onnx"), str(threads),
                          str(intra), str(SECS), "1"], capture_output=True, text=True, check=True)
    return float(re.search(r"infer_per_sec=([\d.]+)", out.stdout).group(1))


def startup_row(tmp):
    """exec -> ready, RSS and threads for simple + identity_fp32, against a bare C program that
    loads ONNX Runtime and runs one session (bench-ort-direct on `identity_fp32` for 0 s)."""
    repo = os.path.join(tmp, "startup_repo")
    os.makedirs(repo, exist_ok=True)
    for m in ("simple", "identity_fp32"):
        if not os.path.exists(os.path.join(repo, m)):
            shutil.copytree(os.path.join(REPO, m), os.path.join(repo, m))
    ready, rss, threads, bare_ms, bare_rss = [], [], [], [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        p = subprocess.Popen([NEREID, f"--model-repository={repo}", "--http-port=18590",
                              "--http-address=127.0.0.1"], stderr=subprocess.DEVNULL)
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", 18590, timeout=1)
                c.request("GET", "/v2/health/ready")
                if c.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.001)
        ready.append((time.perf_counter() - t0) * 1e3)
        with open(f"/proc/{p.pid}/status") as f:
            st = f.read()
        rss.append(int(re.search(r"VmRSS:\s+(\d+)", st).group(1)) / 1024)
        threads.append(int(re.search(r"Threads:\s+(\d+)", st).group(1)))
        p.send_signal(signal.SIGTERM)
        p.wait()
        t0 = time.perf_counter()
        b = subprocess.Popen([ORT_DIRECT, os.path.join(REPO, "identity_fp32/1/model.onnx"), "1",
                              "1", "0", "1"], stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(b.pid, 0)
        bare_ms.append((time.perf_counter() - t0) * 1e3)
        if status != 0:
            sys.exit("bench-ort-direct failed")
        bare_rss.append(ru.ru_maxrss / 1024)
    med = statistics.median
    print(f"\nstart-up, repository simple + identity_fp32 ({ROUNDS} runs, medians)")
    print(f"  exec -> ready {med(ready):.0f} ms (goal <= 70), bare ORT program {med(bare_ms):.0f} ms "
          f"(loads ORT, runs one session: the floor)")
    print(f"  RSS after ready {med(rss):.1f} MB (goal <= 40), bare program peak "
          f"{med(bare_rss):.1f} MB; {med(threads):.0f} threads")


def overhead_rows():
    """Server time outside compute for one 1x3x224x224 FP32 binary request (statistics: request
    time minus compute infer), and c=1 p50 against direct ORT for the CNNs."""
    import numpy as np
    for model, shape, inp in (("inception_onnx", (1, 3, 224, 224), "input"),
                              ("densenet_onnx", (3, 224, 224), "data_0")):
        x = np.random.default_rng(0).random(shape, dtype=np.float32).tobytes()
        hdr = json.dumps({"inputs": [{"name": inp, "shape": list(shape), "datatype": "FP32",
                                      "parameters": {"binary_data_size": len(x)}}],
                          "parameters": {"binary_data_output": True}}).encode()
        path = f"/v2/models/{model}/infer"
        c = http.client.HTTPConnection("127.0.0.1", NR_PORT)
        def stats():
            c.request("GET", f"/v2/models/{model}/stats")
            return json.loads(c.getresponse().read())["model_stats"][0]
        for _ in range(3):  # warm-up
            c.request("POST", path, body=hdr + x,
                      headers={"Inference-Header-Content-Length": str(len(hdr))})
            c.getresponse().read()
        before = stats()
        lat = []
        for _ in range(40):
            t0 = time.perf_counter()
            c.request("POST", path, body=hdr + x,
                      headers={"Inference-Header-Content-Length": str(len(hdr))})
            r = c.getresponse()
            r.read()
            lat.append((time.perf_counter() - t0) * 1e6)
            if r.status != 200:
                sys.exit(f"{model}: {r.status}")
        after = stats()
        d = lambda k: (after["inference_stats"][k]["ns"] - before["inference_stats"][k]["ns"])
        n = after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"]
        outside_us = (d("success") - d("compute_infer")) / n / 1e3
        out = subprocess.run([ORT_DIRECT, os.path.join(REPO, model, "1/model.onnx"), "1", "1",
                              "4", "1"], capture_output=True, text=True, check=True).stdout
        direct_p50 = float(re.search(r"p50_us=([\d.]+)", out).group(1))
        p50 = statistics.median(lat)
        print(f"\n{model}, one {'x'.join(map(str, shape))} FP32 request at a time, binary tensors")
        print(f"  server time outside compute (stats: request - compute_infer) {outside_us:.0f} us "
              f"(goal <= 200)")
        print(f"  client p50 {p50:.0f} us vs direct ORT p50 {direct_p50:.0f} us (1 session, 1 "
              f"intra-op thread): ratio {p50 / direct_p50:.3f} (goal <= 1.05)")


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-bench-")
    os.chmod(tmp, 0o755)  # nginx workers run as an unprivileged user
    srv = subprocess.Popen([NEREID, f"--model-repository={REPO}", f"--http-port={NR_PORT}",
                            "--http-address=127.0.0.1"], stderr=subprocess.DEVNULL)
    try:
        wait_live(NR_PORT, srv)
        startup_row(tmp)
        overhead_rows()
        rows = http_rows(tmp)
        print(f"\nHTTP path (wrk, {SECS}s per run, {ROUNDS} interleaved rounds, medians)")
        print(f"{'case':44} {'nereid rps':>11} {'p50 us':>8} {'p99 us':>8} {'nginx rps':>10} "
              f"{'p50 us':>8} {'p99 us':>8} {'p50 x':>6} {'rps x':>6}")
        for r in rows:
            print(f"{r[0]:44} {r[1]:11.0f} {r[2]:8.0f} {r[3]:8.0f} {r[4]:10.0f} {r[5]:8.0f} "
                  f"{r[6]:8.0f} {r[7]:6.2f} {r[8]:6.2f}")
        print("goals (issue 2): c=1 p50 x <= 1.5; c=16 rps x >= 0.25")
        for conc in (2, 4):
            ratios, srv_all, dir_all = [], [], []
            for _ in range(ROUNDS):
                d = ort_direct("inception_onnx", 2, 1)
                s = perf_analyzer("inception_onnx", conc)
                ratios.append(s / d)
                srv_all.append(s)
                dir_all.append(d)
            print(f"\ninception_onnx batch 1, concurrency {conc} (server: 2 instances x 1 intra-op "
                  f"thread; direct: 2 threads x 1 intra-op thread)")
            print(f"  server {statistics.median(srv_all):.1f} infer/s, direct ORT "
                  f"{statistics.median(dir_all):.1f} infer/s, ratio {statistics.median(ratios):.3f} "
                  f"(goal >= 0.97; rounds: {', '.join(f'{r:.3f}' for r in ratios)})")
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
