#!/usr/bin/env python3
"""make bench, part 1: every figure of the issue "Faster than Triton on the CPU", each against a
baseline measured in the same run, printed as one table (figure, nereid, baseline, ratio, goal).

- HTTP floor: nginx (Debian) returns a fixed reply of the same size as nereid's answer to the
  same request; both are driven by wrk with the same Lua script (identity_fp32, 16 floats).
- Compute: inception_onnx and densenet_onnx, batch 1, binary tensors, driven by wrk (a light
  client: the same bytes posted again and again) against ONNX Runtime called directly
  in-process with the same session options and thread count (build/bin/bench-ort-direct).
  perf_analyzer at concurrency 2 is reported beside it, since it is Triton's own client. The
  same c=2 figures are measured again with the input tensor in a system shared-memory region
  (Triton's extension, which perf_analyzer uses with --shared-memory system): what the server
  gives up to ONNX Runtime when the 602 KB do not cross the socket.
- Start-up and RSS against a bare C program that loads ONNX Runtime and runs one session.
- Server time outside compute from the server's own statistics.
- Instructions per request under callgrind (bench/callgrind.py), repeatable where time is not.
The server runs with its defaults (`make run`'s configuration). Rounds are interleaved and the
median of the per-round ratios is reported, since this machine is shared and noisy.

    .venv/bin/python bench/run.py     # BENCH_ROUNDS=3 BENCH_SECONDS=5 BENCH_CALLGRIND=1
    BENCH_ONLY=http .venv/bin/python bench/run.py   # the HTTP rows against nginx only
"""
import json, os, re, shutil, signal, statistics, struct, subprocess, sys, tempfile, time
import http.client

from benchlib import (CNNS, NEREID, ORT_DIRECT, PA, REPO, ShmInput, cnn_lua, cnn_request,
                      ort_direct, print_rows, start_server, stop_server, wrk, wrk_cpu,
                      write_lua)
import callgrind

NR_PORT, NGX_PORT, STARTUP_PORT = 18500, 18580, 18590
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("BENCH_SECONDS", "5"))
ONLY = os.environ.get("BENCH_ONLY", "")
if ONLY not in ("", "http"):
    sys.exit(f"BENCH_ONLY={ONLY}: only 'http' is known")
IDENTITY = "/v2/models/identity_fp32/infer"
VALUES = [float(i) / 10 for i in range(16)]
med = statistics.median

ROWS = []  # (figure, nereid, baseline, ratio or None, goal, met: True/False/None)


def row(figure, value, baseline, ratio, goal, met=None):
    ROWS.append((figure, value, baseline, ratio, goal, met))
    r = f"{ratio:.3f}" if ratio is not None else "-"
    print(f"  {figure}: {value} | baseline {baseline} | ratio {r} | goal {goal}", flush=True)


def rounds_str(xs):
    return "rounds " + ", ".join(f"{x:.3f}" for x in xs)


# ---- start-up and footprint ----

def startup_rows(tmp):
    """exec -> ready, RSS and threads for simple + identity_fp32, against a bare C program that
    loads ONNX Runtime and runs one session (bench-ort-direct on identity_fp32 for 0 s)."""
    repo = os.path.join(tmp, "startup_repo")
    for m in ("simple", "identity_fp32"):
        shutil.copytree(os.path.join(REPO, m), os.path.join(repo, m))
    ready, rss, threads, bare_ms, bare_rss = [], [], [], [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        p = subprocess.Popen([NEREID, f"--model-repository={repo}", f"--http-port={STARTUP_PORT}",
                              "--http-address=127.0.0.1"], stderr=subprocess.DEVNULL)
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", STARTUP_PORT, timeout=1)
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
        stop_server(p)
        t0 = time.perf_counter()
        b = subprocess.Popen([ORT_DIRECT, os.path.join(REPO, "identity_fp32/1/model.onnx"), "1",
                              "1", "0", "1"], stdout=subprocess.DEVNULL)
        _, status, ru = os.wait4(b.pid, 0)
        bare_ms.append((time.perf_counter() - t0) * 1e3)
        if status != 0:
            sys.exit("bench-ort-direct failed")
        bare_rss.append(ru.ru_maxrss / 1024)
    print(f"\nstart-up, repository simple + identity_fp32 ({ROUNDS} runs, medians)")
    row("exec -> ready, simple + identity_fp32", f"{med(ready):.0f} ms",
        f"bare ORT program {med(bare_ms):.0f} ms", med(ready) / med(bare_ms), "<= 70 ms",
        med(ready) <= 70)
    row("RSS after ready, same repository", f"{med(rss):.1f} MB, {med(threads):.0f} threads",
        f"bare ORT program peak {med(bare_rss):.1f} MB", med(rss) / med(bare_rss), "<= 40 MB",
        med(rss) <= 40)


# ---- one CNN request at a time: server time outside compute ----

def outside_compute_rows():
    """Server time outside compute for one 1x3x224x224 FP32 binary request: the statistics'
    request time minus compute_infer, over 40 sequential requests."""
    print("\nserver time outside compute, one CNN request at a time (binary tensors)")
    for model, inp, shape in CNNS:
        body, headers = cnn_request(model, inp, shape)
        path = f"/v2/models/{model}/infer"
        c = http.client.HTTPConnection("127.0.0.1", NR_PORT)

        def stats():
            c.request("GET", f"/v2/models/{model}/stats")
            return json.loads(c.getresponse().read())["model_stats"][0]["inference_stats"]

        for i in range(43):
            if i == 3:
                before = stats()
            c.request("POST", path, body=body, headers=headers)
            r = c.getresponse()
            r.read()
            if r.status != 200:
                sys.exit(f"{model}: {r.status}")
        after = stats()
        d = lambda k: after[k]["ns"] - before[k]["ns"]
        n = after["success"]["count"] - before["success"]["count"]
        outside_us = (d("success") - d("compute_infer")) / n / 1e3
        row(f"{model}: server time outside compute, {'x'.join(map(str, shape))} FP32 binary",
            f"{outside_us:.0f} us", "-", None, "<= 200 us", outside_us <= 200)


# ---- CNN latency and throughput against direct ONNX Runtime ----

def cnn_rows(tmp, srv):
    """c=1 p50 against direct ORT p50 (1 session, 1 intra-op thread: one of the default's two
    instances; the mean of the direct runs just before and just after) and c=2 throughput against direct ORT saturated (2 sessions x 1 intra-op
    thread: the default's two instances). Client: wrk, one thread. Each c=2 run of the server
    is compared with the mean of the direct runs just before and just after it, so a drift of
    the machine's speed during a round does not land on one side. Beside it, the CPU time each
    inference costs at c=2: server + wrk against the direct loop (repeatable where infer/s
    is not: it does not count the time the machine gave to others)."""
    print(f"\nCNNs, batch 1, binary tensors, wrk client, default config (2 instances x 1 "
          f"intra-op thread); direct ORT with the same sessions ({ROUNDS} interleaved rounds)")
    for model, inp, shape in CNNS:
        lua = cnn_lua(tmp, model, inp, shape)
        shm_in = ShmInput(tmp, NR_PORT, model, inp, shape)
        path = f"/v2/models/{model}/infer"
        onnx = os.path.join(REPO, model, "1/model.onnx")
        p50_r, rps_r, cpu_r, srv_p50, srv_rps, srv_cpu, d_p50, d_rps, d_cpu = (
            [] for _ in range(9))
        shm_rps_r, shm_cpu_r, shm_rps, shm_cpu = [], [], [], []
        d2 = ort_direct(onnx, 2, 1, SECS)
        for _ in range(ROUNDS):
            d1 = ort_direct(onnx, 1, 1, SECS)
            s1 = wrk(NR_PORT, path, lua, 1, SECS)
            d1_after = ort_direct(onnx, 1, 1, SECS)
            s2 = wrk_cpu(NR_PORT, path, lua, 2, SECS, srv.pid)
            s3 = wrk_cpu(NR_PORT, path, shm_in.lua, 2, SECS, srv.pid)
            d2_next = ort_direct(onnx, 2, 1, SECS)
            d_rate = (d2["infer_per_sec"] + d2_next["infer_per_sec"]) / 2
            d_us = (d2["cpu_us_per_infer"] + d2_next["cpu_us_per_infer"]) / 2
            s_us, s_srv, s_wrk = cpu_per_infer(s2)
            d1_p50 = (d1["p50_us"] + d1_after["p50_us"]) / 2
            p50_r.append(s1[1] / d1_p50)
            rps_r.append(s2[0] / d_rate)
            cpu_r.append(s_us / d_us)
            srv_p50.append(s1[1])
            srv_rps.append(s2[0])
            srv_cpu.append((s_us, s_srv, s_wrk))
            shm_rps_r.append(s3[0] / d_rate)
            shm_rps.append(s3[0])
            shm_cpu.append(cpu_per_infer(s3))
            shm_cpu_r.append(shm_cpu[-1][0] / d_us)
            d_p50.append(d1_p50)
            d_rps.append(d_rate)
            d_cpu.append(d_us)
            d2 = d2_next
        shm_in.close()
        row(f"{model}: c=1 p50 ({rounds_str(p50_r)})", f"{med(srv_p50) / 1e3:.2f} ms",
            f"direct ORT p50 {med(d_p50) / 1e3:.2f} ms", med(p50_r), "<= 1.05",
            med(p50_r) <= 1.05)
        row(f"{model}: c=2 infer/s ({rounds_str(rps_r)})", f"{med(srv_rps):.1f}",
            f"direct ORT {med(d_rps):.1f}", med(rps_r), ">= 0.97", med(rps_r) >= 0.97)
        row(f"{model}: c=2 CPU per inference, server + wrk ({rounds_str(cpu_r)})",
            f"{med(x[0] for x in srv_cpu) / 1e3:.2f} ms (server "
            f"{med(x[1] for x in srv_cpu) / 1e3:.2f} + wrk {med(x[2] for x in srv_cpu) / 1e3:.2f})",
            f"direct ORT {med(d_cpu) / 1e3:.2f} ms", med(cpu_r), "report")
        row(f"{model}: c=2 infer/s, input in system shared memory ({rounds_str(shm_rps_r)})",
            f"{med(shm_rps):.1f}", f"direct ORT {med(d_rps):.1f}", med(shm_rps_r), ">= 0.97",
            med(shm_rps_r) >= 0.97)
        row(f"{model}: c=2 CPU per inference, input in system shared memory "
            f"({rounds_str(shm_cpu_r)})",
            f"{med(x[0] for x in shm_cpu) / 1e3:.2f} ms (server "
            f"{med(x[1] for x in shm_cpu) / 1e3:.2f} + wrk {med(x[2] for x in shm_cpu) / 1e3:.2f})",
            f"direct ORT {med(d_cpu) / 1e3:.2f} ms", med(shm_cpu_r), "report")


def cpu_per_infer(w):
    """(server + wrk, server, wrk) CPU us per inference of a wrk_cpu() result."""
    n = w[0] * SECS
    return (w[3] + w[4]) * 1e6 / n, w[3] * 1e6 / n, w[4] * 1e6 / n


def perf_analyzer_row():
    """The same c=2 figure with Triton's perf_analyzer as the client (it shares the 2 cores),
    tensors in the request body, then in system shared memory (--shared-memory system); each
    against the mean of the direct ORT runs before and after the two."""
    model = "inception_onnx"
    onnx = os.path.join(REPO, model, "1/model.onnx")
    ratios, srv = {"none": [], "system": []}, {"none": [], "system": []}
    d = ort_direct(onnx, 2, 1, SECS)["infer_per_sec"]
    for _ in range(ROUNDS):
        got = {}
        for mode in ("none", "system"):
            out = subprocess.run([PA, "-m", model, "-u", f"127.0.0.1:{NR_PORT}", "-b", "1",
                                  "--concurrency-range", "2:2", "-p", str(SECS * 1000),
                                  "-s", "25", "--max-trials", "6", "--shared-memory", mode],
                                 capture_output=True, text=True)
            m = re.search(r"Throughput: ([\d.]+) infer/sec", out.stdout)
            if not m:
                sys.exit("perf_analyzer failed:\n" + out.stdout + out.stderr)
            got[mode] = float(m.group(1))
        d_next = ort_direct(onnx, 2, 1, SECS)["infer_per_sec"]
        for mode, v in got.items():
            ratios[mode].append(v / ((d + d_next) / 2))
            srv[mode].append(v)
        d = d_next
    for mode, label in (("none", "tensors in the body"), ("system", "--shared-memory system")):
        row(f"{model}: c=2 infer/s, perf_analyzer client, {label} "
            f"({rounds_str(ratios[mode])})", f"{med(srv[mode]):.1f}",
            "direct ORT, same round", med(ratios[mode]), "report")


# ---- HTTP path against nginx ----

def post(port, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("POST", IDENTITY, body=body, headers=headers)
    r = c.getresponse()
    return r.status, r.read(), dict(r.getheaders())


def start_nginx(tmp, reply, content_type, extra_header):
    """nginx answering every request on NGX_PORT with `reply`: its cheapest answer
    (`return 200 '<reply>'`, no file, no error page) when the reply is text, a file otherwise."""
    hdr = f'add_header Inference-Header-Content-Length {extra_header};' if extra_header else ""
    try:
        text = reply.decode("ascii")
    except UnicodeDecodeError:
        text = None
    if text is not None and "'" not in text and "\\" not in text and "$" not in text:
        answer = f"return 200 '{text}';"
    else:
        with open(os.path.join(tmp, "reply.bin"), "wb") as f:
            f.write(reply)
        answer = "try_files /reply.bin =404; error_page 405 =200 /reply.bin;"
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
    location / {{ root {tmp}; default_type {content_type}; {hdr} {answer} }}
  }}
}}""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return p


def hold_connections(port, n):
    """A process holding n idle connections to port open until it is killed (after its first
    line of output, once they are all open)."""
    code = f"""
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
s = [socket.create_connection(("127.0.0.1", {port})) for _ in range({n})]
print(len(s), flush=True)
time.sleep(3600)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != str(n):
        p.kill()
        sys.exit(f"could not hold {n} connections open to port {port}")
    return p


def identity_requests():
    json_body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                        "data": VALUES}]}).encode()
    raw = struct.pack("<16f", *VALUES)
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 64}}],
                      "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    return [("JSON", json_body, {"Content-Type": "application/json"}),
            ("binary", hdr + raw, {"Content-Type": "application/octet-stream",
                                   "Inference-Header-Content-Length": str(len(hdr))})]


IDLE_CONNS = int(os.environ.get("BENCH_IDLE_CONNS", "10000"))
TRITON = {1: "Triton 2.51 p50 83 us", 16: "Triton 2.51 38k req/s"}  # environment.md


def http_rows(tmp):
    print(f"\nHTTP path, identity_fp32 16 floats, wrk -t1 against nginx returning nereid's reply "
          f"({ROUNDS} interleaved rounds); the c=16 row again with {IDLE_CONNS} idle connections "
          f"held open to nereid")
    goals = {("JSON", 1): ("<= 1.1", lambda r: r <= 1.1),
             ("JSON", 16): (">= 0.5", lambda r: r >= 0.5),
             ("JSON", "idle"): (">= 0.5", lambda r: r >= 0.5)}
    for name, body, headers in identity_requests():
        status, reply, rh = post(NR_PORT, body, headers)
        if status != 200:
            sys.exit(f"nereid answered {status}: {reply[:200]}")
        lua = os.path.join(tmp, f"{name}.lua")
        write_lua(lua, headers, body=body)
        ngx = start_nginx(tmp, reply, rh.get("Content-Type", "application/json"),
                          rh.get("Inference-Header-Content-Length"))
        try:
            for conns, idle in ((1, 0), (16, 0), (16, IDLE_CONNS)):
                if idle and name != "JSON":
                    continue
                ratios, nr_all, ng_all = [], [], []
                for _ in range(ROUNDS):
                    ng = wrk(NGX_PORT, IDENTITY, lua, conns, SECS, threads=1)
                    holder = hold_connections(NR_PORT, idle) if idle else None
                    try:
                        nr = wrk(NR_PORT, IDENTITY, lua, conns, SECS, threads=1)
                    finally:
                        if holder:
                            holder.kill()
                            holder.wait()
                    ratios.append(nr[1] / ng[1] if conns == 1 else nr[0] / ng[0])
                    nr_all.append(nr)
                    ng_all.append(ng)
                goal, ok = goals.get((name, "idle" if idle else conns), ("report", None))
                what = "p50" if conns == 1 else "req/s"
                fmt = (lambda r: f"p50 {r[1]:.0f} us (p99 {r[2]:.0f}), {r[0]:.0f} req/s")
                mid = lambda xs: tuple(med(x[i] for x in xs) for i in range(3))
                where = f", {idle} idle connections open" if idle else ""
                vs = f"; {TRITON[conns]}" if name == "JSON" else ""
                row(f"identity_fp32 {name} c={conns} {what}{where} (reply {len(reply)} B; "
                    f"{rounds_str(ratios)})", fmt(mid(nr_all)) + vs, "nginx " + fmt(mid(ng_all)),
                    med(ratios), goal, ok(med(ratios)) if ok else None)
        finally:
            ngx.send_signal(signal.SIGQUIT)
            ngx.wait()


def print_table():
    print_rows(ROWS)


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-bench-")
    os.chmod(tmp, 0o755)  # nginx workers run as an unprivileged user
    t0 = time.time()
    try:
        if not ONLY:
            startup_rows(tmp)
        srv = start_server(REPO, NR_PORT)
        try:
            if not ONLY:
                outside_compute_rows()
                cnn_rows(tmp, srv)
                perf_analyzer_row()
            http_rows(tmp)
        finally:
            stop_server(srv)
        if os.environ.get("BENCH_CALLGRIND", "1") != "0" and not ONLY:
            print("\ninstructions per request under callgrind (identity_fp32 JSON, 1,000 requests)")
            ir, parts = callgrind.instructions_per_request(tmp, 1000)
            row("instructions per request in the server, identity_fp32 JSON",
                f"{ir:,.0f} ({parts})", "-", None, "report")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n## make bench, {time.strftime('%Y-%m-%d %H:%M')}, {time.time() - t0:.0f} s, "
          f"{os.cpu_count()} CPUs, defaults of `make run`")
    print_table()


if __name__ == "__main__":
    main()
