#!/usr/bin/env python3
"""make bench, part 2: the gRPC frontend and the metrics endpoint of issue #17, each against a
baseline from the same run, interleaved rounds, medians of the per-round figures.

- identity_fp32 (16 floats, binary tensors both ways) over HTTP (wrk, one connection per request
  in flight) and over gRPC, unary and streaming (bench/grpc_load.c: gRPC's own C client, one
  connection per request in flight, a stream per in-flight slot that writes its next request
  when the previous response arrived, as perf_analyzer --streaming does), at concurrency 1 and
  16, against one server that serves both protocols. Goals: gRPC unary at c=16 at least HTTP's
  requests/s; streaming at least 1.5x unary.
- The cost of metrics: the same HTTP and gRPC loads at c=16 against a server with metrics on
  (the default, scraped every second during the run as Prometheus would) and one started with
  --allow-metrics=false, which goes first alternating between rounds. Goal: within 2%.
- The cost of tracing (issue #39): the same loads at c=16 against a server tracing at Triton's
  default rate (--trace-config level=TIMESTAMPS, rate=1000, a file), one exporting its spans at
  that rate to an OTLP collector in this process (mode opentelemetry) and one without tracing,
  alternating the order; the figure is the server's own CPU per request (/proc). Goal: within
  3%. A server tracing every request (rate=1) is reported beside them.
- For scale (environment.md): Triton 2.51 over gRPC on this machine class, perf_analyzer as the
  client, 4.7k infer/s at c=1 and 14.5k at c=16.

    .venv/bin/python bench/protocols.py      # BENCH_ROUNDS=3 BENCH_SECONDS=5 BENCH_ONLY=trace
"""
import os, re, shutil, statistics, struct, subprocess, sys, tempfile, threading, time
import urllib.request

from benchlib import (NEREID, REPO, ROOT, cpu_seconds, print_rows, start_server, stop_server, wrk,
                      write_lua)

GRPC_LOAD = os.path.join(ROOT, "build/bin/bench-grpc-load")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("BENCH_SECONDS", "5"))
PATH = "/v2/models/identity_fp32/infer"
SVC = "/inference.GRPCInferenceService/"
med = statistics.median
ROWS = []


def row(figure, value, baseline, ratio, goal, met=None):
    ROWS.append((figure, value, baseline, ratio, goal, met))
    r = f"{ratio:.3f}" if ratio is not None else "-"
    print(f"  {figure}: {value} | baseline {baseline} | ratio {r} | goal {goal}", flush=True)


def requests(tmp):
    """The HTTP wrk script and the serialized gRPC request, 16 floats each way, binary."""
    import json
    from tritonclient.grpc import service_pb2
    values = [float(i) / 10 for i in range(16)]
    raw = struct.pack("<16f", *values)
    hdr = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 64}}],
                      "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
                     ).encode()
    lua = os.path.join(tmp, "identity.lua")
    write_lua(lua, {"Content-Type": "application/octet-stream",
                    "Inference-Header-Content-Length": str(len(hdr))}, body=hdr + raw)
    req = service_pb2.ModelInferRequest(model_name="identity_fp32")
    req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 16])
    req.raw_input_contents.append(raw)
    bin_path = os.path.join(tmp, "identity.grpc")
    with open(bin_path, "wb") as f:
        f.write(req.SerializeToString())
    return lua, bin_path


def grpc_load(port, req, mode, conc, seconds, conns=None):
    """(requests/s, p50 us, p99 us) of bench-grpc-load (conns: connections, default one per
    request in flight)."""
    method = SVC + ("ModelInfer" if mode == "unary" else "ModelStreamInfer")
    out = subprocess.run([GRPC_LOAD, "-m", mode, "-c", str(conc), "-k", str(conns or conc),
                          "-d", str(seconds), "-f", req, f"127.0.0.1:{port}", method],
                         capture_output=True, text=True)
    m = dict(re.findall(r"(\w+)=([\d.]+)", out.stdout))
    if out.returncode != 0 or not m or float(m["errors"]) > 0:
        sys.exit(f"bench-grpc-load failed:\n{out.stdout}{out.stderr}")
    return float(m["rps"]), float(m["p50_us"]), float(m["p99_us"])


def fmt(r):
    return f"{r[0]:.0f} req/s, p50 {r[1]:.0f} us, p99 {r[2]:.0f} us"


def mid(xs):
    return tuple(med(x[i] for x in xs) for i in range(3))


def protocol_rows(lua, req):
    http_port, grpc_port, metrics_port = 18600, 18601, 18602
    srv = start_server(REPO, http_port, f"--grpc-port={grpc_port}",
                       "--grpc-address=127.0.0.1", *metrics_args(metrics_port))
    try:
        print(f"\nidentity_fp32 16 floats, HTTP (wrk) vs gRPC (bench-grpc-load), {ROUNDS} "
              f"interleaved rounds of {SECS} s")
        for conc in (1, 16):
            h, u, s = [], [], []
            for _ in range(ROUNDS):
                h.append(wrk(http_port, PATH, lua, conc, SECS))
                u.append(grpc_load(grpc_port, req, "unary", conc, SECS))
                s.append(grpc_load(grpc_port, req, "stream", conc, SECS))
            ru = [a[0] / b[0] for a, b in zip(u, h)]
            rs = [a[0] / b[0] for a, b in zip(s, u)]
            goal_u = ">= 1.0" if conc == 16 else "report"
            row(f"gRPC unary c={conc} (rounds {', '.join(f'{x:.3f}' for x in ru)})",
                fmt(mid(u)), "HTTP " + fmt(mid(h)), med(ru), goal_u,
                med(ru) >= 1.0 if conc == 16 else None)
            goal_s = ">= 1.5" if conc == 16 else "report"
            row(f"gRPC streaming c={conc} (rounds {', '.join(f'{x:.3f}' for x in rs)})",
                fmt(mid(s)), "gRPC unary " + fmt(mid(u)), med(rs), goal_s,
                med(rs) >= 1.5 if conc == 16 else None)
        # gRPC clients usually multiplex their calls over one connection (a channel)
        u1, s1 = [], []
        for _ in range(ROUNDS):
            u1.append(grpc_load(grpc_port, req, "unary", 16, SECS, conns=1))
            s1.append(grpc_load(grpc_port, req, "stream", 16, SECS, conns=1))
        r1 = [a[0] / b[0] for a, b in zip(s1, u1)]
        row(f"gRPC streaming c=16, one connection (rounds {', '.join(f'{x:.3f}' for x in r1)})",
            fmt(mid(s1)), "gRPC unary, one connection " + fmt(mid(u1)), med(r1), "report")
    finally:
        stop_server(srv)


def metrics_args(port):
    """--metrics-port where this build serves metrics (its --help says so), else nothing."""
    help_text = subprocess.run([NEREID, "--help"], capture_output=True, text=True)
    text = help_text.stdout + help_text.stderr
    line = next((l for l in text.splitlines() if "--metrics-port" in l), "")
    return [f"--metrics-port={port}"] if line and "not implemented" not in line else []


class Scraper(threading.Thread):
    """GETs /metrics every second, as Prometheus would."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.n = port, threading.Event(), 0

    def run(self):
        while not self.stop.wait(1.0):
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics") as r:
                r.read()
                self.n += 1


def metrics_rows(lua, req):
    on_args = metrics_args(18612)
    if not on_args:
        print("\nmetrics: this build serves no metrics endpoint; skipped")
        return
    print(f"\nmetrics on (scraped every second) vs --allow-metrics=false, c=16, {ROUNDS} rounds")
    on = start_server(REPO, 18610, "--grpc-port=18611", "--grpc-address=127.0.0.1", *on_args)
    off = start_server(REPO, 18620, "--grpc-port=18621", "--grpc-address=127.0.0.1",
                       "--allow-metrics=false")
    try:
        for proto in ("HTTP", "gRPC unary"):
            a, b = [], []
            for rnd in range(ROUNDS):
                for srv_on in ((True, False) if rnd % 2 == 0 else (False, True)):
                    scraper = Scraper(18612) if srv_on else None
                    if scraper:
                        scraper.start()
                    if proto == "HTTP":
                        r = wrk(18610 if srv_on else 18620, PATH, lua, 16, SECS)
                    else:
                        r = grpc_load(18611 if srv_on else 18621, req, "unary", 16, SECS)
                    if scraper:
                        scraper.stop.set()
                        scraper.join()
                    (a if srv_on else b).append(r)
            ratios = [x[0] / y[0] for x, y in zip(a, b)]
            row(f"{proto} c=16 with metrics on (rounds {', '.join(f'{x:.3f}' for x in ratios)})",
                fmt(mid(a)), "metrics off " + fmt(mid(b)), med(ratios), ">= 0.98",
                med(ratios) >= 0.98)
    finally:
        stop_server(on)
        stop_server(off)


def collector():
    """An OTLP/HTTP collector that takes every export (200, body ignored): (server, url)."""
    import http.server
    import socketserver

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1/traces"


def trace_rows(lua, req, tmp):
    """Server CPU per request with tracing at rate 1000 (triton mode; opentelemetry mode
    exporting to a collector in this process) and at rate 1, against tracing off."""
    print(f"\ntracing (level TIMESTAMPS, a file) vs off, c=16, {ROUNDS} rounds, server CPU per "
          f"request")
    on = lambda rate: ("--trace-config=level=TIMESTAMPS", f"--trace-config=rate={rate}",  # noqa
                       f"--trace-config=triton,file={tmp}/trace{rate}.json",
                       "--trace-config=triton,log-frequency=1000")
    srvs = {"off": start_server(REPO, 18630, "--grpc-port=18631", "--grpc-address=127.0.0.1",
                                "--allow-metrics=false"),
            "1000": start_server(REPO, 18640, "--grpc-port=18641", "--grpc-address=127.0.0.1",
                                 "--allow-metrics=false", *on(1000)),
            "1": start_server(REPO, 18650, "--grpc-port=18651", "--grpc-address=127.0.0.1",
                              "--allow-metrics=false", *on(1))}
    httpd, url = collector()
    srvs["otel 1000"] = start_server(
        REPO, 18660, "--grpc-port=18661", "--grpc-address=127.0.0.1", "--allow-metrics=false",
        "--trace-config=mode=opentelemetry", f"--trace-config=opentelemetry,url={url}",
        "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1000")
    ports = {"off": 18630, "1000": 18640, "1": 18650, "otel 1000": 18660}
    try:
        for proto in ("HTTP", "gRPC unary"):
            res = {k: [] for k in srvs}
            for rnd in range(ROUNDS):
                order = list(srvs) if rnd % 2 == 0 else list(reversed(srvs))
                for k in order:
                    pid = srvs[k].pid
                    c0 = cpu_seconds(pid)
                    if proto == "HTTP":
                        r = wrk(ports[k], PATH, lua, 16, SECS)
                    else:
                        r = grpc_load(ports[k] + 1, req, "unary", 16, SECS)
                    us = (cpu_seconds(pid) - c0) / (r[0] * SECS) * 1e6
                    res[k].append((r[0], us))
            for k, goal in (("1000", "<= 1.03"), ("otel 1000", "<= 1.03"), ("1", "report")):
                ratios = [a[1] / b[1] for a, b in zip(res[k], res["off"])]
                v = med(x[1] for x in res[k])
                base = med(x[1] for x in res["off"])
                what = {"1000": "tracing rate=1000", "1": "tracing rate=1",
                        "otel 1000": "opentelemetry export, rate=1000"}[k]
                row(f"{proto} c=16 server CPU/request, {what} (rounds "
                    f"{', '.join(f'{x:.3f}' for x in ratios)})",
                    f"{v:.1f} us ({med(x[0] for x in res[k]):.0f} req/s)",
                    f"off {base:.1f} us ({med(x[0] for x in res['off']):.0f} req/s)",
                    med(ratios), goal, med(ratios) <= 1.03 if goal != "report" else None)
    finally:
        for p in srvs.values():
            stop_server(p)
        httpd.shutdown()


def main():
    only = os.environ.get("BENCH_ONLY")  # "protocols", "metrics" or "trace"
    if not os.path.exists(GRPC_LOAD):
        sys.exit(f"{GRPC_LOAD} missing: `make {os.path.relpath(GRPC_LOAD, ROOT)}`")
    tmp = tempfile.mkdtemp(prefix="nereid-bench-grpc-")
    t0 = time.time()
    try:
        lua, req = requests(tmp)
        if only in (None, "protocols"):
            protocol_rows(lua, req)
        if only in (None, "metrics"):
            metrics_rows(lua, req)
        if only in (None, "trace"):
            trace_rows(lua, req, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n## bench/protocols.py, {time.strftime('%Y-%m-%d %H:%M')}, {time.time() - t0:.0f} s, "
          f"{os.cpu_count()} CPUs")
    print_rows(ROWS)


if __name__ == "__main__":
    main()
