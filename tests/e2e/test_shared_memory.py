"""System shared-memory extension: the official tritonclient registers POSIX shared-memory
regions (tritonclient.utils.shared_memory), names them in inference requests for inputs and
outputs, and reads the results from them; status / unregister; Triton's error texts and codes;
the cuda endpoints of a server without GPUs; and regions unregistered while requests use them."""

import json
import os
import threading

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from e2e_util import assert_error, assert_matches_recorded, get, post, replay

KEY_PREFIX = f"/nereid_e2e_{os.getpid()}_"


@pytest.fixture(scope="module")
def client(small_server):
    c = httpclient.InferenceServerClient(url=small_server.url)
    yield c
    c.close()


@pytest.fixture
def regions(client):
    """create(name, size) -> handle: a region created and registered under `name` (key
    KEY_PREFIX + name); all are unregistered and destroyed after the test."""
    made = []

    def create(name, size, register=True):
        h = shm.create_shared_memory_region(name, KEY_PREFIX + name, size)
        made.append(h)
        if register:
            client.register_system_shared_memory(name, KEY_PREFIX + name, size)
        return h

    yield create
    client.unregister_system_shared_memory()
    for h in made:
        shm.destroy_shared_memory_region(h)


def status(port, region=None):
    path = "/v2/systemsharedmemory" + (f"/region/{region}" if region else "") + "/status"
    return get(port, path)


# ----------------------------------------------------------------------------- recorded

@pytest.mark.parametrize("what", ["GET system shared memory status",
                                  "GET cuda shared memory status"])
def test_empty_status_as_recorded(small_server, what):
    assert_matches_recorded(replay(small_server.port, what), what)


def test_server_metadata_lists_system_shared_memory(small_server):
    ext = get(small_server.port, "/v2").json()["extensions"]
    assert "system_shared_memory" in ext and "cuda_shared_memory" not in ext


# ----------------------------------------------------------------------------- inference

def test_simple_inputs_and_outputs_in_shared_memory(client, regions):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    ih = regions("in", 128)
    oh = regions("out", 4096 + 64)
    shm.set_shared_memory_region(ih, [a, b])
    i0 = httpclient.InferInput("INPUT0", [1, 16], "INT32")
    i0.set_shared_memory("in", 64)
    i1 = httpclient.InferInput("INPUT1", [1, 16], "INT32")
    i1.set_shared_memory("in", 64, offset=64)
    o0 = httpclient.InferRequestedOutput("OUTPUT0")
    o0.set_shared_memory("out", 64, offset=4096)
    o1 = httpclient.InferRequestedOutput("OUTPUT1")
    o1.set_shared_memory("out", 64)
    r = client.infer("simple", [i0, i1], outputs=[o0, o1])
    # Triton's answer for outputs in shared memory: no data, no parameters
    assert r.get_response()["outputs"] == [
        {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]},
        {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16]}]
    got = shm.get_contents_as_numpy(oh, np.int32, [1, 16 + 1024])
    np.testing.assert_array_equal(got[:, :16], a - b)
    np.testing.assert_array_equal(got[:, 1024:], a + b)


def test_shared_memory_input_with_outputs_over_http(client, regions):
    """One input from shared memory, one as binary data; one output in shared memory, one as
    JSON and (next request) binary."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16) * 7
    b = np.arange(16, dtype=np.int32).reshape(1, 16)
    ih = regions("in_a", 64)
    oh = regions("out_a", 64)
    shm.set_shared_memory_region(ih, [a])
    i0 = httpclient.InferInput("INPUT0", [1, 16], "INT32")
    i0.set_shared_memory("in_a", 64)
    i1 = httpclient.InferInput("INPUT1", [1, 16], "INT32")
    i1.set_data_from_numpy(b, binary_data=True)
    for binary in (False, True):
        o0 = httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)
        o1 = httpclient.InferRequestedOutput("OUTPUT1")
        o1.set_shared_memory("out_a", 64)
        r = client.infer("simple", [i0, i1], outputs=[o0, o1])
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(shm.get_contents_as_numpy(oh, np.int32, [1, 16]), a - b)


def test_large_fp32_tensor_through_shared_memory(client, regions):
    x = np.random.default_rng(7).random((1, 150528), dtype=np.float32)
    ih = regions("big_in", x.nbytes + 4)  # the tensor starts 4 bytes in: not 16-aligned
    oh = regions("big_out", x.nbytes)
    shm.set_shared_memory_region(ih, [x], offset=4)
    i = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
    i.set_shared_memory("big_in", x.nbytes, offset=4)
    o = httpclient.InferRequestedOutput("OUTPUT0")
    o.set_shared_memory("big_out", x.nbytes)
    r = client.infer("identity_fp32", [i], outputs=[o])
    assert r.get_response()["outputs"][0]["shape"] == [1, 150528]
    np.testing.assert_array_equal(shm.get_contents_as_numpy(oh, np.float32, x.shape), x)


# ----------------------------------------------------------------------------- status / register

def test_status_register_unregister(small_server, client, regions):
    regions("zz", 64)
    regions("aa", 4096)
    client.register_system_shared_memory("mid", KEY_PREFIX + "aa", 100, offset=1000)
    r = status(small_server.port)
    assert r.status == 200 and r.header("Content-Type") == "application/json"
    assert r.text == json.dumps([
        {"name": "aa", "key": KEY_PREFIX + "aa", "offset": 0, "byte_size": 4096},
        {"name": "mid", "key": KEY_PREFIX + "aa", "offset": 1000, "byte_size": 100},
        {"name": "zz", "key": KEY_PREFIX + "zz", "offset": 0, "byte_size": 64}],
        separators=(",", ":"))
    one = status(small_server.port, "mid")
    assert one.json() == [{"name": "mid", "key": KEY_PREFIX + "aa", "offset": 1000,
                           "byte_size": 100}]
    assert client.get_system_shared_memory_status("zz") == [
        {"name": "zz", "key": KEY_PREFIX + "zz", "offset": 0, "byte_size": 64}]
    r = post(small_server.port, "/v2/systemsharedmemory/region/mid/unregister")
    assert (r.status, r.body, r.header("Content-Type")) == (200, b"", "application/json")
    assert [x["name"] for x in status(small_server.port).json()] == ["aa", "zz"]
    # unknown names unregister without error, as in Triton
    assert post(small_server.port, "/v2/systemsharedmemory/region/mid/unregister").status == 200
    assert post(small_server.port, "/v2/systemsharedmemory/unregister").status == 200
    assert status(small_server.port).text == "[]"


def test_register_and_status_errors(small_server, regions):
    port = small_server.port
    regions("dup", 64)
    base = "/v2/systemsharedmemory/region"

    def register(name, body):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return post(port, f"{base}/{name}/register", raw,
                    {"Content-Type": "application/json"})

    assert_error(register("dup", {"key": KEY_PREFIX + "dup", "byte_size": 64}), 400,
                 "shared memory region 'dup' already in manager")
    assert_error(register("x", {"key": KEY_PREFIX + "missing", "byte_size": 64}), 500,
                 f"Unable to open shared memory region: '{KEY_PREFIX}missing'")
    assert_error(register("x", {"key": KEY_PREFIX + "dup", "byte_size": 65}), 400,
                 "failed to register shared memory region 'x': invalid args")
    assert_error(register("x", {"key": KEY_PREFIX + "dup", "offset": 60, "byte_size": 8}), 400,
                 "failed to register shared memory region 'x': invalid args")
    assert_error(register("x", {"byte_size": 8}), 400,
                 "Shared memory register request has no 'key' field")
    assert_error(register("x", {"key": KEY_PREFIX + "dup"}), 400,
                 "Shared memory register request has no 'byte_size' field")
    assert_error(register("x", {"key": 5, "byte_size": 8}), 400,
                 "Unable to parse 'key': attempt to access JSON non-string as string")
    assert_error(register("x", {"key": KEY_PREFIX + "dup", "byte_size": -1}), 400,
                 "Unable to parse 'byte_size': attempt to access JSON non-unsigned-integer as "
                 "unsigned-integer")
    assert_error(register("x", {"key": KEY_PREFIX + "dup", "offset": 1.5, "byte_size": 8}),
                 400, "Unable to parse 'offset': attempt to access JSON non-unsigned-integer as "
                 "unsigned-integer")
    r = register("x", b"{")
    assert r.status == 400 and r.json()["error"].startswith(
        "failed to parse the request JSON buffer:"), r
    assert_error(post(port, "/v2/systemsharedmemory/register", b"{}"), 400,
                 "'region name' is necessary to register system shared memory region")
    assert_error(status(port, "nope"), 404,
                 "Unable to find system shared memory region: 'nope'")
    assert_error(get(port, f"{base}/dup/register"), 405, "Method Not Allowed")
    assert_error(post(port, "/v2/systemsharedmemory/status"), 405, "Method Not Allowed")
    assert_error(get(port, f"{base}/dup/other"), 404, "Not Found")
    assert [x["name"] for x in status(port).json()] == ["dup"]  # nothing half-registered


def test_cuda_endpoints_without_gpus(small_server):
    port = small_server.port
    assert_error(post(port, "/v2/cudasharedmemory/region/g/register",
                      b'{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":4}'), 400,
                 "failed to register CUDA shared memory region: 'g', GPUs not supported")
    assert_error(get(port, "/v2/cudasharedmemory/region/g/status"), 404,
                 "Unable to find cuda shared memory region: 'g'")
    r = post(port, "/v2/cudasharedmemory/unregister")
    assert (r.status, r.body) == (200, b"")
    assert get(port, "/v2/cudasharedmemory/status").text == "[]"


# ----------------------------------------------------------------------------- infer errors

def _simple_request(in_region, out_params=None, in_size=64, in_offset=0):
    def inp(name, offset):
        p = {"shared_memory_region": in_region, "shared_memory_byte_size": in_size}
        if offset:
            p["shared_memory_offset"] = offset
        return {"name": name, "shape": [1, 16], "datatype": "INT32", "parameters": p}
    body = {"inputs": [inp("INPUT0", in_offset), inp("INPUT1", in_offset)]}
    if out_params is not None:
        body["outputs"] = [{"name": "OUTPUT0", "parameters": out_params}]
    return json.dumps(body).encode()


def test_infer_errors(small_server, regions):
    port = small_server.port
    regions("in_e", 128)
    regions("out_e", 16)

    def infer(body):
        return post(port, "/v2/models/simple/infer", body)

    assert_error(infer(_simple_request("nope")), 404,
                 "Unable to find shared memory region: 'nope'")
    assert_error(infer(_simple_request("in_e", in_offset=128)), 400,
                 "Invalid offset for shared memory region: 'in_e'")
    assert_error(infer(_simple_request("in_e", in_offset=100)), 400,
                 "Invalid offset + byte size for shared memory region: 'in_e'")
    short = json.loads(_simple_request("in_e"))
    short["inputs"][0]["parameters"]["shared_memory_byte_size"] = 60
    assert_error(infer(json.dumps(short).encode()), 400,
                 "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for "
                 "model 'simple'. Expected 64, got 60")
    assert_error(infer(_simple_request("in_e", {"shared_memory_region": "out_e",
                                                "shared_memory_byte_size": 16})), 500,
                 "shared memory size specified with the request for output 'OUTPUT0' (16 bytes) "
                 "should be at least 64 bytes to hold the results")
    assert_error(infer(_simple_request("in_e", {"shared_memory_region": "out_e",
                                                "binary_data": True})), 400,
                 "Output can't set both 'shared_memory_region' and 'binary_data'")
    assert_error(infer(_simple_request("in_e", {"shared_memory_region": "out_e",
                                                "classification": 2})), 400,
                 "Output can't set both 'shared_memory_region' and 'classification'")
    assert_error(infer(_simple_request("in_e", {"shared_memory_region": 3})), 400,
                 "Unable to parse 'shared_memory_region': attempt to access JSON non-string as "
                 "string")
    assert_error(infer(_simple_request("in_e", {"shared_memory_region": "out_e",
                                                "shared_memory_offset": -4})), 400,
                 "Unable to parse 'shared_memory_offset': attempt to access JSON "
                 "non-unsigned-integer as unsigned-integer")
    body = json.loads(_simple_request("in_e"))
    body["inputs"][0]["data"] = [0] * 16
    assert_error(infer(json.dumps(body).encode()), 400,
                 "Input must set only one of the following fields: 'data', 'binary_data_size' in "
                 "'parameters', 'shared_memory_region' in 'parameters'. But set 'data' "
                 "'shared_memory_region'")
    # the regions are intact and usable after every refusal
    assert infer(_simple_request("in_e")).status == 200


def test_object_truncated_after_registration(small_server, client, regions):
    """The owner shrinks its object under a registered region: Triton's server dies of SIGBUS
    on the next read; nereid answers that request and later ones with an error, keeps serving,
    and takes the region again once it is registered anew."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    h = regions("trunc", 8192)
    shm.set_shared_memory_region(h, [a, a], offset=4096)
    os.truncate("/dev/shm" + KEY_PREFIX + "trunc", 0)
    body = _simple_request("trunc", in_offset=4096)
    msg = ("shared memory region 'trunc' was truncated by its owner after it was registered; "
           "unregister it and register it again")
    for _ in range(2):
        assert_error(post(small_server.port, "/v2/models/simple/infer", body), 500, msg)
    assert client.is_server_live()
    client.unregister_system_shared_memory("trunc")
    os.truncate("/dev/shm" + KEY_PREFIX + "trunc", 8192)
    shm.set_shared_memory_region(h, [a, a], offset=4096)
    client.register_system_shared_memory("trunc", KEY_PREFIX + "trunc", 8192)
    r = post(small_server.port, "/v2/models/simple/infer", body)
    assert r.status == 200 and r.json()["outputs"][0]["data"] == list(range(0, 32, 2)), r


# ----------------------------------------------------------------------------- concurrency

def test_unregister_while_requests_use_the_region(small_server, client, regions):
    """Requests keep reading a region while another thread unregisters and registers it again,
    over and over. Each request either succeeds with the right answer or is told the region
    is not there; the mapping a running request reads is never taken away from under it."""
    x = np.random.default_rng(3).random((1, 65536), dtype=np.float32)
    h = regions("churn", x.nbytes)
    shm.set_shared_memory_region(h, [x])
    stop = threading.Event()
    results = {"ok": 0, "gone": 0}
    errors = []

    def infer_loop():
        c = httpclient.InferenceServerClient(url=small_server.url)
        i = httpclient.InferInput("INPUT0", list(x.shape), "FP32")
        i.set_shared_memory("churn", x.nbytes)
        while not stop.is_set():
            try:
                r = c.infer("identity_fp32", [i])
                np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
                results["ok"] += 1
            except InferenceServerException as e:
                if "Unable to find shared memory region: 'churn'" not in str(e):
                    errors.append(str(e))
                results["gone"] += 1
            except AssertionError as e:
                errors.append(str(e))
        c.close()

    threads = [threading.Thread(target=infer_loop) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(150):
        client.unregister_system_shared_memory("churn")
        client.register_system_shared_memory("churn", KEY_PREFIX + "churn", x.nbytes)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert results["ok"] > 0, results
    assert client.is_server_live()
