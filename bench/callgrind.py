#!/usr/bin/env python3
"""Instructions the server executes per request, counted by callgrind: repeatable on a noisy
machine where wall-clock time is not, so it is the figure to compare two designs with.

The server (defaults, repository holding identity_fp32 only) runs under
`valgrind --tool=callgrind`; after 50 warm-up requests the counters are zeroed, N JSON requests
of 16 floats are sent over one keep-alive connection, and the counters are dumped. Prints the
instructions per request and how they split between nereid, libmicrohttpd, ONNX Runtime, libc
and the rest (self cost per object file). memset is shown apart: it is almost all
libmicrohttpd zeroing its connection pool between two requests, done with `rep stosb`, which
callgrind counts once per byte although the CPU stores 32 or more bytes a cycle.

    .venv/bin/python bench/callgrind.py [N]        # N = 1000
    .venv/bin/python bench/callgrind.py N --trace  # also with tracing at rate 1000 (issue #39)
"""
import collections, glob, http.client, json, os, re, shutil, subprocess, sys, tempfile, time

from benchlib import NEREID, REPO, stop_server, wait_live

PORT = 18595


def self_cost_by_object(path):
    """{(object file, function): self Ir} from a callgrind output file. Cost lines after
    `calls=` are the callee's inclusive cost and are skipped; `ob=`/`fn=` name (or refer back
    to) the object and function of the cost lines that follow; a compressed name may be
    defined first in a `cob=`/`cfn=` line."""
    names = {"ob": {}, "fn": {}}
    cur = {"ob": "?", "fn": "?"}
    cost, skip = collections.Counter(), False
    with open(path) as f:
        for line in f:
            m = re.match(r"(c?)(ob|fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                kind = m.group(2)
                if m.group(4):
                    names[kind][m.group(3)] = m.group(4)
                if not m.group(1):
                    cur[kind] = names[kind].get(m.group(3), "?")
            elif line.startswith("calls="):
                skip = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if skip:
                    skip = False
                    continue
                parts = line.split()
                if len(parts) >= 2:
                    cost[(cur["ob"], cur["fn"])] += int(parts[1])
    return cost


def short(ob, fn):
    if "memset" in fn:
        return "memset"
    base = os.path.basename(ob)
    for key, name in (("nereid", "nereid"), ("libmicrohttpd", "libmicrohttpd"),
                      ("libonnxruntime", "onnxruntime"), ("libc.so", "libc"),
                      ("ld-linux", "ld.so")):
        if key in base:
            return name
    return "other"


def instructions_per_request(tmp, n=1000, args=()):
    """(Ir per request, "nereid x%, ..." split) for n identity_fp32 JSON requests (args: more
    server flags)."""
    repo = os.path.join(tmp, "callgrind_repo")
    shutil.copytree(os.path.join(REPO, "identity_fp32"), os.path.join(repo, "identity_fp32"))
    out = os.path.join(tmp, "callgrind.out")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          NEREID, f"--model-repository={repo}", f"--http-port={PORT}",
                          "--http-address=127.0.0.1", "--grpc-port=0", "--metrics-port=0",
                          *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_live(PORT, p, 600, "/v2/health/ready")
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                       "data": [i / 10 for i in range(16)]}]}).encode()
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)

        def send(k):
            for _ in range(k):
                c.request("POST", "/v2/models/identity_fp32/infer", body=body,
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    sys.exit(f"callgrind run: status {r.status}")
        send(50)
        subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        send(n)
        subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c.close()
    finally:
        stop_server(p)
    dumps = sorted(f for f in glob.glob(out + ".*") if re.search(r"\.\d+$", f))
    if os.environ.get("CALLGRIND_KEEP"):
        shutil.copy(dumps[0], os.environ["CALLGRIND_KEEP"])
    if not dumps:
        sys.exit("callgrind wrote no dump")
    cost = self_cost_by_object(dumps[0])
    total = sum(cost.values())
    groups = collections.Counter()
    for (ob, fn), ir in cost.items():
        groups[short(ob, fn)] += ir
    split = ", ".join(f"{k} {v / n:,.0f}" for k, v in groups.most_common())
    return total / n, split


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    tmp = tempfile.mkdtemp(prefix="nereid-callgrind-")
    try:
        t0 = time.time()
        ir, split = instructions_per_request(tmp, n)
        print(f"instructions per request (identity_fp32 JSON, {n} requests, "
              f"{time.time() - t0:.0f} s): {ir:,.0f}; by object: {split}")
        if "--trace" in sys.argv:
            shutil.rmtree(os.path.join(tmp, "callgrind_repo"))
            tr, split = instructions_per_request(tmp, n, (
                "--trace-config=level=TIMESTAMPS", "--trace-config=rate=1000",
                f"--trace-config=triton,file={tmp}/trace.json"))
            print(f"with tracing at rate 1000: {tr:,.0f} ({tr / ir:.4f}x); by object: {split}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
