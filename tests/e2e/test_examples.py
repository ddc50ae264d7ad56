"""The example repository (examples/model_repository, written by `make models`) served as a user
runs it: every model answers JSON and binary requests with onnxruntime's own results, the CNNs at
every batch size they allow, densenet through its config `reshape`, and classification with the
label files."""

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from conftest import running_server
from e2e_util import ort_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
pytestmark = pytest.mark.skipif(not (EXAMPLES / "inception_onnx/1/model.onnx").exists(),
                                reason="run `make models` first (make test does)")


@pytest.fixture(scope="module")
def examples_server(tmp_path_factory):
    with running_server([EXAMPLES], [], log_dir=tmp_path_factory.mktemp("examples"),
                        name="examples") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(examples_server):
    c = httpclient.InferenceServerClient(url=examples_server.url, network_timeout=120)
    yield c
    c.close()


def infer(client, model, feeds, binary):
    inputs = []
    for name, arr in feeds.items():
        dt = {np.float32: "FP32", np.int32: "INT32"}[arr.dtype.type]
        i = httpclient.InferInput(name, list(arr.shape), dt)
        i.set_data_from_numpy(arr, binary_data=binary)
        inputs.append(i)
    return client.infer(model, inputs)


def test_all_examples_ready(client):
    for m in ("simple", "identity_fp32", "inception_onnx", "densenet_onnx"):
        assert client.is_model_ready(m), m
    assert client.is_server_ready()


@pytest.mark.parametrize("binary", [True, False])
def test_simple(client, binary):
    rng = np.random.default_rng(1)
    a = rng.integers(-1000, 1000, (3, 16), dtype=np.int32)
    b = rng.integers(-1000, 1000, (3, 16), dtype=np.int32)
    r = infer(client, "simple", {"INPUT0": a, "INPUT1": b}, binary)
    ref = ort_run(EXAMPLES / "simple/1/model.onnx", {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), ref["OUTPUT0"])
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), ref["OUTPUT1"])


@pytest.mark.parametrize("binary", [True, False])
def test_identity_fp32(client, binary):
    x = np.random.default_rng(2).standard_normal((8, 37)).astype(np.float32)
    r = infer(client, "identity_fp32", {"INPUT0": x}, binary)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)


@pytest.mark.parametrize("batch", [1, 2, 3, 4])
def test_inception_binary_every_batch(client, batch):
    x = np.random.default_rng(batch).random((batch, 3, 224, 224), dtype=np.float32)
    r = infer(client, "inception_onnx", {"input": x}, True)
    ref = ort_run(EXAMPLES / "inception_onnx/1/model.onnx", {"input": x})["output"]
    out = r.as_numpy("output")
    assert out.shape == (batch, 1000)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-6)


def test_inception_json(client):
    x = np.random.default_rng(7).random((1, 3, 224, 224), dtype=np.float32)
    r = infer(client, "inception_onnx", {"input": x}, False)
    ref = ort_run(EXAMPLES / "inception_onnx/1/model.onnx", {"input": x})["output"]
    np.testing.assert_allclose(r.as_numpy("output"), ref, rtol=1e-4, atol=1e-6)


def test_inception_batch_over_max_refused(client):
    x = np.zeros((5, 3, 224, 224), dtype=np.float32)
    with pytest.raises(httpclient.InferenceServerException) as e:
        infer(client, "inception_onnx", {"input": x}, True)
    assert "inference request batch-size must be <= 4 for 'inception_onnx'" in str(e.value)


@pytest.mark.parametrize("binary", [True, False])
def test_densenet_reshape(client, binary):
    """densenet_onnx has Triton QuickStart's config: max_batch_size 0 and reshape [1,3,224,224]
    -> [3,224,224] in, [1,1000,1,1] -> [1000] out."""
    x = np.random.default_rng(3).random((3, 224, 224), dtype=np.float32)
    r = infer(client, "densenet_onnx", {"data_0": x}, binary)
    ref = ort_run(EXAMPLES / "densenet_onnx/1/model.onnx", {"data_0": x[None]})["fc6_1"]
    out = r.as_numpy("fc6_1")
    assert out.shape == (1000,)
    np.testing.assert_allclose(out, ref.reshape(1000), rtol=1e-4, atol=1e-6)


def test_inception_classification(client):
    x = np.random.default_rng(4).random((2, 3, 224, 224), dtype=np.float32)
    inp = httpclient.InferInput("input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    out = httpclient.InferRequestedOutput("output", class_count=3)
    r = client.infer("inception_onnx", [inp], outputs=[out])
    got = r.as_numpy("output")
    assert got.shape == (2, 3)
    ref = ort_run(EXAMPLES / "inception_onnx/1/model.onnx", {"input": x})["output"]
    for b in range(2):
        top = np.argsort(-ref[b], kind="stable")[:3]
        labels = [e.decode().split(":") for e in got[b]]
        assert [int(l[1]) for l in labels] == list(top)
        assert [l[2] for l in labels] == [f"class_{i}" for i in top]
        np.testing.assert_allclose([float(l[0]) for l in labels], ref[b][top], rtol=1e-5, atol=1e-6)


def test_statistics_count_example_requests(client):
    before = client.get_inference_statistics("identity_fp32")["model_stats"][0]
    x = np.ones((2, 4), dtype=np.float32)
    for _ in range(5):
        infer(client, "identity_fp32", {"INPUT0": x}, True)
    after = client.get_inference_statistics("identity_fp32")["model_stats"][0]
    assert after["inference_count"] - before["inference_count"] == 10
    assert after["execution_count"] - before["execution_count"] == 5
    assert (after["inference_stats"]["success"]["count"]
            - before["inference_stats"]["success"]["count"]) == 5


@pytest.mark.parametrize("model,feeds,outputs", [
    ("simple", {"INPUT0": ("INT32", (2, 16)), "INPUT1": ("INT32", (2, 16))},
     ["OUTPUT0", "OUTPUT1"]),
    ("identity_fp32", {"INPUT0": ("FP32", (3, 37))}, ["OUTPUT0"]),
    ("inception_onnx", {"input": ("FP32", (2, 3, 224, 224))}, ["output"]),
    ("densenet_onnx", {"data_0": ("FP32", (3, 224, 224))}, ["fc6_1"]),
])
def test_every_example_model_over_grpc_equals_http(examples_server, client, model, feeds,
                                                   outputs):
    """The same request over gRPC (tritonclient.grpc) answers what it answers over HTTP, to the
    bit, on every model of the example repository (the CNNs' 602 KB inputs included)."""
    import tritonclient.grpc as grpcclient
    rng = np.random.default_rng(11)
    arrays = {n: (rng.integers(-99, 99, shape, dtype=np.int32) if dt == "INT32"
                  else rng.random(shape, dtype=np.float32)) for n, (dt, shape) in feeds.items()}
    g = grpcclient.InferenceServerClient(examples_server.grpc_url)
    try:
        res = []
        for c, mod in ((g, grpcclient), (client, httpclient)):
            inputs = []
            for n, (dt, _) in feeds.items():
                i = mod.InferInput(n, list(arrays[n].shape), dt)
                i.set_data_from_numpy(arrays[n])
                inputs.append(i)
            r = c.infer(model, inputs)
            res.append([r.as_numpy(o) for o in outputs])
    finally:
        g.close()
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)
