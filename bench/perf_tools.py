#!/usr/bin/env python3
"""make bench, part 9: nereid-perf against Triton's perf_analyzer 2.51 (issue #19). One nereid
server (`make run`'s repository); both tools drive the same model with the same flags
(`-p 2000 -s 1000 -r 4`: every level ends after three windows, so the tools are compared on
the same amount of measuring, not on how each copes with instability), interleaved, BENCH_ROUNDS
rounds, medians. For each: the throughput and p95 each tool reports, and each tool's CPU time
(user + system, from wait4) divided by the requests the server counted during the run.
perf_analyzer gets 180 s per run; a run that does not finish is reported as such.

    .venv/bin/python bench/perf_tools.py     # BENCH_ROUNDS=3
    BENCH_MODELS=densenet_onnx,inception_onnx .venv/bin/python bench/perf_tools.py  # those only
"""
import http.client, json, os, re, statistics, subprocess, tempfile, time

from benchlib import NEREID, PA, REPO, start_server, stop_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERF = os.path.join(os.path.dirname(NEREID), "nereid-perf")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PORT, GRPC_PORT = 18990, 18991
# (model, flags, concurrency, protocol)
# The tiny models measure the tools as much as the server: on two cores a client's CPU is part of
# every latency. The CNNs are compute-bound (the server's work is 1000x the client's), the case
# where two correct tools must agree.
CASES = [("simple", [], 1, "http"), ("identity_fp32", ["--shape", "INPUT0:16"], 1, "http"),
         ("identity_fp32", ["--shape", "INPUT0:16"], 16, "http"),
         ("identity_fp32", ["--shape", "INPUT0:16"], 16, "grpc"),
         ("densenet_onnx", [], 1, "http"), ("densenet_onnx", [], 1, "grpc"),
         ("inception_onnx", [], 2, "http"), ("inception_onnx", [], 2, "grpc")]
if os.environ.get("BENCH_MODELS"):
    _asked = os.environ["BENCH_MODELS"].split(",")
    _unknown = sorted(set(_asked) - {c[0] for c in CASES})
    if _unknown:
        raise SystemExit(f"BENCH_MODELS: no case for {', '.join(_unknown)}; the models are "
                         f"{', '.join(sorted({c[0] for c in CASES}))}")
    CASES = [c for c in CASES if c[0] in _asked]


def server_count(model):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.request("GET", f"/v2/models/{model}/stats")
    stats = json.loads(c.getresponse().read())["model_stats"]
    return sum(s["inference_count"] for s in stats)


def run(tool, model, extra, conc, protocol):
    """(infer/s, p95 us, client CPU us per request), or None if the run failed or timed out."""
    before = server_count(model)
    port = GRPC_PORT if protocol == "grpc" else PORT
    args = [tool, "-m", model, "-u", f"127.0.0.1:{port}", "-i", protocol, "-p", "2000",
            "-s", "1000", "-r", "4", "--concurrency-range", str(conc), *extra]
    with tempfile.TemporaryFile("w+") as f:
        p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, text=True)
        t0, status, ru, killed = time.time(), None, None, False
        while status is None:
            pid, st, r = os.wait4(p.pid, os.WNOHANG)
            if pid:
                status, ru = st, r
            elif time.time() - t0 > 180 and not killed:
                os.kill(p.pid, 9)  # not p.kill(): its poll() would reap the child before wait4
                killed = True
            else:
                time.sleep(0.1)
        p.returncode = os.waitstatus_to_exitcode(status)
        f.seek(0)
        out = f.read()
    m = re.search(r"throughput: ([\d.e+]+) infer/sec, latency", out)
    p95 = re.search(r"p95 latency: (\d+) usec", out)
    if p.returncode != 0 or not m or not p95:
        print(f"{os.path.basename(tool)} {model} c={conc} {protocol}: "
              + ("killed after 180 s" if killed else f"exit {p.returncode}"), flush=True)
        return None
    reqs = server_count(model) - before
    return float(m.group(1)), int(p95.group(1)), (ru.ru_utime + ru.ru_stime) / reqs * 1e6


def main():
    srv = start_server(REPO, PORT, f"--grpc-port={GRPC_PORT}", "--allow-metrics=false")
    res = {}
    try:
        for _ in range(ROUNDS):
            for case in CASES:
                for name, tool in (("nereid-perf", PERF), ("perf_analyzer", PA)):
                    res.setdefault((case[0], case[2], case[3], name), []).append(run(tool, *case))
    finally:
        stop_server(srv)
    print("\n## nereid-perf and perf_analyzer 2.51 on the same server (bench/perf_tools.py, "
          f"{ROUNDS} interleaved rounds, medians)\n")
    print("| model | c | protocol | tool | infer/s | p95 | client CPU per request | runs finished |"
          " nereid-perf / perf_analyzer |")
    print("|---|---:|---|---|---:|---:|---:|---:|---|")
    meds = {}
    for (model, conc, proto, name), rs in res.items():
        ok = [r for r in rs if r]
        if not ok:
            print(f"| {model} | {conc} | {proto} | {name} | - | - | - | 0/{len(rs)} | |")
            continue
        med = lambda i: statistics.median(r[i] for r in ok)
        meds[(model, conc, proto, name)] = (med(0), med(1))
        cpus = [r[2] for r in ok if r[2]]
        cpu = f"{statistics.median(cpus):.1f} us" if cpus else "-"
        ours = meds.get((model, conc, proto, "nereid-perf"))
        ratio = ""
        if name == "perf_analyzer" and ours:
            ratio = (f"infer/s {ours[0] / med(0):.2f}x, p95 {ours[1] / med(1):.2f}x"
                     + (" (within 10 %)" if all(0.9 <= ours[i] / meds[(model, conc, proto, name)][i]
                                                <= 1.1 for i in (0, 1)) else ""))
        print(f"| {model} | {conc} | {proto} | {name} | {med(0):.0f} | {med(1)} us | {cpu} | "
              f"{len(ok)}/{len(rs)} | {ratio} |")

if __name__ == "__main__":
    main()
