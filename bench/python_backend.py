#!/usr/bin/env python3
"""make bench, the Python backend (issue #37): examples/python/add_sub (two FP32[4] inputs, two
outputs, computed in model.py), with one and with two instances, against the ONNX identity model
(identity_fp32, 4 floats) on the same server; JSON requests from wrk at concurrency 1 and 16,
interleaved rounds, medians of the per-round figures. Server CPU per request counts the server
and its Python stub processes together (/proc, utime + stime), as Triton's figure counts its
server and stub.

Goals (the issue's, against Triton 2.51's Python backend on this machine class: add_sub c=1 p50
348 us, 327 us of server CPU per request at c=1 and 243 us at c=16; measured with Triton's
image, not rerun here: no Triton on these machines):
  c=1 p50 at most 0.6x Triton's (about 210 us) and at most 3x the ONNX identity model's;
  server CPU per request at c=16 at most 0.5x Triton's (about 120 us), with 1 and 2 instances;
  BLS (a Python model whose execute calls identity_fp32 with InferenceRequest.exec): server CPU
  per request at most add_sub's plus the ONNX identity's, same run.

    .venv/bin/python bench/python_backend.py      # BENCH_ROUNDS=5 BENCH_SECONDS=4
"""
import json, os, shutil, statistics, sys, tempfile

from benchlib import REPO, ROOT, cpu_seconds, print_rows, start_server, stop_server, wrk, \
    write_lua

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SECS = int(os.environ.get("BENCH_SECONDS", "4"))
TRITON_P50_US, TRITON_CPU_C1_US, TRITON_CPU_C16_US = 348.0, 327.0, 243.0
ROWS = []

BLS_CONFIG = """name: "bls_identity"
backend: "python"
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU } ]
"""
BLS_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            a = pb_utils.InferenceRequest(model_name="identity_fp32", requested_output_names=[
                "OUTPUT0"], inputs=[pb_utils.Tensor("INPUT0", x.reshape(1, 4))]).exec()
            if a.has_error():
                raise pb_utils.TritonModelException(a.error().message())
            y = a.output_tensors()[0].as_numpy().reshape(4)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", y)]))
        return out
"""


def repository(tmp):
    repo = os.path.join(tmp, "repo")
    shutil.copytree(os.path.join(REPO, "identity_fp32"), os.path.join(repo, "identity_fp32"))
    src = os.path.join(ROOT, "examples", "python", "add_sub")
    shutil.copytree(src, os.path.join(repo, "add_sub"))
    shutil.copytree(src, os.path.join(repo, "add_sub2"))
    cfg = os.path.join(repo, "add_sub2", "config.pbtxt")
    with open(cfg) as f:
        text = f.read().replace('name: "add_sub"', 'name: "add_sub2"')
    with open(cfg, "w") as f:
        f.write(text.replace("instance_group [ { kind: KIND_CPU } ]",
                             "instance_group [ { kind: KIND_CPU count: 2 } ]"))
    os.makedirs(os.path.join(repo, "bls_identity", "1"))
    with open(os.path.join(repo, "bls_identity", "config.pbtxt"), "w") as f:
        f.write(BLS_CONFIG)
    with open(os.path.join(repo, "bls_identity", "1", "model.py"), "w") as f:
        f.write(BLS_MODEL)
    return repo


def tree_cpu(pid):
    """CPU seconds of the server and its children (the Python stubs)."""
    total = cpu_seconds(pid)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    total += cpu_seconds(int(d))
        except (OSError, ValueError):
            continue
    return total


def scripts(tmp):
    add_sub = {"inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [0.5, 1.5, 2.5, 3.5]},
        {"name": "INPUT1", "shape": [4], "datatype": "FP32", "data": [1.0, 1.0, 1.0, 1.0]}]}
    ident = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                         "data": [0.5, 1.5, 2.5, 3.5]}]}
    bls = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32",
                       "data": [0.5, 1.5, 2.5, 3.5]}]}
    out = {}
    for name, body in (("python", add_sub), ("onnx", ident), ("bls", bls)):
        path = os.path.join(tmp, f"{name}.lua")
        write_lua(path, {"Content-Type": "application/json"}, body=json.dumps(body).encode())
        out[name] = path
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="nereid-bench-py-")
    port = 18920
    srv = start_server(repository(tmp), port, "--allow-grpc=false", "--allow-metrics=false")
    lua = scripts(tmp)
    kinds = {"add_sub": ("add_sub", lua["python"]), "add_sub x2": ("add_sub2", lua["python"]),
             "onnx identity": ("identity_fp32", lua["onnx"]),
             "bls -> identity": ("bls_identity", lua["bls"])}
    try:
        for conns in (1, 16):
            per = {k: [] for k in kinds}
            for r in range(ROUNDS):
                order = list(kinds) if r % 2 == 0 else list(reversed(kinds))
                for kind in order:
                    model, script = kinds[kind]
                    c0 = tree_cpu(srv.pid)
                    rps, p50, _ = wrk(port, f"/v2/models/{model}/infer", script, conns, SECS)
                    cpu = tree_cpu(srv.pid) - c0
                    per[kind].append((cpu / (rps * SECS) * 1e6, rps, p50))
            med = {k: [statistics.median(x[i] for x in v) for i in range(3)]
                   for k, v in per.items()}
            for k, (cpu, rps, p50) in med.items():
                print(f"  c={conns} {k}: {cpu:.1f} us CPU/request, {rps:.0f} req/s, "
                      f"p50 {p50:.0f} us", flush=True)
            py, onnx = med["add_sub"], med["onnx identity"]
            if conns == 1:
                t = py[2] / TRITON_P50_US
                ROWS.append(("add_sub c=1 p50 against Triton 2.51's", f"{py[2]:.0f} us",
                             f"Triton {TRITON_P50_US:.0f} us (issue #37)", t, "<= 0.6", t <= 0.6))
                o = py[2] / onnx[2]
                ROWS.append(("add_sub c=1 p50 against the ONNX identity model's",
                             f"{py[2]:.0f} us", f"identity {onnx[2]:.0f} us", o, "<= 3",
                             o <= 3))
                c = py[0] / TRITON_CPU_C1_US
                ROWS.append(("add_sub c=1 server+stub CPU per request against Triton's",
                             f"{py[0]:.1f} us ({py[1]:.0f} req/s)",
                             f"Triton {TRITON_CPU_C1_US:.0f} us", c, "-", None))
            else:
                for k in ("add_sub", "add_sub x2"):
                    c = med[k][0] / TRITON_CPU_C16_US
                    ROWS.append((f"{k} c=16 server+stub CPU per request against Triton's",
                                 f"{med[k][0]:.1f} us ({med[k][1]:.0f} req/s)",
                                 f"Triton {TRITON_CPU_C16_US:.0f} us", c, "<= 0.5", c <= 0.5))
            bls = med["bls -> identity"]
            bound = py[0] + onnx[0]
            ROWS.append((f"BLS to identity_fp32 c={conns}, server+stub CPU per request",
                         f"{bls[0]:.1f} us ({bls[1]:.0f} req/s, p50 {bls[2]:.0f} us)",
                         f"add_sub {py[0]:.1f} + identity {onnx[0]:.1f} us", bls[0] / bound,
                         "<= 1", bls[0] <= bound))
            ROWS.append((f"ONNX identity c={conns} server CPU per request (same run)",
                         f"{onnx[0]:.1f} us ({onnx[1]:.0f} req/s, p50 {onnx[2]:.0f} us)", "-",
                         None, "-", None))
    finally:
        stop_server(srv)
        shutil.rmtree(tmp, ignore_errors=True)
    print_rows(ROWS)


if __name__ == "__main__":
    sys.exit(main())
