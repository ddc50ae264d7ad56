#!/usr/bin/env python3
"""Writes the fuzz seed corpora into tests/fuzz/corpus/<target>/ (committed).

Sources: the example repository's config.pbtxt files, the configs the e2e suite
writes (tests/e2e/models.py) and the unit tests use (also as protobuf JSON, for
config_json), and the requests recorded against Triton 2.51
(tests/e2e/data/triton_http.jsonl). Run from the repository root:
    python3 tests/fuzz/make_seeds.py
Input formats are the drivers' (see the header comment of each fuzz_*.c).
"""
import base64
import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "corpus"
MAX_SEED = 8192
MODELS = {"simple": 0, "identity_fp32": 1, "identity_bytes": 2}


def put(target, data):
    if len(data) > MAX_SEED:
        return
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def configs():
    for p in sorted((ROOT / "examples" / "model_repository").glob("*/config.pbtxt")):
        put("config", p.read_bytes())
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    try:
        import models  # noqa: E402
    except Exception as e:  # onnx missing: the example configs are enough
        print(f"skipping tests/e2e/models.py configs: {e}")
        return
    for name in dir(models):
        v = getattr(models, name)
        if name.startswith("CONFIG") and isinstance(v, str):
            put("config", v.encode())
    for t in ("TYPE_FP32", "TYPE_STRING", "TYPE_BOOL", "TYPE_FP16"):
        put("config", models.config_identity("identity", t).encode())


def unit_configs():
    """config.pbtxt texts written as C string literals in the unit tests."""
    import ast
    import re
    lit = re.compile(r'"(?:[^"\\\n]|\\.)*"')
    for src in sorted((ROOT / "tests" / "unit").glob("test_*.c")):
        text = src.read_text()
        # adjacent literals (C concatenation) form one text
        for m in re.finditer(r'(?:"(?:[^"\\\n]|\\.)*"\s*)+', text):
            parts = lit.findall(m.group(0))
            try:
                s = "".join(ast.literal_eval(p) for p in parts)
            except (ValueError, SyntaxError):
                continue
            if len(s) > 20 and re.search(r"\b(input|output|max_batch_size|instance_group|"
                                         r"dynamic_batching|backend|platform)\s*[:\[{]", s):
                put("config", s.encode())


def config_jsons():
    """The config seeds (run configs() and unit_configs() first) as protobuf
    JSON, the form of a model-load request's "config" parameter: proto field
    names with every field printed, and lowerCamelCase names with only the
    set fields (int64 values as strings, as protobuf prints them)."""
    try:
        from google.protobuf import json_format, text_format
        from tritonclient.grpc import model_config_pb2
    except Exception as e:  # no tritonclient: no seeds for config_json
        print(f"skipping config_json seeds: {e}")
        return
    for p in sorted((OUT / "config").iterdir()):
        m = model_config_pb2.ModelConfig()
        try:
            text_format.Parse(p.read_bytes().decode(), m)
        except Exception:  # not a config Python's protobuf reads
            continue
        for proto_names in (True, False):
            put("config_json", json_format.MessageToJson(
                m, preserving_proto_field_name=proto_names, indent=None,
                always_print_fields_with_no_presence=proto_names).encode())


def requests():
    for line in (ROOT / "tests" / "e2e" / "data" / "triton_http.jsonl").read_text().splitlines():
        r = json.loads(line).get("request", {})
        if "method" not in r or "path" not in r:
            continue
        if "body_b64" in r:
            body = base64.b64decode(r["body_b64"])
        else:
            body = (r.get("body") or "").encode()
        hdrs = {k.lower(): v for k, v in r.get("headers", {}).items()}
        path = r["path"]
        for m in MODELS:  # the driver's repository holds simple and identity_fp32
            path = path.replace(f"/models/{m}_noconfig/", f"/models/{m}/")
        head = f"{r['method']} {path}\n"
        for k in ("content-encoding", "accept-encoding", "inference-header-content-length"):
            if k in hdrs:
                head += f"{k}: {hdrs[k]}\n"
        put("http", head.encode() + b"\n" + body)
        if not path.endswith("/infer"):
            continue
        model = path.split("/")[3]
        which = bytes([MODELS.get(model, 0)])
        if "content-encoding" in hdrs:
            continue
        ihcl = hdrs.get("inference-header-content-length")
        if ihcl is None:
            put("infer_json", which + body)
        put("infer_binary", which + (ihcl if ihcl is not None else "-").encode() + b"\n" + body)


def shm_requests():
    """The shared-memory extension against the region "fz" fuzz_http.c registers before every
    input (key /nereid_fuzz_http, 64 KiB)."""
    base = "/v2/systemsharedmemory"
    for head, body in [
            (f"GET {base}/status", b""), (f"GET {base}/region/fz/status", b""),
            (f"POST {base}/region/fz/unregister", b""), (f"POST {base}/unregister", b""),
            (f"POST {base}/region/r2/register",
             b'{"key":"/nereid_fuzz_http","offset":4096,"byte_size":128}'),
            (f"POST {base}/region/fz/register",
             b'{"key":"/nereid_fuzz_http","offset":0,"byte_size":64}'),
            ("POST /v2/cudasharedmemory/region/g/register", b'{"byte_size":4}'),
            ("GET /v2/cudasharedmemory/region/g/status", b"")]:
        put("http", head.encode() + b"\n\n" + body)

    def region(offset, size):
        return {"shared_memory_region": "fz", "shared_memory_byte_size": size,
                "shared_memory_offset": offset}
    simple = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32",
                          "parameters": region(64 * i, 64)}
                         for i, n in enumerate(("INPUT0", "INPUT1"))],
              "outputs": [{"name": "OUTPUT0", "parameters": region(1024, 64)},
                          {"name": "OUTPUT1", "parameters": {"binary_data": True}}]}
    ident = {"inputs": [{"name": "INPUT0", "shape": [1, 1000], "datatype": "FP32",
                         "parameters": region(4, 4000)}],
             "outputs": [{"name": "OUTPUT0", "parameters": region(8192, 4000)}]}
    for model, req in (("simple", simple), ("identity_fp32", ident)):
        put("http", f"POST /v2/models/{model}/infer\n\n".encode() + json.dumps(req).encode())


def json_data_requests():
    """`data` read as a span straight into the tensor (src/common/json_span.c): nested arrays,
    data before its datatype and shape, every number form (integers, the fast path's reals,
    strtod's, NaN/Infinity), BYTES with escapes, objects and literals among the leaves."""
    def inp(dt, shape, data, first=False):
        head = f'"datatype":"{dt}","shape":{json.dumps(shape)}'
        return ('{"name":"INPUT0",' + (f'"data":{data},{head}' if first else f'{head},"data":{data}')
                + "}")
    cases = [
        (1, inp("FP32", [2, 2], "[[1, 2.5], [[]], [-3e0, 4E-1]]", first=True)),
        (1, inp("FP64", [6], "[0.1, 1e-300, 0.54881350392732478, -0.0, NaN, -Infinity]")),
        (1, inp("INT64", [3], "[-9223372036854775808, 9223372036854775807, 123]")),
        (1, inp("UINT64", [2], "[18446744073709551615, 18446744073709551616]")),
        (1, inp("BOOL", [3], "[true, [false], null]")),
        (1, inp("FP32", [2], '[1, {"a": ["]", {}]}]')),
        (2, inp("BYTES", [2, 2], '[["ab", ""], ["\\u00e9\\n", "\\"x\\""]]')),
        (0, inp("INT32", [1, 16], "[" + ",".join(["0"] * 16) + "]", first=True)),
    ]
    for which, i in cases:
        put("infer_json", bytes([which]) + ('{"inputs":[' + i + "]}").encode())


# The order of nr_grpc_methods in src/frontends/grpc/grpc_control.c: a gRPC seed is the method's
# index (one byte) followed by the serialized request.
GRPC_METHODS = ["ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
                "ModelInfer", "ModelStreamInfer", "ModelConfig", "ModelStatistics",
                "RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
                "SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
                "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
                "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "TraceSetting",
                "LogSettings", "Check"]


def logging_requests():
    """The logging extension's update (fuzz_http.c restores the settings before every input)."""
    put("http", b'POST /v2/logging\n\n{"log_info":false,"log_verbose_level":0,'
                b'"log_format":"default"}')


def grpc_requests():
    """The gRPC calls recorded against Triton 2.51 (tests/e2e/data/triton_grpc.jsonl), each also
    as a stream request, plus shared-memory uses of the region "fz" fuzz_grpc.c registers."""
    try:
        from google.protobuf import text_format
        from tritonclient.grpc import service_pb2
    except Exception as e:  # tritonclient missing: no gRPC seeds
        print(f"skipping gRPC seeds: {e}")
        return
    for line in (ROOT / "tests" / "e2e" / "data" / "triton_grpc.jsonl").read_text().splitlines():
        e = json.loads(line)
        rpc = e["rpc"].rsplit("/", 1)[1]
        msg = getattr(service_pb2, f"{rpc}Request")()
        text_format.Parse(e["request_text"], msg)
        msg_bytes = msg.SerializeToString()
        for m in MODELS:
            msg_bytes = msg_bytes.replace(f"{m}_noconfig".encode(), m.encode())
        put("grpc", bytes([GRPC_METHODS.index(rpc)]) + msg_bytes)
        if rpc == "ModelInfer":
            put("grpc", bytes([GRPC_METHODS.index("ModelStreamInfer")]) + msg_bytes)
    req = service_pb2.ModelInferRequest(model_name="simple", id="shm")
    for i, n in enumerate(("INPUT0", "INPUT1")):
        t = req.inputs.add(name=n, datatype="INT32", shape=[1, 16])
        t.parameters["shared_memory_region"].string_param = "fz"
        t.parameters["shared_memory_offset"].int64_param = 64 * i
        t.parameters["shared_memory_byte_size"].int64_param = 64
    o = req.outputs.add(name="OUTPUT0")
    o.parameters["shared_memory_region"].string_param = "fz"
    o.parameters["shared_memory_offset"].int64_param = 1024
    o.parameters["shared_memory_byte_size"].int64_param = 64
    req.outputs.add(name="OUTPUT1").parameters["classification"].int64_param = 3
    put("grpc", bytes([GRPC_METHODS.index("ModelInfer")]) + req.SerializeToString())
    reg = service_pb2.SystemSharedMemoryRegisterRequest(name="r2", key="/nereid_fuzz_grpc",
                                                        offset=4096, byte_size=128)
    put("grpc", bytes([GRPC_METHODS.index("SystemSharedMemoryRegister")]) +
        reg.SerializeToString())
    put("grpc", bytes([GRPC_METHODS.index("SystemSharedMemoryStatus")]) +
        service_pb2.SystemSharedMemoryStatusRequest(name="fz").SerializeToString())
    logs = service_pb2.LogSettingsRequest()
    logs.settings["log_format"].string_param = "default"
    put("grpc", bytes([GRPC_METHODS.index("LogSettings")]) + logs.SerializeToString())


if __name__ == "__main__":
    configs()
    grpc_requests()
    unit_configs()
    config_jsons()
    requests()
    shm_requests()
    logging_requests()
    json_data_requests()
    for d in sorted(OUT.iterdir()):
        print(d.name, len(list(d.iterdir())))
