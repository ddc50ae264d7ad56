"""nereid-perf (issue #19), perf_analyzer's drop-in, against the real server and against
perf_analyzer 2.51 itself (scripts/perf_analyzer) on the same server: the same console lines
(numbers aside), the same CSV columns, the same errors and exit codes; batch sizes, shapes,
and the number of requests in flight. `-s 1000` makes every measurement "stable": these tests
check behaviour, never speed."""
import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

import models

ROOT = Path(__file__).resolve().parents[2]
PA = ROOT / "scripts" / "perf_analyzer"
PERF = Path(os.environ.get("NEREID_BIN") or ROOT / "build" / "bin" / "nereid").parent / "nereid-perf"
EXAMPLES = ROOT / "examples" / "model_repository"
FAST = ["-p", "200", "-s", "1000"]


def run(tool, args, timeout=180):
    return subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=timeout)


def template(text):
    """The output with every number replaced: what must be the same line for line. The
    rate-mode lines about delayed sends depend on the machine's timing, not on the tool, and
    so does how many windows (-v's "Pass [N]" lines) a level takes to settle: a run of them
    counts as one."""
    out = []
    for l in re.sub(r"\d+(\.\d+)?(e[+-]\d+)?", "N", text).splitlines():
        if "of the requests were delayed" in l or "Avg send request rate" in l:
            continue
        if l.lstrip().startswith("Pass [N]") and out and out[-1] == l:
            continue
        out.append(l)
    return out


@pytest.fixture(scope="module")
def url(small_server):
    return f"127.0.0.1:{small_server.port}"


@pytest.fixture(scope="module")
def grpc_url(small_server):
    return small_server.grpc_url


@pytest.mark.parametrize("args", [
    ["--concurrency-range", "1:2"],
    ["-v", "--percentile=95"],
    ["-b", "2", "--measurement-mode", "count_windows", "--measurement-request-count", "20"],
    ["--request-rate-range", "100:200:100", "--request-distribution", "poisson", "-v"],
    ["--collect-metrics", "--metrics-interval", "100", "--concurrency-range", "1:2"],
    ["--request-count", "40", "--concurrency-range", "4", "--percentile=95"],
    ["--request-intervals", "@intervals", "-v"],
    ["--concurrency-range", "2"],  # no end written: no limits in the settings
    ["--request-rate-range", "200"],
])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_output_matches_perf_analyzer_line_for_line(url, grpc_url, small_server, tmp_path, args,
                                                     protocol):
    out = {}
    u = grpc_url if protocol == "grpc" else url
    if "--collect-metrics" in args:  # Model Analyzer's flags; no GPU series on this server
        args = args + ["--metrics-url", f"127.0.0.1:{small_server.metrics_port}/metrics"]
    if "@intervals" in args:  # 1000 2000 500 us: 857 requests/s
        (tmp_path / "intervals.txt").write_text("1000\n2000\n500\n")
        args = [str(tmp_path / "intervals.txt") if a == "@intervals" else a for a in args]
    for name, tool in (("pa", PA), ("perf", PERF)):
        csv = tmp_path / f"{name}.csv"
        argv = ["-m", "simple", "-u", u, "-i", protocol, *FAST, "-f", str(csv), "--verbose-csv",
                *args]
        try:
            r = run(tool, argv)
        except subprocess.TimeoutExpired:
            if tool != PA:
                raise
            # perf_analyzer 2.51 itself once never ended a run (CI, ASan server,
            # --request-count 40 at c=4, 180 s): the reference gets one more try, ours none
            r = run(tool, argv)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        out[name] = (r.stdout, csv.read_text().splitlines())
    assert template(out["perf"][0]) == template(out["pa"][0]), out["perf"][0]
    assert out["perf"][1][0] == out["pa"][1][0]  # the CSV header
    assert len(out["perf"][1]) == len(out["pa"][1])
    assert [template(l) for l in out["perf"][1][1:]] == [template(l) for l in out["pa"][1][1:]]


def test_the_figures_are_the_servers(url, tmp_path):
    """-b 2: every request carries 2 inferences; the Server block is the server's statistics
    over the reported windows, so its counts match the client's."""
    r = run(PERF, ["-m", "simple", "-u", url, *FAST, "-b", "2"])
    assert r.returncode == 0, r.stderr
    req = int(re.search(r"Request count: (\d+)", r.stdout).group(1))
    thr = float(re.search(r"Throughput: ([\d.e+]+) infer/sec", r.stdout).group(1))
    inf = int(re.search(r"Inference count: (\d+)", r.stdout).group(1))
    ok = int(re.search(r"Successful request count: (\d+)", r.stdout).group(1))
    assert req > 0 and thr > 0
    assert inf == 2 * ok
    # the statistics are read just after each window: requests ending in between land in the
    # server's count of the window before the client's (perf_analyzer shows the same skew)
    assert abs(ok - req) <= max(8, req // 20), r.stdout


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model,extra", [
    ("nosuch", []),                       # unknown model
    ("identity_fp32", []),                # a -1 dim without --shape
    ("simple", ["-b", "9"]),              # refused by the server: batch above max_batch_size
    ("simple", ["-r", "1"]),              # cannot be stable in one window
    ("simple", ["--bogus"]),              # an unknown flag
])
def test_errors_and_exit_codes_match_perf_analyzer(url, grpc_url, model, extra, protocol):
    got = {}
    u = grpc_url if protocol == "grpc" else url
    for name, tool in (("pa", PA), ("perf", PERF)):
        r = run(tool, ["-m", model, "-u", u, "-i", protocol, *FAST, *extra])
        err = [l for l in r.stderr.splitlines()
               if l and not l.startswith(("\t", " ", "nereid-perf: "))]  # nereid-perf's own lines
        if extra == ["--bogus"]:  # getopt names the program; the usage texts differ
            err = [re.sub(r"^\S+: ", "", l) for l in err[:1]]
        got[name] = (r.returncode, err)
    assert got["perf"] == got["pa"], got


def test_an_unstable_step_says_why(url):
    r = run(PERF, ["-m", "simple", "-u", url, "-p", "200", "-r", "1"])
    assert r.returncode == 2
    assert "nereid-perf: 1 window measured, 3 needed (--max-trials 1)" in r.stderr, r.stderr
    r = run(PERF, ["-m", "simple", "-u", url, "-p", "100", "-r", "3", "-s", "0"])
    if r.returncode == 2:  # three windows exactly alike pass even -s 0
        assert re.search(r"nereid-perf: over the last 3 windows throughput varied by [\d.]+% and "
                         r"average latency by [\d.]+% \(max/min; --stability-percentage 0 "
                         r"allows 0%\)", r.stderr), r.stderr


@pytest.mark.load_threads
def test_request_rate_mode_sends_at_the_rate(url):
    """Open loop: the requests the server counted over the reported windows match the rate
    asked for (within 25 %: the windows are cut by the clock, the sends by the schedule)."""
    r = run(PERF, ["-m", "simple", "-u", url, "-p", "1000", "-s", "1000",
                   "--request-rate-range", "200"])
    assert r.returncode == 0, r.stderr
    thr = float(re.search(r"Request Rate: 200, throughput: ([\d.e+]+) infer/sec", r.stdout).group(1))
    assert 150 <= thr <= 250, r.stdout


@pytest.mark.skipif(not (EXAMPLES / "densenet_onnx/1/model.onnx").exists(),
                    reason="run `make models` first")
def test_request_rate_mode_counts_late_sends(server_factory):
    """One sending thread, a model of tens of ms, 100 requests/s asked: most sends leave late,
    are counted as delayed, and their latency runs from the scheduled time, so it grows with
    the backlog instead of staying at the model's time."""
    srv = server_factory([EXAMPLES], ["--exit-on-error=false"])
    r = run(PERF, ["-m", "densenet_onnx", "-u", f"127.0.0.1:{srv.port}", "-p", "1000",
                   "-s", "1000", "-r", "3", "--request-rate-range", "100", "--max-threads", "1"])
    assert r.returncode == 0, r.stderr
    pct = float(re.search(r"([\d.]+)% of the requests were delayed", r.stdout).group(1))
    assert pct > 50, r.stdout
    avg = int(re.search(r"Avg latency: (\d+) usec", r.stdout).group(1))
    http = int(re.search(r"Avg HTTP time: (\d+) usec", r.stdout).group(1))
    assert avg > 2 * http, r.stdout  # queued behind the schedule, not the request's own time


def test_refused_connection(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    for tool in (PA, PERF):
        r = run(tool, ["-m", "simple", "-u", f"127.0.0.1:{port}"])
        assert (r.returncode, r.stderr.strip()) == (
            99, "error: failed to get model metadata: HTTP client failed: Couldn't connect to "
                "server"), (tool, r.stderr)
        r = run(tool, ["-m", "simple", "-u", f"127.0.0.1:{port}", "-i", "grpc"])
        assert r.returncode == 99, (tool, r.stderr)
        assert r.stderr.startswith("error: failed to get model metadata: failed to connect to all "
                                   "addresses"), (tool, r.stderr)


def test_shape_and_input_data(url):
    r = run(PERF, ["-m", "identity_fp32", "-u", url, *FAST, "--shape", "INPUT0:16",
                   "--input-data", "zero"])
    assert r.returncode == 0, r.stderr
    assert int(re.search(r"Successful request count: (\d+)", r.stdout).group(1)) > 0


@pytest.mark.parametrize("data", ["zero", "random"])
def test_input_data_is_perf_analyzers(url, tmp_path, data):
    """--input-data zero|random sends perf_analyzer's kind of data, as both tools'
    --profile-export-file show it: zeros, or uniform random bytes (INT32 over its full range,
    so negative values and values past 2^30) in one buffer every input shares (simple's INPUT0
    and INPUT1 equal). A compute-bound model runs at a speed that depends on the values, so the
    two tools measure the same server alike only with the same kind (docs/perf.md)."""
    import json
    for name, tool in (("pa", PA), ("perf", PERF)):
        f = tmp_path / f"{name}.json"
        r = run(tool, ["-m", "simple", "-u", url, "--request-count", "3", "--input-data", data,
                       "--profile-export-file", str(f)])
        assert r.returncode == 0, (name, r.stdout + r.stderr)
        for q in json.loads(f.read_text())["experiments"][0]["requests"]:
            a, b = q["request_inputs"]["INPUT0"], q["request_inputs"]["INPUT1"]
            assert a == b and len(a) == 16, (name, q)
            if data == "zero":
                assert a == [0] * 16, (name, a)
            else:
                assert min(a) < 0 and max(abs(x) for x in a) >= 2**30, (name, a)


def connections_of(pid, port):
    """ESTABLISHED TCP connections of process pid to 127.0.0.1:port."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            t = os.readlink(fd)
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    n = 0  # gRPC's sockets are IPv6 ones, with 127.0.0.1 as a v4-mapped address
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "01" and int(f[2].split(":")[1], 16) == port and f[9] in inodes:
                n += 1
    return n


@pytest.mark.load_threads
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrency_n_keeps_n_connections_busy(small_server, protocol):
    """Concurrency 3: three load connections (one request in flight on each, back to back),
    plus the one that reads statistics. Over gRPC the three slots are driven by one thread on
    one completion queue, each with its own channel."""
    port = small_server.grpc_port if protocol == "grpc" else small_server.port
    p = subprocess.Popen([str(PERF), "-m", "simple", "-u", f"127.0.0.1:{port}", "-i", protocol,
                          "-p", "1500", "-s", "1000", "--concurrency-range", "3"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and p.poll() is None:
            seen.append(connections_of(p.pid, port))
            time.sleep(0.1)
        assert max(seen) == 4, seen
    finally:
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "Concurrency: 3, throughput:" in out


@pytest.mark.skipif(not (EXAMPLES / "densenet_onnx/1/model.onnx").exists(),
                    reason="run `make models` first")
def test_latency_threshold_ends_the_sweep(server_factory, tmp_path):
    """densenet_onnx takes tens of ms: with -l 1 the first level is over the limit, dropped,
    and the sweep ends there, as perf_analyzer does."""
    srv = server_factory([EXAMPLES], ["--exit-on-error=false"])
    got = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        r = run(tool, ["-m", "densenet_onnx", "-u", f"127.0.0.1:{srv.port}", "-p", "300",
                       "-s", "1000", "-l", "1", "--concurrency-range", "1:3"])
        got[name] = (r.returncode, [l for l in r.stderr.splitlines() if l],
                     template(r.stdout))
    assert got["perf"] == got["pa"], got


def test_json_report_and_plot(url, tmp_path):
    """--json: each step's figures and its whole histogram, consistent with the console;
    --plot: an SVG with a point per step."""
    import json
    import xml.etree.ElementTree as ET
    rep, svg = tmp_path / "r.json", tmp_path / "p.svg"
    r = run(PERF, ["-m", "simple", "-u", url, *FAST, "--concurrency-range", "1:2",
                   "--json", str(rep), "--plot", str(svg)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(rep.read_text())
    assert (doc["model"], doc["protocol"], doc["mode"]) == ("simple", "http", "concurrency")
    assert [s["concurrency"] for s in doc["steps"]] == [1, 2]
    counts = [int(c) for c in re.findall(r"Request count: (\d+)", r.stdout)]
    p50s = [int(c) for c in re.findall(r"p50 latency: (\d+) usec", r.stdout)]
    for s, count, p50 in zip(doc["steps"], counts, p50s):
        assert s["requests"] == count
        assert sum(b[2] for b in s["histogram_ns"]) == count
        assert all(lo <= hi for lo, hi, _ in s["histogram_ns"])
        assert int(s["latency_us"]["p50"]) == p50
        assert s["latency_us"]["min"] <= s["latency_us"]["p50"] <= s["latency_us"]["p99.9"] \
            <= s["latency_us"]["max"]
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}circle")) == 2
    labels = [t.text for t in root.findall(f"{ns}text")]
    assert "c=1" in labels and "c=2" in labels


def test_plot_refuses_other_formats(url, tmp_path):
    r = run(PERF, ["-m", "simple", "-u", url, "--plot", str(tmp_path / "p.png")])
    assert r.returncode == 99 and "--plot writes SVG" in r.stderr


def test_collect_metrics_reads_the_gpu_series(url, tmp_path):
    """--collect-metrics against a Prometheus endpoint with two GPUs' series (a stand-in for a
    GPU server's: CI has no GPU): utilization and power averaged over the polls, memory used at
    its maximum, total memory; the console block and the four verbose CSV cells as
    perf_analyzer writes them."""
    import http.server
    polls = []

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            n = len(polls)
            polls.append(n)
            used = 1000 + 10 * n
            body = "".join(
                f'nv_gpu_utilization{{gpu_uuid="GPU-{g}"}} {0.5 / (g + 1)}\n'
                f'nv_gpu_power_usage{{gpu_uuid="GPU-{g}"}} {100 + g}\n'
                f'nv_gpu_memory_used_bytes{{gpu_uuid="GPU-{g}"}} {used}\n'
                f'nv_gpu_memory_total_bytes{{gpu_uuid="GPU-{g}"}} 80000\n'
                for g in range(2)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        csv = tmp_path / "m.csv"
        r = run(PERF, ["-m", "simple", "-u", url, *FAST, "--collect-metrics", "--metrics-url",
                       f"127.0.0.1:{srv.server_address[1]}/metrics", "--metrics-interval", "50",
                       "--verbose-csv", "-f", str(csv)])
    finally:
        srv.shutdown()
    assert r.returncode == 0, r.stderr
    assert "Unable to parse" not in r.stderr
    block = r.stdout[r.stdout.index("  Server Prometheus Metrics: "):].splitlines()
    assert block[1:3] == ["    Avg GPU Utilization:", "      GPU-0 : 50%"], block
    assert block[3] == "      GPU-1 : 25%", block
    assert block[4:7] == ["    Avg GPU Power Usage:", "      GPU-0 : 100 watts",
                          "      GPU-1 : 101 watts"], block
    assert block[7] == "    Max GPU Memory Usage:"
    used = int(re.match(r"      GPU-0 : (\d+) bytes", block[8]).group(1))
    assert used >= 1000 + 10 * 2 and (used - 1000) % 10 == 0  # a later poll's, the maximum
    assert block[10:13] == ["    Total GPU Memory:", "      GPU-0 : 80000 bytes",
                            "      GPU-1 : 80000 bytes"], block
    head, row = csv.read_text().splitlines()
    cells = dict(zip(head.split(","), row.split(",")))
    assert cells["Avg GPU Utilization"] == "GPU-0:0.5;GPU-1:0.25;"
    assert cells["Total GPU Memory"] == "GPU-0:80000;GPU-1:80000;"


def test_report_unstable_keeps_sweeping(url):
    """--report-unstable: a level that -s 0 cannot call stable is reported with all its windows
    merged, says so, and the sweep goes on (perf_analyzer would end it, or exit 2)."""
    r = run(PERF, ["-m", "simple", "-u", url, "-p", "200", "-s", "0", "-r", "3",
                   "--concurrency-range", "1:2", "--report-unstable"])
    assert r.returncode == 0, r.stderr
    assert re.findall(r"Concurrency: (\d), throughput", r.stdout) == ["1", "2"], r.stdout
    for m in re.finditer(r"reporting all (\d+) windows of the level merged", r.stderr):
        assert m.group(1) == "3"


# ---- a stand-in server: what reaches the wire (the real server does not log tensors) ----

class StandIn:
    """An HTTP server answering GETs from `answers` (404 otherwise) and every POST with
    {"model_name": "m", "outputs": []}; on_post(path, headers, body) sees each POST first."""

    def __init__(self, answers, on_post):
        import http.server
        import json

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def reply(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200 if obj is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self.reply(answers.get(self.path))

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                on_post(self.path, self.headers, body)
                self.reply({"model_name": "m", "outputs": []})

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"127.0.0.1:{self.srv.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


# ---- --input-data <file.json> (perf_analyzer's real-data format) ----

def test_input_data_json_sends_each_entry_as_written(tmp_path):
    """Each "data" entry is one request, in turn: a flat array, a nested one, {"b64": ...} and
    {"content": ..., "shape": [...]} for a variable dimension, BYTES as strings, -b 2 sending
    the entry twice as one batch. What reaches the wire is read back by a stand-in HTTP server
    (it records the infer bodies; the real server does not log tensors)."""
    import base64
    import json
    import struct
    bodies = []
    meta = {"name": "m", "versions": ["1"], "platform": "x",
            "inputs": [{"name": "A", "datatype": "FP32", "shape": [-1, -1]},
                       {"name": "B", "datatype": "INT32", "shape": [-1, 3]},
                       {"name": "C", "datatype": "BYTES", "shape": [-1, 2]}],
            "outputs": [{"name": "Y", "datatype": "FP32", "shape": [-1, 1]}]}
    answers = {"/v2": {"name": "stand-in", "version": "0", "extensions": []},
               "/v2/models/m": meta, "/v2/models/m/config": {"name": "m", "max_batch_size": 8}}

    def on_post(path, headers, body):
        hl = int(headers["Inference-Header-Content-Length"])
        if len(bodies) < 50:
            bodies.append((json.loads(body[:hl]), body[hl:]))

    data = {"data": [
        {"A": {"content": [[1.5, 2.5], [3.5, 4.5]], "shape": [4]}, "B": [1, 2, 3],
         "C": ["ab", "xyz"]},
        {"A": {"content": {"b64": base64.b64encode(struct.pack("<2f", 7, 8)).decode()},
               "shape": [2]}, "B": [[4], [5], [6]], "C": {"b64": base64.b64encode(
                   struct.pack("<I", 1) + b"q" + struct.pack("<I", 0)).decode()}},
    ]}
    f = tmp_path / "data.json"
    f.write_text(json.dumps(data))
    with StandIn(answers, on_post) as srv:
        r = run(PERF, ["-m", "m", "-u", srv.url, "-p", "200", "-s", "1000", "-r", "3", "-b", "2",
                       "--input-data", str(f)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(" Successfully read data for 1 stream/streams with 2 step/steps.\n")
    s = lambda *x: b"".join(struct.pack("<I", len(v)) + v for v in x)
    want = [
        ([[2, 4], [2, 3], [2, 2]], struct.pack("<4f", 1.5, 2.5, 3.5, 4.5) * 2,
         struct.pack("<3i", 1, 2, 3) * 2, s(b"ab", b"xyz") * 2),
        ([[2, 2], [2, 3], [2, 2]], struct.pack("<2f", 7, 8) * 2, struct.pack("<3i", 4, 5, 6) * 2,
         s(b"q", b"") * 2),
    ]
    seen = []
    for head, raw in bodies:
        shapes = [i["shape"] for i in head["inputs"]]
        sizes = [i["parameters"]["binary_data_size"] for i in head["inputs"]]
        parts, at = [], 0
        for n in sizes:
            parts.append(raw[at:at + n])
            at += n
        assert at == len(raw)
        seen.append((shapes, *parts))
    assert len(seen) >= 2 and all(x in want for x in seen), seen[:2]
    assert seen[0] != seen[1]  # one worker (c=1) takes the entries in turn


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_input_data_json_against_the_server(url, grpc_url, tmp_path, protocol):
    """identity_fp32 (a variable dimension) with each entry's own shape: the server accepts
    every request; perf_analyzer 2.51 reads the same file with the same line. (perf_analyzer
    wants FP32 data written as reals, "unable to find float data in json" for 1 instead of
    1.0; nereid-perf takes either.)"""
    import json
    f = tmp_path / "id.json"
    f.write_text(json.dumps({"data": [
        {"INPUT0": {"content": [1.5, 2.5, 3.5, 4.5], "shape": [4]}},
        {"INPUT0": {"content": [k + 0.5 for k in range(16)], "shape": [16]}}]}))
    u = grpc_url if protocol == "grpc" else url
    out = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        r = run(tool, ["-m", "identity_fp32", "-u", u, "-i", protocol, *FAST, "--input-data",
                       str(f)])
        assert r.returncode == 0, (name, r.stdout + r.stderr)
        out[name] = r.stdout
        assert int(re.search(r"Successful request count: (\d+)", r.stdout).group(1)) > 0
    line = " Successfully read data for 1 stream/streams with 2 step/steps."
    assert line in out["pa"].splitlines() and out["perf"].splitlines()[0] == line, out


@pytest.mark.parametrize("data,message", [
    ({"data": [{"INPUT0": [1, 2, 3]}]}, "data entry 0, input 'INPUT0': the model gives it a "
                                        "variable dimension"),
    ({"data": [{"INPUT0": {"content": [1, 2, 3], "shape": [4]}}]},
     "data entry 0, input 'INPUT0': 3 elements, where its shape needs 4"),
    ({"data": [{"INPUT0": {"content": [1], "shape": [1]}}, {}]},
     "data entry 1, input 'INPUT0': missing from the entry"),
    ({"data": [{"INPUT0": {"content": {"b64": "!!!!"}, "shape": [1]}}]}, "not valid base64"),
    ({"rows": []}, "expected {\"data\": [ {<input>: <value>, ...}, ... ]}"),
    ("not json", "--input-data"),
])
def test_input_data_json_errors_are_clear(url, tmp_path, data, message):
    import json
    f = tmp_path / "bad.json"
    f.write_text(data if isinstance(data, str) else json.dumps(data))
    r = run(PERF, ["-m", "identity_fp32", "-u", url, *FAST, "--input-data", str(f)])
    assert r.returncode != 0 and message in r.stderr, r.stderr


@pytest.mark.load_threads
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("args,n", [(["--concurrency-range", "3"], 60),
                                    (["--request-rate-range", "200"], 200)])
def test_request_count_sends_exactly_that_many(url, grpc_url, protocol, args, n):
    """--request-count N: one window of exactly N requests (no stability check), the server's
    counts agree, and the throughput is N over the window as perf_analyzer reports it."""
    u = grpc_url if protocol == "grpc" else url
    r = run(PERF, ["-m", "simple", "-u", u, "-i", protocol, "--request-count", str(n), *args])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"  Sending {n} benchmark requests\n" in r.stdout
    assert re.search(rf"^    Request count: {n}$", r.stdout, re.M), r.stdout
    assert re.search(rf"^    Successful request count: {n}$", r.stdout, re.M), r.stdout
    assert "Pass [" not in r.stdout and "stable" not in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--concurrency-range", "1:2"],
     "request-count not supported with multiple concurrency values in one run"),
    (["--request-rate-range", "10:20:10"],
     "request-count not supported with multiple request-rate values in one run"),
    (["--request-rate-range", "100"], "request-count can not be less than request-rate"),
])
def test_request_count_errors_match_perf_analyzer(url, args, message):
    for tool in (PA, PERF):
        r = run(tool, ["-m", "simple", "-u", url, "--request-count", "50", *args])
        assert r.returncode == 99 and f"Error: {message}" in r.stdout + r.stderr, (tool, r.stderr)


def test_request_count_settings_in_rate_mode_match_perf_analyzer(url):
    """The settings block of --request-count with a request rate, as perf_analyzer prints it
    (the measurement itself: test_request_count_sends_exactly_that_many)."""
    blocks = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        r = run(tool, ["-m", "simple", "-u", url, "--request-count", "120",
                       "--request-rate-range", "100", "--request-distribution", "poisson"])
        assert r.returncode == 0, (name, r.stderr)
        blocks[name] = r.stdout[:r.stdout.index("Request Rate: ")]
    assert blocks["perf"] == blocks["pa"], blocks
    assert "  Sending 120 benchmark requests\n  Using poisson distribution" in blocks["perf"]


# ---- --shared-memory system ----

def shm_status(url):
    import json
    import urllib.request
    with urllib.request.urlopen(f"http://{url}/v2/systemsharedmemory/status", timeout=10) as r:
        return json.loads(r.read())


def run_watching_regions(tool, args, url):
    """Runs tool; returns its result and the system regions the server held while it ran."""
    p = subprocess.Popen([str(tool), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    seen, deadline = [], time.time() + 120
    while p.poll() is None and time.time() < deadline:
        now = shm_status(url)
        seen = now if len(now) > len(seen) else seen
        time.sleep(0.02)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), seen


@pytest.mark.load_threads
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_shared_memory_regions_as_perf_analyzer(url, grpc_url, tmp_path, protocol):
    """--shared-memory system against the real server: the regions registered while the load
    runs (a region per input and data entry, the whole batch, and one per output) are the
    ones perf_analyzer 2.51 registers, names, keys and sizes; the server computes from them
    (its counts); they are unregistered and removed from /dev/shm at the end."""
    import json
    f = tmp_path / "simple.json"
    f.write_text(json.dumps({"data": [{"INPUT0": list(range(16)), "INPUT1": [1] * 16},
                                      {"INPUT0": [7] * 16, "INPUT1": list(range(16))}]}))
    u = grpc_url if protocol == "grpc" else url
    regions = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        r, seen = run_watching_regions(tool, ["-m", "simple", "-u", u, "-i", protocol, *FAST,
                                              "-b", "2", "--shared-memory", "system",
                                              "--input-data", str(f)], url)
        assert r.returncode == 0, (name, r.stdout + r.stderr)
        ok = int(re.search(r"Successful request count: (\d+)", r.stdout).group(1))
        inf = int(re.search(r"Inference count: (\d+)", r.stdout).group(1))
        assert ok > 0 and inf == 2 * ok, r.stdout
        regions[name] = sorted((x["name"], x["key"], x["byte_size"]) for x in seen)
        assert shm_status(url) == [], name
    assert regions["perf"] == regions["pa"], regions
    assert [x[0] for x in regions["perf"]] == [
        "INPUT0_0_0", "INPUT0_0_1", "INPUT1_0_0", "INPUT1_0_1", "OUTPUT0", "OUTPUT1"]
    assert all(x[1] == "/" + x[0] and x[2] == 2 * 16 * 4 for x in regions["perf"])
    assert not any(os.path.exists("/dev/shm/" + x[0]) for x in regions["perf"])


def test_shared_memory_requests_name_regions_holding_the_data(tmp_path):
    """What nereid-perf and perf_analyzer 2.51 send a stand-in server with --shared-memory
    system: every region unregistered first and last; each region registered with the same
    key and size (a fixed output: its size per batch; a variable or BYTES one:
    --output-shared-memory-size per batch element) and holding the same bytes (read from
    /dev/shm at the first infer request; perf_analyzer writes them after registering); infer
    requests naming the regions and carrying no tensor bytes."""
    import json
    meta = {"name": "m", "versions": ["1"], "platform": "x",
            "inputs": [{"name": "A", "datatype": "FP32", "shape": [-1, 4]},
                       {"name": "C", "datatype": "BYTES", "shape": [-1, 2]}],
            "outputs": [{"name": "Y", "datatype": "FP32", "shape": [-1, 3]},
                        {"name": "Z", "datatype": "FP32", "shape": [-1, -1]},
                        {"name": "S", "datatype": "BYTES", "shape": [-1, 1]}]}
    answers = {"/v2": {"name": "stand-in", "version": "0",
                       "extensions": ["system_shared_memory"]},
               "/v2/models/m": meta, "/v2/models/m/config": {"name": "m", "max_batch_size": 8}}
    f = tmp_path / "data.json"
    f.write_text(json.dumps({"data": [{"A": [1.5, 2.5, 3.5, 4.5], "C": ["ab", "xyz"]}]}))
    seen = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        log = {"calls": [], "regions": {}, "infers": []}

        def on_post(path, headers, body, log=log):
            if path.endswith("/infer"):
                if not log["infers"]:
                    for reg in log["regions"].values():
                        with open("/dev/shm" + reg[0]["key"], "rb") as shm:
                            reg.append(shm.read())
                if len(log["infers"]) < 5:
                    log["infers"].append((headers.get("Inference-Header-Content-Length"),
                                          json.loads(body)))
                return
            if "cudasharedmemory" in path:  # perf_analyzer's GPU build clears those too
                return
            log["calls"].append(path)
            if path.endswith("/register"):
                log["regions"][path.split("/")[-2]] = [json.loads(body)]

        with StandIn(answers, on_post) as srv:
            r = run(tool, ["-m", "m", "-u", srv.url, "-p", "200", "-s", "1000", "-r", "3",
                           "-b", "2", "--shared-memory", "system",
                           "--output-shared-memory-size", "1234", "--input-data", str(f)])
        assert r.returncode == 0, (name, r.stdout + r.stderr)
        seen[name] = log
    perf, pa = seen["perf"], seen["pa"]
    assert perf["calls"][0] == perf["calls"][-1] == "/v2/systemsharedmemory/unregister"
    assert sorted(perf["calls"]) == sorted(pa["calls"]), (perf["calls"], pa["calls"])
    assert perf["regions"] == pa["regions"]
    import struct
    assert perf["regions"]["A_0_0"] == [{"key": "/A_0_0", "offset": 0, "byte_size": 32},
                                        struct.pack("<4f", 1.5, 2.5, 3.5, 4.5) * 2]
    assert {k: v[0]["byte_size"] for k, v in perf["regions"].items()} == {
        "A_0_0": 32, "C_0_0": 2 * (4 + 2 + 4 + 3), "Y": 2 * 3 * 4, "Z": 2 * 1234, "S": 2 * 1234}
    hl, head = perf["infers"][0]
    assert int(hl) == len(json.dumps(head, separators=(",", ":")))  # the header is the body
    for part in ("inputs", "outputs"):
        want = {t["name"]: t["parameters"] for t in pa["infers"][0][1][part]}
        assert {t["name"]: t["parameters"] for t in head[part]} == want, head
    assert head["inputs"][0]["shape"] == [2, 4]


def test_shared_memory_errors(url, grpc_url):
    """An output region too small for the results: the server's error as perf_analyzer prints
    it, exit 99; nereid-perf still unregisters and removes its regions."""
    line = ("Thread [0] had error: shared memory size specified with the request for output "
            "'OUTPUT0' (10 bytes) should be at least 64 bytes to hold the results")
    for protocol, u in (("http", url), ("grpc", grpc_url)):
        for tool in (PERF, PA):
            r = run(tool, ["-m", "identity_fp32", "-u", u, "-i", protocol, *FAST,
                           "--shape", "INPUT0:16", "--shared-memory", "system",
                           "--output-shared-memory-size", "10"])
            assert r.returncode == 99 and line in r.stderr.splitlines(), (tool, r.stderr)
            if tool == PERF:
                assert shm_status(url) == []
                assert not os.path.exists("/dev/shm/OUTPUT0")
    for key in ("INPUT0_0_0", "OUTPUT0"):  # perf_analyzer leaves them after an error
        if os.path.exists("/dev/shm/" + key):
            os.unlink("/dev/shm/" + key)
    r = run(PERF, ["-m", "identity_fp32", "-u", url, "--shared-memory", "cuda"])
    assert r.returncode == 99 and "--shared-memory cuda is not supported" in r.stderr


# ---- --request-intervals ----

def test_request_intervals_are_sent_in_turn(tmp_path):
    """--request-intervals: the gaps between sends follow the file in turn, looped (2 ms then
    18 ms here, measured at a stand-in server: a constant rate would give 10 ms each), and
    the level is their mean rate, truncated as perf_analyzer shows it."""
    arrivals = []
    answers = {"/v2": {"name": "stand-in", "version": "0", "extensions": []},
               "/v2/models/m": {"name": "m", "inputs": [{"name": "A", "datatype": "FP32",
                                                          "shape": [1]}], "outputs": []},
               "/v2/models/m/config": {"name": "m", "max_batch_size": 0}}
    f = tmp_path / "intervals.txt"
    f.write_text("2000\n\n18000\n")
    with StandIn(answers, lambda *a: arrivals.append(time.monotonic())) as srv:
        r = run(PERF, ["-m", "m", "-u", srv.url, "-p", "1000", "-s", "1000", "-r", "3",
                       "--request-intervals", str(f)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^Request Rate: 100, throughput: [\d.]+ infer/sec", r.stdout, re.M), r.stdout
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    short = sum(g < 0.008 for g in gaps) / len(gaps)
    long = sum(g > 0.012 for g in gaps) / len(gaps)
    assert len(gaps) > 100 and short > 0.3 and long > 0.3, (short, long, len(gaps))


def test_request_intervals_errors(url, tmp_path):
    f = tmp_path / "intervals.txt"
    f.write_text("1000\n")
    for tool in (PA, PERF):  # perf_analyzer's texts
        r = run(tool, ["-m", "simple", "-u", url, "--request-intervals", str(tmp_path / "none")])
        assert r.returncode == 99 and "Error: Failed to parse --request-intervals. The value " \
            "must be a valid file path" in r.stdout + r.stderr, (tool, r.stderr)
        r = run(tool, ["-m", "simple", "-u", url, "--request-intervals", str(f),
                       "--concurrency-range", "2"])
        assert r.returncode == 99 and "Error: Cannot specify more then one inference load " \
            "mode." in r.stdout + r.stderr, (tool, r.stderr)
    # perf_analyzer 2.51 crashes on these two (std::invalid_argument; a segfault)
    f.write_text("1000\nabc\n")
    r = run(PERF, ["-m", "simple", "-u", url, "--request-intervals", str(f)])
    assert r.returncode == 99 and f"--request-intervals {f}: line 2: 'abc' is not a number of " \
        "microseconds" in r.stderr, r.stderr
    f.write_text("")
    r = run(PERF, ["-m", "simple", "-u", url, "--request-intervals", str(f)])
    assert r.returncode == 99 and f"file '{f}' is empty" in r.stderr, r.stderr


# ---- --profile-export-file ----

def int32(v):
    return (v + 2**31) % 2**32 - 2**31


@pytest.mark.load_threads
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_profile_export_as_perf_analyzer(url, grpc_url, tmp_path, protocol):
    """--profile-export-file: perf_analyzer's document (experiments with their mode and value,
    every request of the reported windows with its send and response times, inputs and
    outputs, the windows' boundaries), as many requests as the console counts, each answered
    inside the windows; the values are the ones sent and computed (simple: OUTPUT0 = INPUT0 +
    INPUT1, OUTPUT1 = INPUT0 - INPUT1); -b 2 gives one batch element's inputs and the whole
    batch's outputs, as perf_analyzer writes them."""
    import json
    u = grpc_url if protocol == "grpc" else url
    docs = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        f = tmp_path / f"{name}.json"
        r = run(tool, ["-m", "simple", "-u", u, "-i", protocol, *FAST, "--concurrency-range",
                       "1:2", "-b", "2", "--profile-export-file", str(f)])
        assert r.returncode == 0, (name, r.stdout + r.stderr)
        docs[name] = json.loads(f.read_text())
        counts = [int(c) for c in re.findall(r"Request count: (\d+)", r.stdout)]
        exps = docs[name]["experiments"]
        assert [e["experiment"] for e in exps] == [{"mode": "concurrency", "value": 1},
                                                   {"mode": "concurrency", "value": 2}]
        assert [len(e["requests"]) for e in exps] == counts, name
        for e in exps:
            b = e["window_boundaries"]
            assert len(b) == 4 and b == sorted(b), b
            for q in e["requests"]:
                assert b[0] <= q["response_timestamps"][0] <= b[-1], (name, q, b)
                assert q["timestamp"] <= q["response_timestamps"][0]
    pa, perf = docs["pa"], docs["perf"]
    assert sorted(perf) == sorted(pa) and perf["version"] == pa["version"] == "2.51.0"
    assert perf["service_kind"] == pa["service_kind"] and perf["endpoint"] == pa["endpoint"]
    for p, q in zip(perf["experiments"][0]["requests"][:3], pa["experiments"][0]["requests"]):
        assert sorted(p) == sorted(q) and len(p["response_outputs"]) == 1
        for part in ("request_inputs", "response_outputs"):
            first = lambda d: d if part == "request_inputs" else d[0]
            assert {k: len(v) for k, v in first(p[part]).items()} == \
                {k: len(v) for k, v in first(q[part]).items()}, part
    for e in perf["experiments"]:
        for q in e["requests"][:50]:
            a, b = q["request_inputs"]["INPUT0"], q["request_inputs"]["INPUT1"]
            out = q["response_outputs"][0]
            assert out["OUTPUT0"][:16] == [int32(x + y) for x, y in zip(a, b)]
            assert out["OUTPUT1"][:16] == [int32(x - y) for x, y in zip(a, b)]


def test_profile_export_rate_mode_and_shared_memory(url, tmp_path):
    """Rate mode is the "request_rate" experiment, valued as a real as perf_analyzer writes
    it; with --shared-memory system the outputs are in the regions, not in the responses, so
    each response's object is empty (perf_analyzer 2.51 writes stray numbers there)."""
    import json
    f = tmp_path / "p.json"
    r = run(PERF, ["-m", "simple", "-u", url, *FAST, "--request-rate-range", "200",
                   "--profile-export-file", str(f)])
    assert r.returncode == 0, r.stderr
    assert '{"experiment":{"mode":"request_rate","value":200.0}' in f.read_text()
    r = run(PERF, ["-m", "simple", "-u", url, "--request-count", "5", "--shared-memory",
                   "system", "--profile-export-file", str(f)])
    assert r.returncode == 0, r.stderr
    reqs = json.loads(f.read_text())["experiments"][0]["requests"]
    assert len(reqs) == 5 and all(q["response_outputs"] == [{}] for q in reqs)
    assert all(len(q["request_inputs"]["INPUT0"]) == 16 for q in reqs)


# ---- --binary-search ----

def test_binary_search_visits_as_perf_analyzer(tmp_path):
    """--binary-search against a stand-in whose latency is 3 ms per request in flight (so
    about 3c ms at concurrency c) with -l 14: the start (1, passes), the end (16, over), then
    the middles 8 (over), 4 (passes), 6 (over), 5 (over); the levels that passed are
    reported, in the order measured."""
    inflight = [0]
    lock = threading.Lock()

    def on_post(path, headers, body):
        with lock:
            inflight[0] += 1
            n = inflight[0]
        time.sleep(0.003 * n)
        with lock:
            inflight[0] -= 1

    answers = {"/v2": {"name": "stand-in", "version": "0", "extensions": []},
               "/v2/models/m": {"name": "m", "inputs": [{"name": "A", "datatype": "FP32",
                                                          "shape": [1]}], "outputs": []},
               "/v2/models/m/config": {"name": "m", "max_batch_size": 0}}
    with StandIn(answers, on_post) as srv:
        r = run(PERF, ["-m", "m", "-u", srv.url, "-p", "300", "-s", "1000", "-r", "3",
                       "--binary-search", "--concurrency-range", "1:16:1", "-l", "14"])
    assert r.returncode == 0, r.stdout + r.stderr
    visited = [int(c) for c in re.findall(r"^Request concurrency: (\d+)$", r.stdout, re.M)]
    assert visited == [1, 16, 8, 4, 6, 5], r.stdout + r.stderr
    reported = [int(c) for c in re.findall(r"^Concurrency: (\d+),", r.stdout, re.M)]
    assert reported == [1, 4], r.stdout
    assert r.stderr.count("Measured latency went over the set limit of 14 msec.") == 4


@pytest.mark.parametrize("args,message", [
    (["--concurrency-range", "1:4"], "The --latency-threshold cannot be 0 for binary search "
                                     "mode."),
    (["--concurrency-range", "1:0", "-l", "5"], "The end of the range can not be 0 (or 0.0) "
                                                "for binary search mode."),
])
def test_binary_search_errors_match_perf_analyzer(url, args, message):
    for tool in (PA, PERF):
        r = run(tool, ["-m", "simple", "-u", url, "--binary-search", *args])
        assert r.returncode == 99 and f"Error: {message}" in r.stdout + r.stderr, (tool, r.stderr)


# ---- --interleaved-trials ----

def test_interleaved_trials_report_the_median_trial(url, tmp_path):
    """--interleaved-trials 3 over concurrency 1:2: the levels are measured in turn, round
    after round (1, 2, 1, 2, 1, 2), each level reports its median trial (the throughput on
    stdout and in the CSV is the median stderr gives, between its min and max), and the
    server's counts are that trial's window's."""
    csv = tmp_path / "t.csv"
    r = run(PERF, ["-m", "simple", "-u", url, "-p", "300", "--concurrency-range", "1:2",
                   "--interleaved-trials", "3", "-v", "-f", str(csv)])
    assert r.returncode == 0, r.stdout + r.stderr
    visits = re.findall(r"^nereid-perf: trial (\d) of 3, concurrency (\d)$", r.stderr, re.M)
    assert visits == [(str(t), str(c)) for t in (1, 2, 3) for c in (1, 2)], r.stderr
    spread = [tuple(float(x) for x in m) for m in re.findall(
        r"^nereid-perf: 3 interleaved trials: throughput median ([\d.e+]+) infer/sec \(min "
        r"([\d.e+]+), max ([\d.e+]+)\)", r.stderr, re.M)]
    thr = [float(x) for x in re.findall(r"^    Throughput: ([\d.e+]+) infer/sec", r.stdout, re.M)]
    assert len(spread) == 2 and [s[0] for s in spread] == thr, (spread, thr)
    assert all(lo <= med <= hi for med, lo, hi in spread)
    rows = csv.read_text().splitlines()
    assert sorted(float(l.split(",")[1]) for l in rows[1:]) == sorted(thr)  # sorted, as PA
    for block in r.stdout.split("Request concurrency: ")[1:]:
        req = int(re.search(r"Request count: (\d+)", block).group(1))
        ok = int(re.search(r"Successful request count: (\d+)", block).group(1))
        # one trial's window, not three: the server's counts over that window (read at its
        # ends, so a few requests apart from the client's)
        assert abs(req - ok) <= 0.05 * req, block


def test_interleaved_trials_errors(url):
    for args, message in ((["--interleaved-trials", "1"], "takes 2 to 1000 trials"),
                          (["--interleaved-trials", "3", "--binary-search", "-l", "5",
                            "--concurrency-range", "1:4"], "not with --binary-search"),
                          (["--interleaved-trials", "3", "--concurrency-range", "1:0", "-l", "5"],
                           "needs the end of the range")):
        r = run(PERF, ["-m", "simple", "-u", url, *args])
        assert r.returncode == 99 and message in r.stderr, (args, r.stderr)


# ---- --streaming (gRPC) ----

@pytest.mark.load_threads
def test_streaming_matches_perf_analyzer(url, grpc_url, tmp_path):
    """--streaming: every request of a worker over its own ModelStreamInfer stream; the
    output line for line and the CSV as perf_analyzer's (asynchronous calls, stabilizing on
    throughput), the server's counts; over HTTP perf_analyzer's error."""
    out = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        csv = tmp_path / f"{name}.csv"
        r = run(tool, ["-m", "simple", "-u", grpc_url, "-i", "grpc", "--streaming", *FAST,
                       "--concurrency-range", "1:2", "-f", str(csv), "--verbose-csv"])
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        out[name] = (r.stdout, csv.read_text().splitlines())
        ok = [int(x) for x in re.findall(r"Successful request count: (\d+)", r.stdout)]
        assert len(ok) == 2 and all(x > 0 for x in ok), r.stdout
    assert template(out["perf"][0]) == template(out["pa"][0]), out["perf"][0]
    assert out["perf"][1][0] == out["pa"][1][0]
    assert "  Using asynchronous calls for inference\n" in out["perf"][0]
    for tool in (PA, PERF):
        r = run(tool, ["-m", "simple", "-u", url, "--streaming"])
        assert r.returncode == 99 and "Error: Streaming is only allowed with gRPC protocol and " \
            "Triton C API." in r.stdout + r.stderr, (tool, r.stderr)


def test_streaming_errors_come_from_the_stream(grpc_url):
    """A request the server refuses on the stream (its error_message; the stream stays open):
    the same line as perf_analyzer's, exit 99."""
    line = ("Thread [0] had error: shared memory size specified with the request for output "
            "'OUTPUT0' (10 bytes) should be at least 64 bytes to hold the results")
    for tool in (PERF, PA):
        r = run(tool, ["-m", "identity_fp32", "-u", grpc_url, "-i", "grpc", "--streaming",
                       *FAST, "--shape", "INPUT0:16", "--shared-memory", "system",
                       "--output-shared-memory-size", "10"])
        assert r.returncode == 99 and line in r.stderr.splitlines(), (tool, r.stderr)
    for key in ("INPUT0_0_0", "OUTPUT0"):  # perf_analyzer leaves them after an error
        if os.path.exists("/dev/shm/" + key):
            os.unlink("/dev/shm/" + key)


# ---- --input-data <directory> ----

def test_input_data_directory(url, grpc_url, tmp_path):
    """A directory with one file per input (raw bytes of one batch-1 request; BYTES one
    string a line) makes the request, -b 2 sending it twice as one batch: the values reach
    the server (simple's sums and differences, identity_bytes' strings, read back from the
    --profile-export-file)."""
    import json
    import struct
    d = tmp_path / "simple"
    d.mkdir()
    (d / "INPUT0").write_bytes(struct.pack("<16i", *range(16)))
    (d / "INPUT1").write_bytes(struct.pack("<16i", *[3] * 16))
    for protocol, u in (("http", url), ("grpc", grpc_url)):
        f = tmp_path / f"{protocol}.json"
        r = run(PERF, ["-m", "simple", "-u", u, "-i", protocol, "--request-count", "3",
                       "-b", "2", "--input-data", str(d), "--profile-export-file", str(f)])
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Successfully read data" not in r.stdout  # perf_analyzer prints it for JSON only
        for q in json.loads(f.read_text())["experiments"][0]["requests"]:
            assert q["request_inputs"] == {"INPUT0": list(range(16)), "INPUT1": [3] * 16}
            assert q["response_outputs"] == [{"OUTPUT0": [x + 3 for x in range(16)] * 2,
                                              "OUTPUT1": [x - 3 for x in range(16)] * 2}]
    b = tmp_path / "bytes"
    b.mkdir()
    (b / "INPUT0").write_text("ab\n\nxyz\n")
    f = tmp_path / "bytes.json"
    r = run(PERF, ["-m", "identity_bytes", "-u", url, "--request-count", "2", "--shape",
                   "INPUT0:3", "--input-data", str(b), "--profile-export-file", str(f)])
    assert r.returncode == 0, r.stdout + r.stderr
    q = json.loads(f.read_text())["experiments"][0]["requests"][0]
    assert q["response_outputs"] == [{"OUTPUT0": ["ab", "", "xyz"]}], q


def test_input_data_directory_errors_match_perf_analyzer(url, tmp_path):
    import struct
    d = tmp_path / "d"
    d.mkdir()
    (d / "INPUT0").write_bytes(struct.pack("<16i", *range(16)))
    for tool in (PA, PERF):
        r = run(tool, ["-m", "simple", "-u", url, "--input-data", str(d)])
        assert r.returncode == 99 and "error: Failed to init manager inputs: failed to open " \
            f"file '{d}/INPUT1'" in r.stderr, (tool, r.stderr)
    (d / "INPUT1").write_bytes(b"12345")
    for tool in (PA, PERF):
        r = run(tool, ["-m", "simple", "-u", url, "--input-data", str(d)])
        assert r.returncode == 99 and "error: Failed to init manager inputs: provided data for " \
            "input INPUT1 has byte size 5, expect 64" in r.stderr, (tool, r.stderr)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_statistics_are_the_versions_the_requests_go_to(repos, server_factory, protocol):
    """Without -x the requests go to the highest version served, and the Server block reads
    that version's statistics (perf_analyzer: the highest version whose counts grew), not the
    sum of every version's: another client's load on version 1 at the same time is not
    counted."""
    srv = server_factory([repos["repo"]], ["--model-control-mode=explicit",
                                           "--load-model=two_versions"])
    u = f"127.0.0.1:{srv.port}"
    other = subprocess.Popen([str(PERF), "-m", "two_versions", "-x", "1", "-u", u, "--shape",
                              "INPUT0:4", "-p", "500", "-s", "1000", "-r", "6"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        r = run(PERF, ["-m", "two_versions", "-u", srv.grpc_url if protocol == "grpc" else u,
                       "-i", protocol, "--shape", "INPUT0:4", "--request-count", "300"])
        assert other.poll() is None  # version 1 was under load all along
    finally:
        other.wait(timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^    Successful request count: 300$", r.stdout, re.M), r.stdout


# ---- ensembles: the composing models' statistics ----

MULTIPLE_VERSIONS = ("WARNING: Multiple versions of model simple are loaded in the triton "
                     "server, and the version to use was unspecified. The stats for that model "
                     "may be inaccurate.")


@pytest.mark.parametrize("model", ["ensemble_add_sub", "ensemble_nested"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_ensemble_matches_perf_analyzer(server_factory, tmp_path, model, protocol):
    """An ensemble (Triton's qa ensemble_add_sub over `simple` versions 1 and 2, and an
    ensemble with it as a step): the Server block is perf_analyzer's, the ensemble's request
    latency split into its composing models' queue and compute, then `Composing models: `
    and each one's own block, nested two spaces deeper per level. The steps without a version
    are reported for the highest version whose counts grew, with perf_analyzer's warning
    since version 1 grew too. The CSV's server columns are the ensemble's own figures, and
    every composing model of the ensemble gets its own CSV, <name>_v<version>.<-f file>."""
    repo = tmp_path / "repo"
    models.write_simple_two_versions(repo)
    models.write_ensemble(repo, "ensemble_add_sub", models.ensemble_add_sub_config())
    models.write_ensemble(repo, "ensemble_nested", models.ensemble_nested_config())
    srv = server_factory([repo])
    u = srv.grpc_url if protocol == "grpc" else f"127.0.0.1:{srv.port}"
    out = {}
    for name, tool in (("pa", PA), ("perf", PERF)):
        cwd = tmp_path / name  # perf_analyzer writes the composing CSVs beside a bare -f name
        cwd.mkdir()
        r = subprocess.run([str(tool), "-m", model, "-u", u, "-i", protocol, *FAST, "-f",
                            f"{name}.csv", "--verbose-csv", "--concurrency-range", "1:2"],
                           cwd=cwd, capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        csvs = {p.name.replace(f".{name}.csv", ".X.csv"): p.read_text().splitlines()
                for p in cwd.glob("*.csv")}
        out[name] = (r.stdout, set(r.stderr.splitlines()), csvs)
    assert template(out["perf"][0]) == template(out["pa"][0]), out["perf"][0]
    lines = out["perf"][0].splitlines()
    assert "  Composing models: " in lines and "  simple, version: 2" in lines, out["perf"][0]
    if model == "ensemble_nested":  # ensemble_add_sub's own models, a level deeper
        assert "  ensemble_add_sub, version: 1" in lines
        assert "    Composing models: " in lines and "    simple, version: 1" in lines
        assert "        Successful request count: N" in template(out["perf"][0])
    else:
        assert "  simple, version: 1" in lines
        assert "      Successful request count: N" in template(out["perf"][0])
    for name in ("pa", "perf"):
        assert MULTIPLE_VERSIONS in out[name][1], (name, out[name][1])
    files = {"ensemble_add_sub": ["pa.csv", "simple_v1.X.csv", "simple_v2.X.csv"],
             "ensemble_nested": ["ensemble_add_sub_v1.X.csv", "pa.csv", "simple_v2.X.csv"]}
    pa_csv, perf_csv = out["pa"][2], out["perf"][2]
    pa_csv["X.csv"], perf_csv["X.csv"] = pa_csv.pop("pa.csv"), perf_csv.pop("perf.csv")
    assert sorted(perf_csv) == sorted(pa_csv) == sorted(f.replace("pa.csv", "X.csv")
                                                          for f in files[model]), pa_csv
    for f in pa_csv:
        assert perf_csv[f][0] == pa_csv[f][0], f  # the header
        assert len(perf_csv[f]) == len(pa_csv[f]) == 3, (f, pa_csv[f], perf_csv[f])
        assert [template(l) for l in perf_csv[f][1:]] == [template(l) for l in pa_csv[f][1:]]


def test_decoupled_models_like_perf_analyzer(server_factory, tmp_path):
    """A decoupled model (square_int32: three responses to IN = 3, then an empty final one):
    without --async --streaming -i grpc both tools refuse it in perf_analyzer's words; with
    them both measure it line for line alike, each request's answer being all its responses
    (Response Throughput three times the Throughput, the server's response_stats agreeing)."""
    import json
    import shutil
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "python" / "square_int32", repo / "square_int32")
    srv = server_factory([repo], [])
    data = tmp_path / "in.json"
    data.write_text(json.dumps({"data": [{"IN": [3]}]}))
    base = ["-m", "square_int32", "-u", srv.grpc_url, "-i", "grpc", "--input-data", str(data)]
    for tool in (PA, PERF):
        r = run(tool, base)
        assert r.returncode == 99, (tool, r.stdout, r.stderr)
        assert "Decoupled models must be run with `--async` and `--streaming` and either " \
               "`-i grpc` or `--service-kind=triton_c_api`" in r.stderr, (tool, r.stderr)
    outs = []
    for tool in (PA, PERF):
        r = run(tool, [*base, "--async", "--streaming", "--request-count", "30"])
        assert r.returncode == 0, (tool, r.stdout, r.stderr)
        outs.append(r.stdout)
        assert "  Detected decoupled model, using the first response for measuring latency\n" \
            in r.stdout
        thr = float(re.search(r"^    Throughput: (\S+) infer/sec", r.stdout, re.M).group(1))
        resp = float(re.search(r"^    Response Throughput: (\S+) infer/sec", r.stdout,
                               re.M).group(1))
        assert abs(resp / thr - 3) < 1e-4, (tool, thr, resp)  # printed to 6 digits
    assert template(outs[0]) == template(outs[1])
    from e2e_util import get
    stats = json.loads(get(srv.port, "/v2/models/square_int32/stats")
                       .body)["model_stats"][0]["response_stats"]
    assert [int(stats[k]["success"]["count"]) for k in "012"] == [60, 60, 60]
    assert int(stats["3"]["empty_response"]["count"]) == 60
