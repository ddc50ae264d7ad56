"""Execution accelerators (issue #18): the guide's `cpu_execution_accelerator : [ { name :
"openvino" } ]` runs the model on ONNX Runtime's OpenVINO provider, out of the box (scripts/
setup.sh installs the onnxruntime-openvino build of ONNX Runtime), with the same answers as the
CPU provider; its parameters are passed to the provider and an unknown one, or an unknown
accelerator, makes that model UNAVAILABLE with a message naming it while the others load."""
import json
import re
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

import models
from e2e_util import infer_simple, post

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
# OpenVINO's TBB dlopens a library with RTLD_DEEPBIND, which AddressSanitizer's runtime refuses
# (it aborts the process: google/sanitizers#611): the OpenVINO runs are left to the plain build.
no_asan = pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                             reason="OpenVINO under ASan: RTLD_DEEPBIND (google/sanitizers#611)")
OPENVINO = ('optimization { execution_accelerators { cpu_execution_accelerator : [ { name : '
            '"openvino"%s } ] } }\n')


def with_accelerator(d, params="", name="openvino"):
    text = OPENVINO % params
    if name != "openvino":
        text = text.replace('"openvino"', f'"{name}"')
    with open(d / "config.pbtxt", "a") as f:
        f.write(text)


def index(port):
    return {e["name"]: e for e in json.loads(post(port, "/v2/repository/index").body)}


@no_asan
def test_openvino_runs_and_agrees_with_the_cpu_provider(server_factory, tmp_path):
    repo = tmp_path / "repo"
    with_accelerator(models.write_model(repo, "simple"))
    with_accelerator(models.write_model(repo, "identity_fp32"),
                     ' parameters { key: "num_streams" value: "1" } '
                     'parameters { key: "precision" value: "FP32" }')
    srv = server_factory([repo])
    c = httpclient.InferenceServerClient(srv.url)
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    r = infer_simple(c, a, b)
    assert np.array_equal(r.as_numpy("OUTPUT0"), a + b)
    assert np.array_equal(r.as_numpy("OUTPUT1"), a - b)
    x = np.random.default_rng(0).random((2, 5), dtype=np.float32)
    i = httpclient.InferInput("INPUT0", [2, 5], "FP32")
    i.set_data_from_numpy(x)
    assert np.array_equal(c.infer("identity_fp32", [i]).as_numpy("OUTPUT0"), x)


@no_asan
@pytest.mark.skipif(not (EXAMPLES / "inception_onnx/1/model.onnx").exists(),
                    reason="run `make models` first")
def test_openvino_inception_matches_cpu(server_factory, tmp_path):
    """The guide's example: inception_onnx with OpenVINO against the same model on the CPU
    provider (one server each), same input: the same top class, scores within 1e-3."""
    x = np.random.default_rng(1).random((1, 3, 224, 224), dtype=np.float32)
    out = {}
    for ov in (False, True):
        repo = tmp_path / ("ov" if ov else "cpu")
        shutil.copytree(EXAMPLES / "inception_onnx", repo / "inception_onnx")
        if ov:
            with_accelerator(repo / "inception_onnx")
        srv = server_factory([repo], name="ov" if ov else "cpu")
        c = httpclient.InferenceServerClient(srv.url)
        i = httpclient.InferInput("input", [1, 3, 224, 224], "FP32")
        i.set_data_from_numpy(x)
        out[ov] = c.infer("inception_onnx", [i]).as_numpy("output")
        srv.stop()
    assert out[True].argmax() == out[False].argmax()
    assert np.allclose(out[True], out[False], atol=1e-3), np.abs(out[True] - out[False]).max()


def test_bad_accelerators_fail_their_model_only(server_factory, tmp_path):
    repo = tmp_path / "repo"
    d = models.write_model(repo, "identity_fp32")
    d.rename(repo / "badparam")
    cfg = (repo / "badparam" / "config.pbtxt").read_text().replace("identity_fp32", "badparam")
    (repo / "badparam" / "config.pbtxt").write_text(cfg)
    with_accelerator(repo / "badparam", ' parameters { key: "num_streamz" value: "2" }')
    d = models.write_model(repo, "identity_fp32")
    d.rename(repo / "badname")
    cfg = (repo / "badname" / "config.pbtxt").read_text().replace("identity_fp32", "badname")
    (repo / "badname" / "config.pbtxt").write_text(cfg)
    with_accelerator(repo / "badname", name="fastcpu")
    models.write_model(repo, "simple")
    srv = server_factory([repo], ["--exit-on-error=false"])
    idx = index(srv.port)
    assert idx["simple"]["state"] == "READY"
    assert idx["badparam"]["state"] == "UNAVAILABLE"
    assert "unknown parameter 'num_streamz' for Execution Accelerator 'openvino'" in \
        idx["badparam"]["reason"], idx["badparam"]
    assert "unknown Execution Accelerator 'fastcpu' is requested" in idx["badname"]["reason"], \
        idx["badname"]


def check_simple_runs(port):
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    r = infer_simple(httpclient.InferenceServerClient(f"127.0.0.1:{port}"), a, a)
    assert np.array_equal(r.as_numpy("OUTPUT0"), 2 * a)


def test_backend_directory_without_or_with_a_broken_library(server_factory, tmp_path):
    """A --backend-directory with no onnxruntime/libonnxruntime.so: the default library; one
    whose library is no ONNX Runtime: every ONNX model fails with dlopen's reason."""
    repo = tmp_path / "repo"
    models.write_model(repo, "simple")
    empty = tmp_path / "empty"
    empty.mkdir()
    srv = server_factory([repo], [f"--backend-directory={empty}"], name="empty")
    assert re.search(r"loaded ONNX Runtime \S+ at \S+", srv.log)
    check_simple_runs(srv.port)
    srv.stop()
    bad = tmp_path / "bad" / "onnxruntime"
    bad.mkdir(parents=True)
    (bad / "libonnxruntime.so").write_text("not a library\n" * 16)
    srv = server_factory([repo], ["--exit-on-error=false", f"--backend-directory={bad.parent}"],
                         name="bad")
    assert index(srv.port)["simple"]["reason"] == (
        f"Internal: unable to load the ONNX Runtime library: {bad}/libonnxruntime.so: invalid "
        f"ELF header")
