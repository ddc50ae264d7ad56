"""gRPC with the official clients (tritonclient.grpc sync, async and aio, and the generated
stub), against the real server: every RPC, inference on every datatype with the HTTP path's
answers, typed contents, classification, shared memory registered over one protocol and used over
the other, the dynamic batcher, streaming with many requests in flight, errors and their status
codes, compression, TLS, 64 concurrent clients, and the server's command-line flags for gRPC.

Expected texts come from Triton 2.51 (spec/triton-answers, research notes on its gRPC frontend);
test_grpc_recorded.py replays the recorded calls byte for byte.
"""

import asyncio
import json
import queue
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

import models
from conftest import free_port, run_cli
from e2e_util import bf16_bits

LONG = 60000000


@pytest.fixture(scope="module")
def gc(main_server):
    c = grpcclient.InferenceServerClient(main_server.grpc_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def hc(main_server):
    c = httpclient.InferenceServerClient(main_server.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def stub(main_server):
    ch = grpc.insecure_channel(main_server.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(ch)
    ch.close()


def grpc_error(fn, *args, **kw):
    with pytest.raises(InferenceServerException) as ei:
        fn(*args, **kw)
    return ei.value.status(), ei.value.message()


def rpc_error(fn, req):
    with pytest.raises(grpc.RpcError) as ei:
        fn(req, timeout=30)
    return ei.value.code(), ei.value.details()


def infer_simple(client, mod, a, b, **kw):
    i0 = mod.InferInput("INPUT0", list(a.shape), "INT32")
    i1 = mod.InferInput("INPUT1", list(b.shape), "INT32")
    i0.set_data_from_numpy(a)
    i1.set_data_from_numpy(b)
    return client.infer("simple", [i0, i1], **kw)


# ----------------------------------------------------------------------------- health, metadata

def test_health_and_readiness(gc, main_server, small_server):
    assert gc.is_server_live()
    assert not gc.is_server_ready()          # broken failed to load (strict readiness)
    assert gc.is_model_ready("simple") and gc.is_model_ready("simple", "1")
    assert not gc.is_model_ready("broken") and not gc.is_model_ready("nosuchmodel")
    small = grpcclient.InferenceServerClient(small_server.grpc_url)
    assert small.is_server_ready()
    small.close()


def health_check(url):
    with grpc.insecure_channel(url) as ch:
        check = ch.unary_unary("/grpc.health.v1.Health/Check",
                               request_serializer=lambda b: b, response_deserializer=lambda b: b)
        return check(b"\x0a\x03any", timeout=30)   # service="any": ignored, as by Triton


def test_grpc_health_check(main_server, small_server):
    assert health_check(small_server.grpc_url) == b"\x08\x01"   # SERVING
    assert health_check(main_server.grpc_url) == b"\x08\x02"    # NOT_SERVING: broken failed


def test_unknown_method_is_unimplemented(main_server):
    with grpc.insecure_channel(main_server.grpc_url) as ch:
        m = ch.unary_unary("/inference.GRPCInferenceService/NoSuchRpc",
                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as ei:
            m(b"", timeout=30)
        assert ei.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_metadata_and_config_equal_http(gc, hc):
    for model in ("simple", "identity_fp32", "two_versions", "simple_noconfig", "dyn_batch",
                  "identity_bf16", "add_fp16"):
        g = gc.get_model_metadata(model, as_json=True)
        h = hc.get_model_metadata(model)
        assert g["name"] == h["name"] and g["versions"] == h["versions"]
        assert g["platform"] == h["platform"]
        for key in ("inputs", "outputs"):
            assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in g[key]] == \
                [(t["name"], t["datatype"], t["shape"]) for t in h[key]]
        # the config: the same message over both protocols (HTTP's JSON read with the
        # official ModelConfig schema)
        http_cfg = json_format.Parse(json.dumps(hc.get_model_config(model)),
                                     model_config_pb2.ModelConfig(), ignore_unknown_fields=True)
        assert gc.get_model_config(model).config == http_cfg, model


def test_metadata_errors(gc):
    assert grpc_error(gc.get_model_metadata, "nosuchmodel") == \
        ("StatusCode.NOT_FOUND", "Request for unknown model: 'nosuchmodel' is not found")
    assert grpc_error(gc.get_model_config, "simple", "-3") == \
        ("StatusCode.INVALID_ARGUMENT",
         "invalid model version specified '-3' , version should be an integral value > 0")


# ----------------------------------------------------------------------------- inference

def http_and_grpc(gc, hc, model, feeds, outputs=None):
    """Runs one request both ways; returns the two results' outputs as numpy arrays."""
    res = []
    for client, mod in ((gc, grpcclient), (hc, httpclient)):
        inputs = []
        for name, (arr, dt) in feeds.items():
            i = mod.InferInput(name, list(arr.shape), dt)
            i.set_data_from_numpy(arr)
            inputs.append(i)
        r = client.infer(model, inputs)
        res.append({o: r.as_numpy(o) for o in outputs or ["OUTPUT0"]})
    return res


@pytest.mark.parametrize("kserve", [d[0] for d in models.DTYPES])
def test_every_datatype_equals_http(gc, hc, kserve):
    name = models.dtype_model_name(kserve)
    np_t = models.DTYPE_MODELS[name][3]
    rng = np.random.default_rng(7)
    if kserve == "BOOL":
        arr = rng.integers(0, 2, (2, 5)).astype(np.bool_)
    elif kserve in ("FP16", "FP32", "FP64", "BF16"):
        arr = rng.standard_normal((2, 5)).astype(np_t)
    else:
        info = np.iinfo(np_t)
        arr = rng.integers(info.min, info.max, (2, 5), dtype=np_t, endpoint=True)
    g, h = http_and_grpc(gc, hc, name, {"INPUT0": (arr, kserve)})
    np.testing.assert_array_equal(g["OUTPUT0"], h["OUTPUT0"])
    if kserve != "BF16":
        np.testing.assert_array_equal(g["OUTPUT0"], arr)


def test_bytes_equal_http(gc, hc):
    arr = np.array([[b"hello", b"", b"\xff\x00z", b"x" * 300]], dtype=np.object_)
    g, h = http_and_grpc(gc, hc, "identity_bytes", {"INPUT0": (arr, "BYTES")})
    assert g["OUTPUT0"].tolist() == h["OUTPUT0"].tolist() == arr.tolist()


def test_simple_ids_versions_and_requested_outputs(gc):
    a = np.arange(32, dtype=np.int32).reshape(2, 16)
    b = np.full((2, 16), 3, dtype=np.int32)
    r = infer_simple(gc, grpcclient, a, b, request_id="r-1",
                     outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    resp = r.get_response()
    assert (resp.id, resp.model_name, resp.model_version) == ("r-1", "simple", "1")
    assert [o.name for o in resp.outputs] == ["OUTPUT1"]
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    x = np.array([[1.0, 2.0]], dtype=np.float32)
    i = grpcclient.InferInput("INPUT0", [1, 2], "FP32")
    i.set_data_from_numpy(x)
    np.testing.assert_array_equal(gc.infer("two_versions", [i]).as_numpy("OUTPUT0"), 2 * x)
    np.testing.assert_array_equal(gc.infer("two_versions", [i], model_version="1")
                                  .as_numpy("OUTPUT0"), x)


def test_large_tensor_round_trip(gc):
    """4 MiB each way: the reply leaves from ONNX Runtime's buffer as its own slice."""
    x = np.random.default_rng(3).standard_normal((1, 1 << 20)).astype(np.float32)
    i = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    np.testing.assert_array_equal(gc.infer("identity_fp32", [i]).as_numpy("OUTPUT0"), x)


def typed_request(model, dt, shape, field, values):
    req = service_pb2.ModelInferRequest(model_name=model)
    t = req.inputs.add(name="INPUT0", datatype=dt, shape=shape)
    getattr(t.contents, field).extend(values)
    return req


@pytest.mark.parametrize("kserve,field,values", [
    ("BOOL", "bool_contents", [True, False, True]),
    ("INT8", "int_contents", [-128, 0, 127]),
    ("INT16", "int_contents", [-32768, 5, 32767]),
    ("INT32", "int_contents", [-(2 ** 31), 0, 2 ** 31 - 1]),
    ("INT64", "int64_contents", [-(2 ** 63), 1, 2 ** 63 - 1]),
    ("UINT8", "uint_contents", [0, 7, 255]),
    ("UINT16", "uint_contents", [0, 7, 65535]),
    ("UINT32", "uint_contents", [0, 7, 2 ** 32 - 1]),
    ("UINT64", "uint64_contents", [0, 7, 2 ** 64 - 1]),
    ("FP32", "fp32_contents", [0.5, -1.25, 3.0]),
    ("FP64", "fp64_contents", [0.1, -1e300, 2.5]),
])
def test_typed_contents(stub, kserve, field, values):
    """Inputs given as typed contents (narrowed to 1 or 2 bytes for INT8/16, UINT8/16) come back
    as raw outputs."""
    np_t = models.DTYPES[[d[0] for d in models.DTYPES].index(kserve)][3]
    resp = stub.ModelInfer(typed_request(models.dtype_model_name(kserve), kserve, [1, 3], field,
                                         values), timeout=30)
    assert list(resp.outputs[0].shape) == [1, 3]
    got = np.frombuffer(resp.raw_output_contents[0], dtype=np_t)
    np.testing.assert_array_equal(got, np.array(values, dtype=np_t))


def test_typed_contents_errors(stub):
    req = typed_request("identity_fp16", "FP16", [1, 2], "fp32_contents", [1.0, 2.0])
    assert rpc_error(stub.ModelInfer, req) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "unexpected explicit tensor data for input tensor 'INPUT0' for model 'identity_fp16' of "
        "type 'FP32', expected datatype 'FP16'")
    req = typed_request("identity_fp32", "FP32", [1, 2], "fp32_contents", [1.0, 2.0])
    req.inputs[0].contents.fp64_contents.extend([1.0, 2.0])
    assert rpc_error(stub.ModelInfer, req) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "unexpected explicit tensor data for input tensor 'INPUT0' for model 'identity_fp32', "
        "binary data was already supplied.")


def test_parameters(stub, gc):
    a = np.zeros((1, 16), dtype=np.int32)
    # what perf_analyzer sends with every request, and the ones Triton interprets
    infer_simple(gc, grpcclient, a, a, priority=1, timeout=1000000,
                 parameters={"custom": "x", "n": 3, "f": True})
    req = service_pb2.ModelInferRequest(model_name="identity_fp32")
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1])
    req.raw_input_contents.append(np.zeros(1, np.float32).tobytes())
    req.parameters["triton_enable_empty_final_response"].bool_param = True
    req.parameters["ratio"].double_param = 0.5
    stub.ModelInfer(req, timeout=30)
    cases = [
        ("priority", "string_param", "1",
         "invalid value type for 'priority' parameter, expected int64_param or uint64_param."),
        ("priority", "int64_param", -1, "invalid value for 'priority', expected value >= 0."),
        ("timeout", "uint64_param", 1,
         "invalid value type for 'timeout' parameter, expected int64_param."),
        ("sequence_start", "int64_param", 1,
         "invalid value type for 'sequence_start' parameter, expected bool_param."),
        ("custom", "uint64_param", 1, "invalid value type for 'custom' parameter, expected "
                                      "int64_param, bool_param, or string_param."),
    ]
    for key, kind, value, msg in cases:
        bad = service_pb2.ModelInferRequest()
        bad.CopyFrom(req)
        bad.parameters.clear()
        setattr(bad.parameters[key], kind, value)
        assert rpc_error(stub.ModelInfer, bad) == (grpc.StatusCode.INVALID_ARGUMENT, msg), key


def test_classification(gc, hc, stub):
    x = np.array([[0.1, 0.9, 0.5, 0.3]], dtype=np.float32)
    res = []
    for client, mod in ((gc, grpcclient), (hc, httpclient)):
        i = mod.InferInput("INPUT0", [1, 4], "FP32")
        i.set_data_from_numpy(x)
        o = mod.InferRequestedOutput("OUTPUT0", class_count=2)
        res.append(client.infer("identity_fp32", [i], outputs=[o]).as_numpy("OUTPUT0").tolist())
    assert res[0] == res[1] == [[b"0.900000:1", b"0.500000:2"]]
    # over HTTP 0 means the plain tensor; Triton's gRPC frontend refuses it
    req = service_pb2.ModelInferRequest(model_name="identity_fp32")
    req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    req.raw_input_contents.append(x.tobytes())
    req.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 0
    assert rpc_error(stub.ModelInfer, req) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value for 'classification' parameter, expected >= 0")


def test_inference_errors(gc, stub):
    a = np.zeros((1, 16), dtype=np.int32)
    i0 = grpcclient.InferInput("INPUT0", [1, 16], "INT32")
    i0.set_data_from_numpy(a)
    assert grpc_error(gc.infer, "nosuchmodel", [i0]) == (
        "StatusCode.NOT_FOUND", "Request for unknown model: 'nosuchmodel' is not found")
    assert grpc_error(gc.infer, "simple", [i0]) == (
        "StatusCode.INVALID_ARGUMENT",
        "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'simple'. Got "
        "input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all "
        "required input(s).")
    assert grpc_error(gc.infer, "broken", [i0]) == (
        "StatusCode.NOT_FOUND", "Request for unknown model: 'broken' has no available versions")
    assert rpc_error(stub.ModelInfer, service_pb2.ModelInferRequest(model_name="simple",
                                                                    model_version="1x")) == (
        grpc.StatusCode.INVALID_ARGUMENT, "expected 2 inputs but got 0 inputs for model 'simple'"
        ". Got input(s) [], but missing required input(s) ['INPUT0','INPUT1']. Please provide "
        "all required input(s).".replace("expected", "[request id: <id_unknown>] expected", 1))


def test_many_unknown_inputs_answered(main_server):
    """200,000 inputs the model does not have, over gRPC: the names are matched by hash, so the
    answer (Triton's text, every name) comes well within the call's timeout; pairwise it took
    minutes. (The 2 MB text travels in the trailers: the client raises its metadata limit.)"""
    n = 200_000
    ch = grpc.insecure_channel(main_server.grpc_url, options=[("grpc.max_metadata_size", 1 << 24)])
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    req = service_pb2.ModelInferRequest(model_name="simple")
    for i in range(n):
        t = req.inputs.add(name=f"X{i}", datatype="INT32", shape=[1])
        t.contents.int_contents.append(1)
    got = ",".join(f"'X{i}'" for i in reversed(range(n)))
    assert rpc_error(stub.ModelInfer, req) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        f"[request id: <id_unknown>] expected 2 inputs but got {n} inputs for model 'simple'. Got "
        f"input(s) [{got}], but missing required input(s) ['INPUT0','INPUT1']. Please provide all "
        "required input(s).")
    ch.close()


def test_statistics_count_both_protocols(gc, hc):
    before = gc.get_inference_statistics("identity_int64").model_stats[0].inference_stats
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    for client, mod in ((gc, grpcclient), (hc, httpclient)) * 3:
        i = mod.InferInput("INPUT0", [2, 3], "INT64")
        i.set_data_from_numpy(x)
        client.infer("identity_int64", [i])
    g = gc.get_inference_statistics("identity_int64").model_stats[0]
    h = hc.get_inference_statistics("identity_int64")["model_stats"][0]
    assert g.inference_stats.success.count == before.success.count + 6
    assert g.inference_stats.success.count == h["inference_stats"]["success"]["count"]
    assert g.inference_count == h["inference_count"]
    assert grpc_error(gc.get_inference_statistics, "nosuchmodel") == (
        "StatusCode.INVALID_ARGUMENT", "requested model 'nosuchmodel' is not available")


# ----------------------------------------------------------------------------- repository

def test_repository(gc, stub):
    index = gc.get_model_repository_index(as_json=True)["models"]
    assert {"name": "simple", "version": "1", "state": "READY"} in index
    assert grpc_error(gc.load_model, "simple") == (
        "StatusCode.UNAVAILABLE", "explicit model load / unload is not allowed if polling is "
                                  "enabled")
    assert grpc_error(gc.unload_model, "simple") == (
        "StatusCode.UNAVAILABLE", "explicit model load / unload is not allowed if polling is "
                                  "enabled")
    req = service_pb2.RepositoryIndexRequest(repository_name="other")
    assert rpc_error(stub.RepositoryIndex, req) == (
        grpc.StatusCode.UNIMPLEMENTED, "'repository_name' specification is not supported")
    req = service_pb2.RepositoryModelLoadRequest(model_name="simple")
    req.parameters["config"].int64_param = 1
    assert rpc_error(stub.RepositoryModelLoad, req) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid value type for load parameter 'config', expected string_param.")


# ----------------------------------------------------------------------------- shared memory

def test_shared_memory_across_protocols(gc, hc):
    """A region registered over gRPC serves an HTTP request and the reverse; status agrees."""
    size = 64
    h_in = shm.create_shared_memory_region("g_in", "/nereid_test_grpc_in", size)
    h_out = shm.create_shared_memory_region("g_out", "/nereid_test_grpc_out", size)
    try:
        a = np.arange(16, dtype=np.int32)
        shm.set_shared_memory_region(h_in, [a])
        gc.register_system_shared_memory("g_in", "/nereid_test_grpc_in", size)
        hc.register_system_shared_memory("g_out", "/nereid_test_grpc_out", size)
        st = gc.get_system_shared_memory_status(as_json=True)["regions"]
        assert st["g_in"]["key"] == "/nereid_test_grpc_in" and "g_out" in st
        assert {r["name"] for r in hc.get_system_shared_memory_status()} >= {"g_in", "g_out"}
        for client, mod in ((hc, httpclient), (gc, grpcclient)):
            i0 = mod.InferInput("INPUT0", [1, 16], "INT32")
            i0.set_shared_memory("g_in", size)
            i1 = mod.InferInput("INPUT1", [1, 16], "INT32")
            i1.set_data_from_numpy(np.ones((1, 16), np.int32))
            o = mod.InferRequestedOutput("OUTPUT0")
            o.set_shared_memory("g_out", size)
            r = client.infer("simple", [i0, i1], outputs=[o])
            if mod is grpcclient:   # written to the region: an empty raw entry, as Triton's
                assert r.get_response().raw_output_contents == [b""]
            got = shm.get_contents_as_numpy(h_out, np.int32, [1, 16])
            np.testing.assert_array_equal(got, (a + 1).reshape(1, 16))
            shm.set_shared_memory_region(h_out, [np.zeros(16, np.int32)])
        assert grpc_error(gc.register_system_shared_memory, "g_in", "/nereid_test_grpc_in",
                          size) == ("StatusCode.ALREADY_EXISTS",
                                    "shared memory region 'g_in' already in manager")
        assert grpc_error(gc.get_system_shared_memory_status, "nope") == (
            "StatusCode.NOT_FOUND", "Unable to find system shared memory region: 'nope'")
        gc.unregister_system_shared_memory("nope")  # unknown: not an error
        gc.unregister_system_shared_memory("g_in")
        hc.unregister_system_shared_memory("g_out")
        assert gc.get_system_shared_memory_status(as_json=True).get("regions", {}) == {}
    finally:
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)


def test_shared_memory_parameter_errors(stub):
    req = service_pb2.ModelInferRequest(model_name="identity_fp32")
    t = req.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 1])
    t.parameters["shared_memory_region"].string_param = "r"
    assert rpc_error(stub.ModelInfer, req) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "'shared_memory_byte_size' must be specified along with 'shared_memory_region' "
        "parameter for tensor 'INPUT0'")
    t.parameters["shared_memory_byte_size"].int64_param = 4
    assert rpc_error(stub.ModelInfer, req) == (
        grpc.StatusCode.NOT_FOUND, "Unable to find shared memory region: 'r'")


def test_cuda_shared_memory_without_gpus(gc):
    assert gc.get_cuda_shared_memory_status(as_json=True).get("regions", {}) == {}
    assert grpc_error(gc.register_cuda_shared_memory, "c", b"\0" * 64, 0, 64) == (
        "StatusCode.INVALID_ARGUMENT",
        "failed to register CUDA shared memory region: 'c', GPUs not supported")
    gc.unregister_cuda_shared_memory()


# ----------------------------------------------------------------------------- trace, logging

def test_trace_settings_read_as_off(gc):
    s = gc.get_trace_settings(as_json=True)["settings"]
    assert s["trace_level"]["value"] == ["OFF"] and s["trace_mode"]["value"] == ["triton"]
    assert grpc_error(gc.update_trace_settings, settings={"trace_file": "/tmp/x"}) == (
        "StatusCode.UNIMPLEMENTED",
        "trace file location can not be updated through network protocol")
    assert grpc_error(gc.update_trace_settings, settings={"trace_level": ["TIMESTAMPS"]}) == (
        "StatusCode.INVALID_ARGUMENT",
        "Attempting to set invalid trace setting :trace file name is not given")


def test_log_settings(gc, stub):
    s = gc.get_log_settings().settings
    assert s["log_info"].bool_param is True and s["log_format"].string_param == "default"
    assert s["log_file"].string_param == ""
    s = gc.update_log_settings({"log_verbose_level": 1}).settings
    assert s["log_verbose_level"].uint32_param == 1
    gc.update_log_settings({"log_verbose_level": 0})
    req = service_pb2.LogSettingsRequest()
    req.settings["log_info"].string_param = "yes"   # the client would coerce it
    assert rpc_error(stub.LogSettings, req) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                "expect boolean for 'log_info'")
    assert grpc_error(gc.update_log_settings, {"log_file": "/tmp/x"}) == (
        "StatusCode.UNIMPLEMENTED",
        "log file location can not be updated through network protocol")
    assert grpc_error(gc.update_log_settings, {"log_format": "json"}) == (
        "StatusCode.INVALID_ARGUMENT", "invalid argument for log_format, got: json")


# ----------------------------------------------------------------------------- concurrency

def test_async_infer_callbacks(gc):
    done = queue.Queue()
    for k in range(8):
        a = np.full((1, 16), k, dtype=np.int32)
        i0 = grpcclient.InferInput("INPUT0", [1, 16], "INT32")
        i0.set_data_from_numpy(a)
        i1 = grpcclient.InferInput("INPUT1", [1, 16], "INT32")
        i1.set_data_from_numpy(a)
        gc.async_infer("simple", [i0, i1], lambda result, error, k=k: done.put((k, result, error)))
    for _ in range(8):
        k, result, error = done.get(timeout=60)
        assert error is None
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 16), 2 * k))


def test_64_concurrent_clients(main_server):
    def worker(k):
        c = grpcclient.InferenceServerClient(main_server.grpc_url)
        try:
            for j in range(10):
                a = np.full((1, 16), k * 100 + j, dtype=np.int32)
                r = infer_simple(c, grpcclient, a, a, request_id=f"{k}-{j}")
                assert r.get_response().id == f"{k}-{j}"
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), 2 * a)
        finally:
            c.close()
    with ThreadPoolExecutor(64) as ex:
        for f in [ex.submit(worker, k) for k in range(64)]:
            f.result()


def test_dynamic_batching_over_grpc(server_factory, tmp_path):
    """Eight concurrent gRPC requests form one batch of 8 (models.graph_batch_sum)."""
    repo = tmp_path / "repo"
    models.write_batch_sum(repo, "db", f"dynamic_batching {{ max_queue_delay_microseconds: {LONG}"
                                       " }\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n")
    srv = server_factory([repo])
    c = grpcclient.InferenceServerClient(srv.grpc_url)

    def one(i):
        x = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
        x.set_data_from_numpy(np.array([[2.0 ** i]], np.float32))
        return c.infer("db", [x], request_id=f"r{i}")

    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(one, range(8)))
    for i, r in enumerate(results):
        assert r.get_response().id == f"r{i}"
        assert r.as_numpy("OUTPUT0").tolist() == [[2.0 ** i]]
        assert r.as_numpy("BATCH_SUM").tolist() == [[255.0]]
    st = c.get_inference_statistics("db").model_stats[0]
    assert (st.execution_count, st.inference_count) == (1, 8)
    c.close()


# ----------------------------------------------------------------------------- streaming

def stream_request(k, model="identity_fp32", dt="FP32", value=None):
    x = np.full((1, 4), k if value is None else value, dtype=np.float32)
    i = grpcclient.InferInput("INPUT0", [1, 4], dt)
    if dt == "FP32":
        i.set_data_from_numpy(x)
    else:
        i.set_data_from_numpy(x.astype(np.int32))
    return model, [i]


def test_stream_many_in_flight_in_order_with_errors(main_server):
    c = grpcclient.InferenceServerClient(main_server.grpc_url)
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    for k in range(16):
        model, inputs = stream_request(k)
        c.async_stream_infer(model, inputs, request_id=f"s{k}")
        if k == 7:   # an error in the middle: answered in its place, the stream goes on
            model, inputs = stream_request(k, dt="INT32")
            c.async_stream_infer(model, inputs, request_id="bad")
    seen = []
    for _ in range(17):
        result, error = got.get(timeout=60)
        if error is not None:
            seen.append(("error", str(error)))
            continue
        resp = result.get_response()
        assert resp.parameters["triton_final_response"].bool_param is True
        assert result.as_numpy("OUTPUT0").tolist() == [[int(resp.id[1:])] * 4]
        seen.append(resp.id)
    c.stop_stream()
    c.close()
    assert seen[:8] == [f"s{k}" for k in range(8)]
    assert seen[8] == ("error", "[request id: bad] inference input 'INPUT0' data-type is "
                                "'INT32', but model 'identity_fp32' expects 'FP32'")
    assert seen[9:] == [f"s{k}" for k in range(8, 16)]


def test_stream_raw_messages(main_server):
    """The stream's error layout as Triton's: before the request reaches a model only the id."""
    with grpc.insecure_channel(main_server.grpc_url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        reqs = [service_pb2.ModelInferRequest(model_name="nosuchmodel", id="x1"),
                service_pb2.ModelInferRequest(model_name="simple", id="x2")]
        out = list(stub.ModelStreamInfer(iter(reqs), timeout=60))
    assert [o.error_message for o in out] == [
        "Request for unknown model: 'nosuchmodel' is not found",
        "[request id: x2] expected 2 inputs but got 0 inputs for model 'simple'. Got input(s) [],"
        " but missing required input(s) ['INPUT0','INPUT1']. Please provide all required "
        "input(s)."]
    assert [o.infer_response.id for o in out] == ["x1", "x2"]
    assert not out[0].infer_response.model_name


def test_aio_client(main_server):
    async def run():
        c = aioclient.InferenceServerClient(main_server.grpc_url)
        assert await c.is_server_live()
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        i0 = aioclient.InferInput("INPUT0", [1, 16], "INT32")
        i0.set_data_from_numpy(a)
        i1 = aioclient.InferInput("INPUT1", [1, 16], "INT32")
        i1.set_data_from_numpy(a)
        r = await c.infer("simple", [i0, i1])
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), 2 * a)

        async def requests():
            for k in range(4):
                model, inputs = stream_request(k)
                yield {"model_name": model, "inputs": inputs, "request_id": str(k)}
        ids = []
        async for result, error in c.stream_infer(requests()):
            assert error is None
            ids.append(result.get_response().id)
        assert ids == ["0", "1", "2", "3"]
        await c.close()
    asyncio.run(run())


# ----------------------------------------------------------------------------- transport

def test_request_compression(gc):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    for algo in ("gzip", "deflate"):
        r = infer_simple(gc, grpcclient, a, a, compression_algorithm=algo)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), 2 * a)


def test_response_compression_level(server_factory, repos):
    srv = server_factory([repos["repo_small"]], ["--grpc-infer-response-compression-level=high"])
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    x = np.zeros((1, 4096), dtype=np.float32)
    i = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    np.testing.assert_array_equal(c.infer("identity_fp32", [i]).as_numpy("OUTPUT0"), x)
    c.close()


def make_cert(d):
    key, cert = d / "server.key", d / "server.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, cert


def test_tls(server_factory, repos, tmp_path):
    key, cert = make_cert(tmp_path)
    srv = server_factory([repos["repo_small"]], ["--grpc-use-ssl=true",
                                                 f"--grpc-server-cert={cert}",
                                                 f"--grpc-server-key={key}"])
    c = grpcclient.InferenceServerClient(srv.grpc_url, ssl=True,
                                         root_certificates=str(cert))
    assert c.is_server_ready()
    a = np.ones((1, 16), dtype=np.int32)
    np.testing.assert_array_equal(infer_simple(c, grpcclient, a, a).as_numpy("OUTPUT0"), 2 * a)
    c.close()
    plain = grpcclient.InferenceServerClient(srv.grpc_url)
    with pytest.raises(InferenceServerException):
        plain.is_server_live(client_timeout=5)
    plain.close()


def test_abseil_deadlock_detection_is_off(server_factory, repos):
    """Debian's abseil leaves mutex deadlock detection on (11-12% of a gRPC request's server
    instructions); the server turns it off before gRPC starts and says so at --log-verbose=1.
    Fails if the switch is no longer found in the abseil the server loads."""
    srv = server_factory([repos["repo_small"]], ["--log-verbose=1"])
    line = "gRPC: abseil's mutex deadlock detection turned off"
    assert line in srv.log
    assert srv.log.index(line) < srv.log.index("Started GRPCInferenceService")
    quiet = server_factory([repos["repo_small"]])
    assert line not in quiet.log


def test_tls_missing_certificate_is_a_clear_error(server_factory, repos, tmp_path):
    srv = server_factory([repos["repo_small"]], ["--grpc-use-ssl=true",
                                                 f"--grpc-server-cert={tmp_path}/none.crt"],
                         expect_rc=1, wait=False)
    assert srv.wait_exit(60) == 1
    assert "unable to read the --grpc-server-cert file" in srv.log


def test_startup_line_and_disabled_grpc(server_factory, repos):
    srv = server_factory([repos["repo_small"]])
    log = srv.log
    g = log.index(f"Started GRPCInferenceService at 127.0.0.1:{srv.grpc_port}")
    assert g < log.index("Started HTTPService at")
    off = server_factory([repos["repo_small"]], ["--allow-grpc=false"])
    assert "Started GRPCInferenceService" not in off.log
    with pytest.raises(InferenceServerException):
        grpcclient.InferenceServerClient(off.grpc_url).is_server_live(client_timeout=2)


def test_port_in_use(server_factory, repos, small_server):
    srv = server_factory([repos["repo_small"]], [f"--grpc-port={small_server.grpc_port}"],
                         expect_rc=1, wait=False)
    assert srv.wait_exit(60) == 1
    assert (f"failed to start GRPC service: Socket '127.0.0.1:{small_server.grpc_port}' already "
            "in use") in srv.log


def test_bad_compression_level():
    p = run_cli(["--model-repository=/nonexistent", "--grpc-infer-response-compression-level=x"])
    assert p.returncode != 0
    assert b"invalid argument for --grpc_infer_response_compression_level" in p.stderr


def test_stop_with_an_open_stream(server_factory, repos):
    """SIGTERM while a client keeps a stream open: the server ends it and exits 0."""
    srv = server_factory([repos["repo_small"]])
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    got = queue.Queue()
    c.start_stream(callback=lambda result, error: got.put((result, error)))
    model, inputs = stream_request(1)
    c.async_stream_infer(model, inputs)
    assert got.get(timeout=60)[1] is None
    assert srv.stop() == 0
    c.close()


def test_several_threads(server_factory, repos):
    """--grpc-infer-thread-count=3: calls spread over three completion queues, each answered
    by its own thread, unary and streaming at once."""
    srv = server_factory([repos["repo_small"]], ["--grpc-infer-thread-count=3"])

    def unary(k):
        c = grpcclient.InferenceServerClient(srv.grpc_url)
        try:
            for j in range(20):
                a = np.full((1, 16), k + j, dtype=np.int32)
                np.testing.assert_array_equal(infer_simple(c, grpcclient, a, a)
                                              .as_numpy("OUTPUT0"), 2 * a)
        finally:
            c.close()

    def stream(k):
        c = grpcclient.InferenceServerClient(srv.grpc_url)
        got = queue.Queue()
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        for j in range(10):
            model, inputs = stream_request(k * 100 + j)
            c.async_stream_infer(model, inputs, request_id=str(j))
        ids = [got.get(timeout=60)[0].get_response().id for _ in range(10)]
        c.stop_stream()
        c.close()
        assert ids == [str(j) for j in range(10)]

    with ThreadPoolExecutor(12) as ex:
        futs = [ex.submit(unary, k) for k in range(8)] + [ex.submit(stream, k) for k in range(4)]
        for f in futs:
            f.result()
