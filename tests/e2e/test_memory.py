"""Memory a request may take (docs/reliability.md, "Memory per request"): a JSON request costs a
small constant factor of its body (its `data` goes straight into the tensor, no node per value),
and memory that cannot be had is an answer (503 over HTTP, UNAVAILABLE over gRPC), never an abort.

The limit tests lower RLIMIT_AS of a running server (resource.prlimit on its pid) to the address
space it uses once warmed up plus a margin: ONNX Runtime, gRPC and the thread stacks reserve
hundreds of MB of address space that a fixed limit would have to guess. The measurement resets the
server's peak RSS (/proc/<pid>/clear_refs, "5") and asserts on bytes, never on time."""

import re
import resource

import grpc
import pytest

import models
from conftest import nereid_bin
from e2e_util import infer_json, post

MB = 1 << 20


def _sanitized():
    """ASan and TSan builds reserve terabytes of shadow address space, keep freed memory in
    quarantine and abort when malloc fails: neither a limit nor a peak RSS says anything there."""
    path = nereid_bin()
    if not path.is_file():
        return False  # the fixtures report the missing binary
    data = path.read_bytes()
    return b"__asan_init" in data or b"__tsan_init" in data


pytestmark = pytest.mark.skipif(_sanitized(), reason="sanitizer build")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo_memory")
    for name in ("identity_fp32", "identity_bytes", "sum_fp32"):
        models.write_model(root, name)
    return root


def status_kb(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def zeros_body(model_input, n, datatype, zero=b"0.0", sep=b", "):
    """{"inputs":[{"name":..,"shape":[1,n],"datatype":..,"data":[0.0, 0.0, ...]}]} as bytes:
    json.dumps' spacing, the way tritonclient.http sends numpy zeros."""
    return (b'{"inputs":[{"name":"%s","shape":[1,%d],"datatype":"%s","data":['
            % (model_input.encode(), n, datatype.encode())
            + sep.join([zero] * n) + b"]}]}")


def small_ok(srv):
    r = infer_json(srv.port, "identity_fp32",
                   {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                "data": [1.0, 2.0, 3.0, 4.0]}]})
    assert r.status == 200, r
    assert r.json()["outputs"][0]["data"] == [1.0, 2.0, 3.0, 4.0]


def limit_address_space(srv, margin):
    """RLIMIT_AS of the running server = what it maps now + margin (bytes)."""
    small_ok(srv)  # a connection thread and its malloc arena exist once
    limit = status_kb(srv.proc.pid, "VmSize") + margin
    resource.prlimit(srv.proc.pid, resource.RLIMIT_AS, (limit, limit))
    return limit


def test_json_request_beyond_the_memory_limit_is_503(server_factory, repo):
    """30M FP64 zeros: a 60 MB body whose tensor needs 240 MB, 150 MB of address space to spare.
    Before the data went straight into the tensor, the JSON reader took 24 bytes per value plus
    its growing stack (1.4 GB here) and the server aborted ("out of memory allocating")."""
    srv = server_factory([repo], ["--allow-metrics=false"])
    n = 30_000_000
    body = zeros_body("INPUT0", n, "FP64", zero=b"0", sep=b",")
    limit_address_space(srv, len(body) + 150 * MB)
    r = post(srv.port, "/v2/models/identity_fp32/infer", body,
             {"Content-Type": "application/json"})
    assert srv.alive(), "nereid died\n" + srv.describe()
    assert r.status == 503, r
    assert r.json() == {"error": f"unable to allocate {n * 8} bytes for input 'INPUT0'"}
    small_ok(srv)


def grpc_bytes_request(n):
    """A serialized ModelInferRequest for identity_bytes with n empty strings as bytes_contents:
    2 bytes each on the wire; protobuf-c's unpack takes a 16-byte ProtobufCBinaryData and, while
    it scans, a record of about 30 bytes for each."""
    def field(num, payload):
        return bytes([num << 3 | 2]) + varint(len(payload)) + payload

    def varint(v):
        out = b""
        while v >= 0x80:
            out += bytes([v & 0x7F | 0x80])
            v >>= 7
        return out + bytes([v])

    shape = varint(1) + varint(n)
    contents = b"\x42\x00" * n                      # InferTensorContents.bytes_contents (8)
    tensor = (field(1, b"INPUT0") + field(2, b"BYTES") + field(3, shape)
              + field(5, contents))
    return field(1, b"identity_bytes") + field(5, tensor)


def test_grpc_request_beyond_the_memory_limit_is_unavailable(server_factory, repo):
    """20M empty BYTES elements: a 40 MB message whose unpack takes ~900 MB; gRPC itself holds
    the message (and nereid a joined copy), 100 MB more to spare. The unpack fails in nereid's
    allocator and the call ends UNAVAILABLE; the server goes on serving both protocols."""
    srv = server_factory([repo], ["--allow-metrics=false"])
    n = 20_000_000
    msg = grpc_bytes_request(n)
    unlimited = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(srv.grpc_url, options=unlimited) as ch:
        call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        good = grpc_bytes_request(1)
        assert call(good, timeout=60) is not None
        limit_address_space(srv, 3 * len(msg) + 100 * MB)
        with pytest.raises(grpc.RpcError) as ei:
            call(msg, timeout=120)
        assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
        assert re.fullmatch(r"unable to allocate \d+ bytes to unpack the ModelInferRequest "
                            r"message", ei.value.details()), ei.value.details()
        assert srv.alive(), "nereid died\n" + srv.describe()
        assert call(good, timeout=60) is not None
    small_ok(srv)


def test_json_request_peak_memory_is_a_small_factor_of_its_body(server_factory, repo):
    """8M FP32 zeros as tritonclient sends them ("0.0, "): a 40 MB body, a 32 MB tensor and a
    one-float answer (sum_fp32). The server's peak RSS grows by the body and the tensor plus
    slack, at most 3x the body; before, the JSON reader alone took 24 bytes per value (~10x)."""
    srv = server_factory([repo], ["--allow-metrics=false", "--allow-grpc=false"])
    small_ok(srv)
    n = 8_000_000
    body = zeros_body("INPUT0", n, "FP32")
    pid = srv.proc.pid
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    base = status_kb(pid, "VmHWM")
    r = post(srv.port, "/v2/models/sum_fp32/infer", body, {"Content-Type": "application/json"})
    assert r.status == 200, r
    assert r.json()["outputs"][0]["data"] == [0.0]
    growth = status_kb(pid, "VmHWM") - base
    print(f"body {len(body) / MB:.1f} MiB, tensor {4 * n / MB:.1f} MiB, "
          f"peak RSS growth {growth / MB:.1f} MiB = {growth / len(body):.2f}x the body")
    assert growth <= 3 * len(body), f"peak RSS grew {growth} bytes for a {len(body)}-byte body"
