"""Binary tensor data extension: the official tritonclient.http with binary_data on/off for every
input and output, raw (header length 0) requests, FP16/BF16, BYTES, and the recorded binary
exchanges byte for byte (JSON header, Inference-Header-Content-Length, tensor bytes)."""

import gzip
import http.client
import itertools
import json
import struct
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto
from tritonclient.utils import InferenceServerException

from e2e_util import (assert_error, assert_matches_recorded, binary_request, bf16_bits, compact,
                      bytes_tensor, ort_run, post, replay, split_binary_response)
import models
from models import DTYPE_MODELS

RNG_SEED = 424242


@pytest.fixture(scope="module")
def client(main_server):
    c = httpclient.InferenceServerClient(url=main_server.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def model_file(repos):
    def path(name, version=1):
        repo = "repo_dtypes" if name in DTYPE_MODELS and name != "identity_fp32" else "repo"
        return repos[repo] / name / str(version) / "model.onnx"
    return path


def _input(name, arr, datatype, binary):
    i = httpclient.InferInput(name, list(arr.shape), datatype)
    i.set_data_from_numpy(arr, binary_data=binary)
    return i


# ----------------------------------------------------------------------------- tritonclient

@pytest.mark.parametrize("in0,in1,out0,out1", list(itertools.product([True, False], repeat=4)))
def test_simple_binary_json_mixes(client, model_file, in0, in1, out0, out1):
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-2**30, 2**30, size=(3, 16), dtype=np.int32)
    b = rng.integers(-2**30, 2**30, size=(3, 16), dtype=np.int32)
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=out0),
               httpclient.InferRequestedOutput("OUTPUT1", binary_data=out1)]
    res = client.infer("simple", [_input("INPUT0", a, "INT32", in0),
                                  _input("INPUT1", b, "INT32", in1)],
                       outputs=outputs, request_id="mix")
    ref = ort_run(model_file("simple"), {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), ref["OUTPUT0"])
    np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), ref["OUTPUT1"])
    resp = res.get_response()
    assert resp["id"] == "mix" and resp["model_version"] == "1"
    for o, binary in zip(resp["outputs"], (out0, out1)):
        assert ("parameters" in o) == binary and ("data" in o) == (not binary), o
        if binary:
            assert o["parameters"] == {"binary_data_size": 3 * 16 * 4}


def test_simple_default_outputs_binary(client, model_file):
    """outputs=None: the client sends binary_data_output=true; every output comes back binary."""
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 7, dtype=np.int32)
    res = client.infer("simple", [_input("INPUT0", a, "INT32", True),
                                  _input("INPUT1", b, "INT32", True)])
    np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(res.as_numpy("OUTPUT1"), a - b)
    assert all(o["parameters"] == {"binary_data_size": 128} for o in res.get_response()["outputs"])


@pytest.mark.parametrize("model", sorted(DTYPE_MODELS))
def test_every_datatype_binary(client, model_file, model):
    kserve, _, _, np_t = DTYPE_MODELS[model]
    rng = np.random.default_rng(zlib.crc32(model.encode()))
    shape = (4, 6)
    if kserve == "BOOL":
        x = rng.integers(0, 2, size=shape).astype(np.bool_)
    elif np.issubdtype(np_t, np.integer):
        info = np.iinfo(np_t)
        x = rng.integers(info.min, info.max, size=shape, dtype=np_t, endpoint=True)
    else:
        x = (rng.standard_normal(shape) * 100).astype(np_t)
        x.flat[0], x.flat[1], x.flat[2] = np.inf, -np.inf, -0.0
    res = client.infer(model, [_input("INPUT0", x, kserve, True)],
                       outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    out = res.as_numpy("OUTPUT0")
    if kserve == "BF16":
        ref = ort_run(model_file(model), {"INPUT0": bf16_bits(x)})["OUTPUT0"]
        np.testing.assert_array_equal(bf16_bits(out), ref)
        np.testing.assert_array_equal(out, (bf16_bits(x).astype(np.uint32) << 16).view(
            np.float32))
    else:
        ref = ort_run(model_file(model), {"INPUT0": x})["OUTPUT0"]
        assert out.dtype == ref.dtype
        np.testing.assert_array_equal(out, ref)
    o = res.get_response()["outputs"][0]
    assert o["datatype"] == kserve and o["shape"] == list(shape)


def test_add_fp16_binary(client, model_file):
    a = np.array([1.0, 2.5, -3.0, 65504.0], np.float16)
    b = np.array([0.5, -0.25, 1.0, 0.0], np.float16)
    res = client.infer("add_fp16", [_input("INPUT0", a, "FP16", True),
                                    _input("INPUT1", b, "FP16", True)])
    ref = ort_run(model_file("add_fp16"), {"INPUT0": a, "INPUT1": b})["OUTPUT0"]
    np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), ref)
    assert res.get_response()["outputs"][0]["shape"] == [4]


@pytest.mark.parametrize("model,kserve", [("identity_fp16", "FP16"), ("identity_bf16", "BF16"),
                                          ("add_fp16", "FP16")])
def test_half_output_as_json_refused(client, model, kserve):
    arr = np.ones((1, 4) if model != "add_fp16" else (4,), np.float16 if kserve == "FP16"
                  else np.float32)
    inputs = [_input("INPUT0", arr, kserve, True)]
    if model == "add_fp16":
        inputs.append(_input("INPUT1", arr, kserve, True))
    with pytest.raises(InferenceServerException) as ei:
        client.infer(model, inputs,
                     outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    assert ei.value.status() == "400"
    assert ei.value.message() == (f"sending {kserve} data via JSON is not supported. "
                                  "Please use the binary data format for output")
    # the server is fine afterwards
    client.infer(model, inputs)


def test_bytes_binary_keeps_nul_and_non_utf8(client):
    """nereid keeps BYTES elements whole (Triton cuts them at the first NUL: departure)."""
    x = np.array([[b"\xff\xfe\x00A", b"ok", b"", b"a\x00b\x00"]], dtype=np.object_)
    res = client.infer("identity_bytes", [_input("INPUT0", x, "BYTES", True)],
                       outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    assert res.as_numpy("OUTPUT0").tolist() == x.tolist()
    o = res.get_response()["outputs"][0]
    assert o["parameters"]["binary_data_size"] == sum(4 + len(e) for e in x.ravel())


def test_bytes_binary_in_json_out(client):
    x = np.array([[b"hello", b"", b"xyz"]], dtype=np.object_)
    res = client.infer("identity_bytes", [_input("INPUT0", x, "BYTES", True)],
                       outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)])
    assert res.get_response()["outputs"][0]["data"] == ["hello", "", "xyz"]


def test_two_versions_binary(client):
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    for version, expect in (("", 2 * x), ("1", x), ("2", 2 * x)):
        res = client.infer("two_versions", [_input("INPUT0", x, "FP32", True)],
                           model_version=version)
        np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), expect)


# ----------------------------------------------------------------------------- recorded bytes

@pytest.mark.parametrize("what", [
    "simple binary_data_output:true (all outputs binary)",
    "simple per-output binary_data (OUTPUT0 binary, OUTPUT1 JSON)",
    "simple binary in (both inputs), JSON out",
    "simple binary in / binary out",
    "simple binary in / binary out, header name lowercase",
    "simple mixed: INPUT0 binary + INPUT1 JSON; OUTPUT0 binary + OUTPUT1 JSON",
    "simple mixed: OUTPUT0 JSON + OUTPUT1 binary (binary is the 2nd output)",
    "simple binary in, inputs listed in reverse order (INPUT1 first)",
    "simple binary in with id + binary_data_output:true",
    "simple JSON body with Inference-Header-Content-Length equal to whole body",
    "identity_fp32 binary in NaN/Inf/-Inf, JSON out",
    "identity_fp32 raw binary body with Inference-Header-Content-Length: 0",
    "identity_fp32 raw binary with Inference-Header-Content-Length: 0 and empty body",
    "identity_fp32 raw binary, 3 bytes (not a multiple of 4)",
    "simple raw binary with Inference-Header-Content-Length: 0 (2-input model)",
    "add_fp16 raw binary with Inference-Header-Content-Length: 0 (2-input, max_batch_size 0)",
    "identity_fp32 classification:2 with binary_data:true",
    "identity_bytes JSON in, binary out",
    "identity_bytes binary in, JSON out",
    "identity_bytes binary BYTES 3 elements for shape [1,2]",
    "identity_bytes raw binary with Inference-Header-Content-Length: 0",
    "add_fp16 binary in / binary out (binary_data_output)",
    "add_fp16 binary in, default (JSON) output requested implicitly",
    "add_fp16 binary in, OUTPUT0 binary_data:false explicitly",
    "add_fp16 with a batch dim [1,4] on max_batch_size 0 model",
    "order_test infer, all binary, no outputs requested",
    "order_test infer, outputs [ZZZ binary, MMM JSON, AAA binary]",
])
def test_recorded_binary_exchange(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


def test_bytes_non_utf8_binary_out_whole(main_server):
    """Recorded request 'identity_bytes binary in with non-UTF-8, binary out': Triton answered
    the first element cut at its NUL (ff fe); nereid returns all 4 bytes (departure)."""
    r = replay(main_server.port, "identity_bytes binary in with non-UTF-8, binary out")
    assert r.status == 200 and r.header("Content-Type") == "application/octet-stream"
    header, outs = split_binary_response(r)
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 14}
    assert outs["OUTPUT0"] == bytes_tensor([b"\xff\xfe\x00A", b"ok"])


def test_raw_request_header_zero(main_server):
    """Inference-Header-Content-Length: 0: the whole body is the single input; batch dim 1 is
    prepended; every output comes back binary."""
    x = np.arange(6, dtype=np.float32) - 2.5
    r = post(main_server.port, "/v2/models/identity_fp32/infer", x.tobytes(),
             {"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": "0"})
    assert r.status == 200, r
    assert r.header("Content-Type") == "application/octet-stream"
    header, outs = split_binary_response(r)
    assert header == {"model_name": "identity_fp32", "model_version": "1", "outputs": [
        {"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 6],
         "parameters": {"binary_data_size": 24}}]}
    assert outs["OUTPUT0"] == x.tobytes()
    assert int(r.header("Inference-Header-Content-Length")) == len(r.body) - 24


def test_raw_request_shape_deduction(server_factory, tmp_path):
    """A raw request's shape comes from the config: two variable-size dimensions cannot be
    deduced (Triton's text, checked before the BYTES rule, so a BYTES input with two gets it
    too); one is the body's length over the rest; a BYTES input needs exactly one element,
    which [1, 1] has."""
    repo = tmp_path / "repo"
    models.write_identity(repo, "fp32_2var", "TYPE_FP32", TensorProto.FLOAT, [-1, -1])
    models.write_identity(repo, "bytes_2var", "TYPE_STRING", TensorProto.STRING, [-1, -1])
    models.write_identity(repo, "fp32_1var", "TYPE_FP32", TensorProto.FLOAT, [2, -1], [-1, -1])
    models.write_identity(repo, "bytes_1x1", "TYPE_STRING", TensorProto.STRING, [1, 1], [-1, -1])
    srv = server_factory([repo], name="raw")
    raw = {"Inference-Header-Content-Length": "0"}
    x = np.arange(6, dtype=np.float32)
    for model in ("fp32_2var", "bytes_2var"):
        assert_error(post(srv.port, f"/v2/models/{model}/infer", x.tobytes(), raw), 400,
                     "[request id: <id_unknown>] The shape of the raw input 'INPUT0' can not be "
                     "deduced because there are more than one variable-sized dimension")
    header, outs = split_binary_response(post(srv.port, "/v2/models/fp32_1var/infer",
                                              x.tobytes(), raw))
    assert header["outputs"][0]["shape"] == [2, 3] and outs["OUTPUT0"] == x.tobytes()
    header, outs = split_binary_response(post(srv.port, "/v2/models/bytes_1x1/infer", b"\x00hi",
                                              raw))
    assert header["outputs"][0]["shape"] == [1, 1]
    assert outs["OUTPUT0"] == bytes_tensor([b"\x00hi"])


@pytest.mark.parametrize("model,np_t,kserve", [("identity_fp16", np.float16, "FP16"),
                                               ("identity_int64", np.int64, "INT64"),
                                               ("identity_bf16", np.uint16, "BF16")])
def test_raw_request_other_types(main_server, model, np_t, kserve):
    x = np.arange(5).astype(np_t)
    r = post(main_server.port, f"/v2/models/{model}/infer", x.tobytes(),
             {"Inference-Header-Content-Length": "0"})
    header, outs = split_binary_response(r)
    assert header["outputs"][0]["datatype"] == kserve
    assert header["outputs"][0]["shape"] == [1, 5]
    assert outs["OUTPUT0"] == x.tobytes()


def test_binary_response_headers(main_server):
    head = {"inputs": [{"name": n, "shape": [1, 16], "datatype": "INT32",
                        "parameters": {"binary_data_size": 64}} for n in ("INPUT0", "INPUT1")],
            "parameters": {"binary_data_output": True}}
    a = np.arange(16, dtype=np.int32)
    body, hdrs = binary_request(head, [a.tobytes(), a.tobytes()])
    r = post(main_server.port, "/v2/models/simple/infer", body, hdrs)
    assert r.status == 200
    assert r.header("Content-Type") == "application/octet-stream"
    assert r.header("Content-Length") == str(len(r.body))
    hlen = int(r.header("Inference-Header-Content-Length"))
    assert hlen == len(r.body) - 128
    assert r.body[:hlen].startswith(b'{"model_name":"simple","model_version":"1","outputs":[')
    header, outs = split_binary_response(r)
    assert outs["OUTPUT0"] == (2 * a).tobytes() and outs["OUTPUT1"] == bytes(64)
    assert r.header("Content-Encoding") is None


def test_binary_input_out_of_order_chunks(main_server):
    """Chunks follow the JSON in input order; JSON inputs can sit between binary ones."""
    a = np.arange(16, dtype=np.int32)
    b = np.arange(16, dtype=np.int32) * 3
    head = {"inputs": [
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.tolist()}],
        "outputs": [{"name": "OUTPUT1", "parameters": {"binary_data": True}}]}
    body, hdrs = binary_request(head, [b.tobytes()])
    r = post(main_server.port, "/v2/models/simple/infer", body, hdrs)
    header, outs = split_binary_response(r)
    assert [o["name"] for o in header["outputs"]] == ["OUTPUT1"]
    assert outs["OUTPUT1"] == (a - b).tobytes()


@pytest.mark.parametrize("mode", ["content-length", "chunked", "gzip"])
def test_binary_input_after_every_header_length(main_server, mode):
    """The server leaves room before a body (or its decompressed form) so that the tensor after
    the JSON header starts aligned and ONNX Runtime reads it in place. Every header length mod
    16, a tensor of 160 KB (many reads; chunked bodies grow their buffer), one keep-alive
    connection: the bytes must come back exactly."""
    x = np.random.default_rng(RNG_SEED).standard_normal((1, 40000)).astype(np.float32)
    conn = http.client.HTTPConnection("127.0.0.1", main_server.port, timeout=30)
    try:
        for pad in range(16):
            head = compact({"inputs": [{"name": "INPUT0", "shape": [1, 40000], "datatype": "FP32",
                                        "parameters": {"binary_data_size": x.nbytes}}],
                            "parameters": {"binary_data_output": True}}).encode() + b" " * pad
            body, hdrs = binary_request(head, [x.tobytes()])
            if mode == "gzip":
                body, hdrs = gzip.compress(body), dict(hdrs, **{"Content-Encoding": "gzip"})
            if mode == "chunked":
                conn.request("POST", "/v2/models/identity_fp32/infer",
                             body=(body[i:i + 50000] for i in range(0, len(body), 50000)),
                             headers=dict(hdrs, **{"Transfer-Encoding": "chunked"}),
                             encode_chunked=True)
            else:
                conn.request("POST", "/v2/models/identity_fp32/infer", body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200, (pad, data[:200])
            hlen = int(r.getheader("Inference-Header-Content-Length"))
            assert data[hlen:] == x.tobytes(), f"header of {len(head)} bytes"
    finally:
        conn.close()


def test_binary_replies_around_the_coalescing_size(main_server):
    """Replies of 64 KiB or less are copied into one buffer (one send), larger ones are sent
    from the output tensor (iovec): sizes on both sides of the line, on one keep-alive
    connection, come back exactly with the right headers."""
    conn = http.client.HTTPConnection("127.0.0.1", main_server.port, timeout=30)
    try:
        for n in (1, 16300, 16360, 16384, 16400, 20000):
            x = np.random.default_rng(n).standard_normal((1, n)).astype(np.float32)
            head = compact({"inputs": [{"name": "INPUT0", "shape": [1, n], "datatype": "FP32",
                                        "parameters": {"binary_data_size": x.nbytes}}],
                            "parameters": {"binary_data_output": True}}).encode()
            body, hdrs = binary_request(head, [x.tobytes()])
            conn.request("POST", "/v2/models/identity_fp32/infer", body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            assert r.status == 200, (n, data[:200])
            assert r.getheader("Content-Type") == "application/octet-stream"
            assert int(r.getheader("Content-Length")) == len(data)
            hlen = int(r.getheader("Inference-Header-Content-Length"))
            assert json.loads(data[:hlen])["outputs"][0]["parameters"] == {
                "binary_data_size": x.nbytes}
            assert data[hlen:] == x.tobytes(), n
    finally:
        conn.close()


def test_zero_size_binary_output(main_server):
    head = {"inputs": [{"name": "INPUT0", "shape": [2, 0], "datatype": "FP32",
                        "parameters": {"binary_data_size": 0}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}
    body, hdrs = binary_request(head)
    r = post(main_server.port, "/v2/models/identity_fp32/infer", body, hdrs)
    assert r.status == 200, r
    assert r.json()["outputs"][0] == {"name": "OUTPUT0", "datatype": "FP32", "shape": [2, 0],
                                      "parameters": {"binary_data_size": 0}}


def test_uint32_le_layout(main_server):
    """Little-endian, row-major, no padding."""
    vals = [1, 2**31, 2**32 - 1]
    head = {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "UINT32",
                        "parameters": {"binary_data_size": 12}}]}
    body, hdrs = binary_request(head, [struct.pack("<3I", *vals)])
    r = post(main_server.port, "/v2/models/identity_uint32/infer", body, hdrs)
    assert r.status == 200 and r.json()["outputs"][0]["data"] == vals
    assert_error(post(main_server.port, "/v2/models/identity_uint32/infer", body[:-1], hdrs), 400,
                 "unexpected size for input 'INPUT0', expecting 1 additional bytes for model "
                 "'identity_uint32'")
