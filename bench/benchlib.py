"""Helpers shared by the benchmarks in bench/: start a server, drive it with wrk, call the
direct ONNX Runtime baseline. Benchmarks print figures; they assert nothing."""
import http.client, json, os, re, resource, signal, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEREID = os.environ.get("NEREID_BIN") or os.path.join(ROOT, "build/bin/nereid")
ORT_DIRECT = os.path.join(ROOT, "build/bin/bench-ort-direct")
REPO = os.path.join(ROOT, "examples/model_repository")
PA = os.path.join(ROOT, "scripts/perf_analyzer")

# The two CNNs of the example repository: (model, input name, request shape).
CNNS = (("inception_onnx", "input", (1, 3, 224, 224)),
        ("densenet_onnx", "data_0", (3, 224, 224)))


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


def start_server(repo, port, *args, timeout=120):
    """nereid on 127.0.0.1:port, returned once every model is ready."""
    p = subprocess.Popen([NEREID, f"--model-repository={repo}", f"--http-port={port}",
                          "--http-address=127.0.0.1", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_live(port, p, timeout, "/v2/health/ready")
    return p


def stop_server(p):
    p.send_signal(signal.SIGTERM)
    p.wait()


def write_lua(path, headers, body=None, body_file=None):
    """A wrk script that POSTs `body` (inlined) or the bytes of `body_file` (read at start)."""
    with open(path, "w") as f:
        f.write('wrk.method = "POST"\n')
        if body_file:
            f.write(f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')
        else:
            f.write('wrk.body = "' + "".join(f"\\{x}" for x in body) + '"\n')
        for k, v in headers.items():
            f.write(f'wrk.headers["{k}"] = "{v}"\n')


def parse_wrk(out):
    """(requests/s, p50 us, p99 us) from `wrk --latency`; exits on any non-2xx answer."""
    def us(tok):
        m = re.match(r"([\d.]+)(us|ms|s)", tok)
        return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]
    if re.search(r"Non-2xx or 3xx responses: (\d+)", out) or "Socket errors" in out:
        sys.exit("wrk saw errors:\n" + out)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = us(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = us(re.search(r"\s99%\s+(\S+)", out).group(1))
    return rps, p50, p99


def wrk(port, path, lua, conns, seconds, threads=None):
    threads = threads or (1 if conns <= 2 else 2)
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--latency",
                          "-s", lua, f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, check=True).stdout
    return parse_wrk(out)


def cpu_seconds(pid):
    """User + system CPU seconds process `pid` has used so far, its finished threads included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk_cpu(port, path, lua, conns, seconds, server_pid):
    """wrk() plus the CPU seconds the server and wrk itself used during the run:
    (requests/s, p50 us, p99 us, server CPU s, client CPU s)."""
    def children():
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime
    s0, w0 = cpu_seconds(server_pid), children()
    r = wrk(port, path, lua, conns, seconds)
    return (*r, cpu_seconds(server_pid) - s0, children() - w0)


def cnn_request(model, inp, shape):
    """(body, headers) of one binary-tensor request for a CNN, reply outputs binary too."""
    import numpy as np
    x = np.random.default_rng(0).random(shape, dtype=np.float32).tobytes()
    hdr = json.dumps({"inputs": [{"name": inp, "shape": list(shape), "datatype": "FP32",
                                  "parameters": {"binary_data_size": len(x)}}],
                      "parameters": {"binary_data_output": True}}).encode()
    return hdr + x, {"Content-Type": "application/octet-stream",
                     "Inference-Header-Content-Length": str(len(hdr))}


class ShmInput:
    """The CNN request with its input in a system shared-memory region instead of the body:
    creates /dev/shm/nereid_bench_<model>, fills it with the same tensor cnn_request sends,
    registers it with the server at `port`, and writes a wrk script that posts the small JSON
    request naming it (the output still comes back as binary data). close() unregisters and
    removes the region."""

    def __init__(self, tmp, port, model, inp, shape):
        import numpy as np
        import tritonclient.http as httpclient
        import tritonclient.utils.shared_memory as shm
        self._shm, self.name = shm, f"bench_{model}"
        x = np.random.default_rng(0).random(shape, dtype=np.float32)
        self._handle = shm.create_shared_memory_region(self.name, f"/nereid_{self.name}",
                                                       x.nbytes)
        shm.set_shared_memory_region(self._handle, [x])
        self._client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        self._client.register_system_shared_memory(self.name, f"/nereid_{self.name}", x.nbytes)
        body = json.dumps({"inputs": [{"name": inp, "shape": list(shape), "datatype": "FP32",
                                       "parameters": {"shared_memory_region": self.name,
                                                      "shared_memory_byte_size": x.nbytes}}],
                           "parameters": {"binary_data_output": True}}).encode()
        self.lua = os.path.join(tmp, f"{model}_shm.lua")
        write_lua(self.lua, {"Content-Type": "application/json"}, body=body)

    def close(self):
        self._client.unregister_system_shared_memory(self.name)
        self._client.close()
        self._shm.destroy_shared_memory_region(self._handle)


def cnn_lua(tmp, model, inp, shape):
    """Writes the request body of `model` to a file and a wrk script that posts it."""
    body, headers = cnn_request(model, inp, shape)
    body_file = os.path.join(tmp, f"{model}.bin")
    with open(body_file, "wb") as f:
        f.write(body)
    lua = os.path.join(tmp, f"{model}.lua")
    write_lua(lua, headers, body_file=body_file)
    return lua


def ort_direct(model_path, threads, intra, seconds, batch=1, pool="session", spin="nospin"):
    """{infer_per_sec, p50_us, p99_us} of ONNX Runtime called in-process (bench/ort_direct.c)."""
    out = subprocess.run([ORT_DIRECT, model_path, str(threads), str(intra), str(seconds),
                          str(batch), pool, spin], capture_output=True, text=True,
                         check=True).stdout
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", out)}


def print_rows(rows):
    """The bench table: (figure, nereid, baseline, ratio or None, goal, met) rows as markdown."""
    print("\n| figure | nereid | baseline (same run) | ratio | goal | met |")
    print("|---|---|---|---:|---|---|")
    for fig, val, base, ratio, goal, met in rows:
        r = f"{ratio:.3f}" if ratio is not None else "-"
        m = {True: "yes", False: "**no**", None: "-"}[met]
        print(f"| {fig} | {val} | {base} | {r} | {goal} | {m} |")
