"""GPUs (issue #18): ONNX Runtime's CUDA and TensorRT providers through the onnxruntime-gpu
build (`make gpu-backend`, served with --backend-directory).

Without an NVIDIA driver (CI): CPU models run on that build; a KIND_GPU model fails alone with
the provider's own cause (libcuda.so.1, libnvinfer.so.10 missing), and with the default build
with a message naming the build that has the provider. With a driver: KIND_GPU instances run on
the CUDA provider and agree with the CPU; KIND_AUTO and KIND_GPU without `gpus` take every GPU,
as in Triton; a gpu id the machine lacks is Triton's config error. The CUDA 13 libraries the
provider needs (cuBLAS, cuDNN, cuRAND, cuFFT, the CUDA runtime) must then be on the library
path: docs/optimization.md, "GPUs". No tritonclient here: this file also runs on GPU machines
that have only numpy, onnx and pytest."""
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import models
from e2e_util import binary_request, get, post, split_binary_response

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
GPU_BACKENDS = Path(os.environ.get("NEREID_GPU_BACKENDS", ROOT / ".deps" / "backends-gpu"))
GPU_LIB = GPU_BACKENDS / "onnxruntime" / "libonnxruntime.so"
DRIVER = os.path.exists("/dev/nvidiactl")
gpu_build = pytest.mark.skipif(not GPU_LIB.exists(),
                               reason="no onnxruntime-gpu build: `make gpu-backend`")
no_driver = pytest.mark.skipif(DRIVER, reason="an NVIDIA driver is here")
driver = pytest.mark.skipif(not DRIVER, reason="no NVIDIA driver")
GPU_GROUP = "instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]\n"
TENSORRT = ('optimization { execution_accelerators { gpu_execution_accelerator : [ { name : '
            '"tensorrt" parameters { key: "precision_mode" value: "FP16" } } ] } }\n')


def gpu_repo(root, extra=()):
    """simple on the CPU, and as simple_gpu (KIND_GPU, GPU 0), simple_trt (the same with
    TensorRT), simple_anygpu (KIND_GPU naming no GPU) and each (name, config tail) of extra."""
    models.write_model(root, "simple")
    for name, tail in (("simple_gpu", GPU_GROUP), ("simple_trt", GPU_GROUP + TENSORRT),
                       ("simple_anygpu", "instance_group [ { kind: KIND_GPU } ]\n"), *extra):
        shutil.copytree(root / "simple", root / name)
        cfg = root / name / "config.pbtxt"
        text = cfg.read_text().replace('name: "simple"', f'name: "{name}"')
        text = text.replace("instance_group [ { kind: KIND_CPU, count: 1 } ]\n", "")
        assert "instance_group" not in text
        cfg.write_text(text + tail)
    return root


def index(port):
    return {e["name"]: e for e in json.loads(post(port, "/v2/repository/index").body)}


def infer_binary(port, model, inputs, out):
    """One binary-extension request with {name: array} inputs; output `out`, flat, in the
    first input's dtype."""
    arrs = list(inputs.values())
    head = {"inputs": [{"name": n, "shape": list(a.shape),
                        "datatype": "FP32" if a.dtype == np.float32 else "INT32",
                        "parameters": {"binary_data_size": a.nbytes}} for n, a in inputs.items()],
            "outputs": [{"name": out, "parameters": {"binary_data": True}}]}
    body, hdrs = binary_request(head, [a.tobytes() for a in arrs])
    r = post(port, f"/v2/models/{model}/infer", body, hdrs)
    assert r.status == 200, r.body[:500]
    _, outs = split_binary_response(r)
    return np.frombuffer(outs[out], dtype=arrs[0].dtype)


def check_simple(port, model):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 5, dtype=np.int32)
    got = infer_binary(port, model, {"INPUT0": a, "INPUT1": b}, "OUTPUT1")
    assert np.array_equal(got, (a - b).ravel()), model


def start(server_factory, repo, *args, name=None):
    return server_factory([repo], ["--exit-on-error=false", *args], name=name)


# ---- no driver: the error paths ----

@gpu_build
@no_driver
def test_gpu_build_without_a_driver_fails_the_gpu_models_only(server_factory, tmp_path):
    srv = start(server_factory, gpu_repo(tmp_path / "repo"), f"--backend-directory={GPU_BACKENDS}")
    assert f"loaded ONNX Runtime 1.31.1 at {GPU_LIB}" in srv.log
    idx = index(srv.port)
    assert idx["simple"]["state"] == "READY"
    check_simple(srv.port, "simple")
    text = "Internal: the %s provider of ONNX Runtime 1.31.1 at %s failed for GPU 0: Failed to " \
           "load library %s with error: %s: cannot open shared object file: No such file or " \
           "directory"
    assert idx["simple_gpu"] == {
        "name": "simple_gpu", "version": "1", "state": "UNAVAILABLE",
        "reason": text % ("CUDA", GPU_LIB, GPU_LIB.parent / "libonnxruntime_providers_cuda.so",
                          "libcuda.so.1")}
    assert idx["simple_trt"]["reason"] == text % (
        "TensorRT", GPU_LIB, GPU_LIB.parent / "libonnxruntime_providers_tensorrt.so",
        "libnvinfer.so.10")
    assert idx["simple_anygpu"]["reason"] == (
        "Invalid argument: instance group simple_anygpu_0 of model simple_anygpu has kind "
        "KIND_GPU but no GPUs are available")


@no_driver
def test_default_build_names_the_build_with_gpu_providers(server_factory, tmp_path):
    srv = start(server_factory, gpu_repo(tmp_path / "repo"))
    idx = index(srv.port)
    lib = re.search(r"loaded (ONNX Runtime \S+ at \S+)", srv.log).group(1)
    assert idx["simple"]["state"] == "READY"
    hint = ("the onnxruntime-gpu build has it (make gpu-backend, then "
            "--backend-directory=.deps/backends-gpu)")
    assert idx["simple_gpu"]["reason"] == (
        f"Invalid argument: A KIND_GPU instance is requested, but the ONNX Runtime library "
        f"loaded ({lib}) has no CUDA provider; {hint}")
    assert idx["simple_trt"]["reason"] == (
        f"Invalid argument: Execution Accelerator 'tensorrt' is requested, but the ONNX Runtime "
        f"library loaded ({lib}) has no TensorRT provider; {hint}")


# ---- with a driver: the GPUs run ----

@gpu_build
@driver
def test_kind_gpu_runs_on_cuda_and_kind_auto_takes_the_gpus(server_factory, tmp_path):
    repo = gpu_repo(tmp_path / "repo", [("simple_gpu7", "instance_group [ { kind: KIND_GPU "
                                                         "gpus: [ 7 ] } ]\n")])
    srv = start(server_factory, repo, f"--backend-directory={GPU_BACKENDS}")
    gpus = re.findall(r"\] GPU (\d+): (.+), compute capability (\d+)\.(\d+)", srv.log)
    assert gpus and gpus[0][0] == "0", srv.log[-3000:]
    idx = index(srv.port)
    assert idx["simple_gpu"]["state"] == "READY", idx["simple_gpu"]
    assert idx["simple_anygpu"]["state"] == "READY", idx["simple_anygpu"]
    # TensorRT is no Python wheel of this project: READY where the machine has it
    assert idx["simple_trt"]["state"] == "READY" or \
        "the TensorRT provider of ONNX Runtime" in idx["simple_trt"]["reason"], idx["simple_trt"]
    if len(gpus) < 8:
        ids = ", ".join(str(i) for i in range(len(gpus)))
        assert idx["simple_gpu7"]["reason"] == (
            "Invalid argument: instance group simple_gpu7_0 of model simple_gpu7 specifies "
            "invalid or unsupported gpu id 7. GPUs with at least the minimum required CUDA "
            f"compute compatibility of 6.000000 are: {ids}")
    for m in ("simple_gpu", "simple_anygpu"):
        check_simple(srv.port, m)
    conf = json.loads(get(srv.port, "/v2/models/simple_anygpu/config").body)
    assert conf["instance_group"][0]["gpus"] == list(range(len(gpus))), conf["instance_group"]


@gpu_build
@driver
@pytest.mark.skipif(not (EXAMPLES / "densenet_onnx/1/model.onnx").exists(),
                    reason="run `make models` first")
def test_densenet_on_cuda_agrees_with_the_cpu(server_factory, tmp_path):
    """densenet_onnx with no instance_group (KIND_AUTO: the GPUs) against the same model with a
    KIND_CPU group, one server: same top class, scores within 1e-3."""
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES / "densenet_onnx", repo / "densenet_onnx")
    shutil.copytree(EXAMPLES / "densenet_onnx", repo / "densenet_cpu")
    cfg = repo / "densenet_cpu" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace('"densenet_onnx"', '"densenet_cpu"') +
                   "instance_group [ { kind: KIND_CPU } ]\n")
    srv = start(server_factory, repo, f"--backend-directory={GPU_BACKENDS}")
    conf = json.loads(get(srv.port, "/v2/models/densenet_onnx/config").body)
    assert conf["instance_group"][0]["kind"] == "KIND_GPU", conf["instance_group"]
    x = np.random.default_rng(2).random((3, 224, 224), dtype=np.float32)
    on_gpu = infer_binary(srv.port, "densenet_onnx", {"data_0": x}, "fc6_1")
    on_cpu = infer_binary(srv.port, "densenet_cpu", {"data_0": x}, "fc6_1")
    assert on_gpu.argmax() == on_cpu.argmax()
    assert np.allclose(on_gpu, on_cpu, atol=1e-3), np.abs(on_gpu - on_cpu).max()
