"""Triton's own Python gRPC examples, run unchanged against nereid.

The examples are the files of Triton's client repository, src/python/examples (*grpc*.py,
grpc_image_client.py, reuse_infer_objects_client.py). They are not vendored here: point
TRITON_CLIENT_EXAMPLES at a directory holding them; without it this module is skipped.

    TRITON_CLIENT_EXAMPLES=/path/to/client/src/python/examples \\
        .venv/bin/python -m pytest -q tests/e2e/test_triton_examples.py

The model control examples (simple_http_model_control.py, simple_grpc_model_control.py,
simple_grpc_aio_model_control.py) run against their own server in --model-control-mode=explicit
over a repository of as many models as the example counts in the index (its versions differ:
seven or eight), simple among them.

Each example runs as its own process (this interpreter, `-u <gRPC address>` plus the arguments
below), against one server holding examples/model_repository (simple, identity_fp32,
inception_onnx, densenet_onnx; `make models`) and models.REPOS["repo_examples"] (simple_string,
simple_int8, simple_identity, and inception_graphdef: an ONNX stand-in with the IO names of
Triton's TensorFlow model). A test passes when the example exits 0 and, where the example prints
one, its "PASS" line is there (grpc_explicit_int*_content_client.py exit 0 either way and print
PASS only when the server's error message is Triton's). grpc_image_client.py needs Pillow (PIL)
and is skipped without it; it classifies images this test writes.

Expected to fail, so not run here:
  simple_grpc_cudashm_client.py, simple_grpc_aio_cudashm_client.py
      CUDA shared memory: needs a GPU and cuda-python on the client; nereid has no CUDA.
  simple_grpc_sequence_stream_infer_client.py, simple_grpc_sequence_sync_infer_client.py,
  simple_grpc_aio_sequence_stream_infer_client.py, simple_grpc_aio_sequence_sync_infer_client.py
      simple_sequence / simple_dyna_sequence are Triton's custom sequence backends, served with
      the sequence batcher, which nereid does not have.
  simple_grpc_custom_repeat.py
      repeat_int32 is Triton's decoupled C++ repeat backend (many responses per request).
  (ensemble_image_client.py, not a *grpc* file but with -i grpc: nereid has no ensembles.)
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import running_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_REPO = ROOT / "examples" / "model_repository"
EXAMPLES_DIR = os.environ.get("TRITON_CLIENT_EXAMPLES")
RUN_TIMEOUT_S = 120

pytestmark = [
    pytest.mark.skipif(not EXAMPLES_DIR,
                       reason="TRITON_CLIENT_EXAMPLES is not set (Triton's client examples are "
                              "not vendored: point it at client/src/python/examples)"),
    pytest.mark.skipif(not (EXAMPLE_REPO / "densenet_onnx/1/model.onnx").exists(),
                       reason="run `make models` first (examples/model_repository)"),
]

IMAGE = "{image}"        # replaced by an image file this test writes
IMAGES = "{images}"      # replaced by a folder of three images

# (test id, example file, arguments after -u <url>, whether the example prints "PASS")
EXPECTED_TO_PASS = [
    ("grpc_client", "grpc_client.py", [], True),
    ("explicit_byte_content", "grpc_explicit_byte_content_client.py", [], True),
    ("explicit_int8_content", "grpc_explicit_int8_content_client.py", [], True),
    ("explicit_int_content", "grpc_explicit_int_content_client.py", [], True),
    ("image_densenet", "grpc_image_client.py",
     ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", IMAGE], True),
    ("image_densenet_streaming", "grpc_image_client.py",
     ["-m", "densenet_onnx", "-c", "3", "-s", "INCEPTION", "--streaming", IMAGE], True),
    ("image_inception_onnx_async_batch2", "grpc_image_client.py",
     ["-m", "inception_onnx", "-c", "2", "-s", "INCEPTION", "-a", "-b", "2", IMAGES], True),
    ("image_inception_graphdef", "grpc_image_client.py",
     ["-m", "inception_graphdef", "-c", "3", "-s", "INCEPTION", IMAGE], True),
    ("reuse_infer_objects", "reuse_infer_objects_client.py", ["-i", "grpc"], False),
    ("aio_custom_args", "simple_grpc_aio_custom_args_client.py", [], True),
    ("aio_health_metadata", "simple_grpc_aio_health_metadata.py", [], True),
    ("aio_infer", "simple_grpc_aio_infer_client.py", [], True),
    ("aio_infer_gzip", "simple_grpc_aio_infer_client.py", ["-C", "gzip"], True),
    ("aio_keepalive", "simple_grpc_aio_keepalive_client.py", [], True),
    ("aio_shm", "simple_grpc_aio_shm_client.py", [], True),
    ("aio_shm_string", "simple_grpc_aio_shm_string_client.py", [], True),
    ("aio_string_infer", "simple_grpc_aio_string_infer_client.py", [], True),
    ("async_infer", "simple_grpc_async_infer_client.py", [], True),
    ("custom_args", "simple_grpc_custom_args_client.py", [], True),
    ("health_metadata", "simple_grpc_health_metadata.py", [], False),
    ("infer", "simple_grpc_infer_client.py", [], True),
    ("infer_gzip", "simple_grpc_infer_client.py", ["-C", "gzip"], True),
    ("infer_deflate", "simple_grpc_infer_client.py", ["-C", "deflate"], True),
    ("keepalive", "simple_grpc_keepalive_client.py", [], True),
    ("shm", "simple_grpc_shm_client.py", [], True),
    ("shm_string", "simple_grpc_shm_string_client.py", [], True),
    ("string_infer", "simple_grpc_string_infer_client.py", [], True),
]

EXPECTED_TO_FAIL = [
    "simple_grpc_cudashm_client.py", "simple_grpc_aio_cudashm_client.py",
    "simple_grpc_sequence_stream_infer_client.py", "simple_grpc_sequence_sync_infer_client.py",
    "simple_grpc_aio_sequence_stream_infer_client.py",
    "simple_grpc_aio_sequence_sync_infer_client.py",
    "simple_grpc_custom_repeat.py",
]


@pytest.fixture(scope="module")
def examples_server(repos, tmp_path_factory):
    with running_server([repos["repo_examples"], EXAMPLE_REPO], [],
                        log_dir=tmp_path_factory.mktemp("triton_examples"),
                        name="triton_examples") as srv:
        if srv.grpc_port is None:
            pytest.skip("this nereid build serves no gRPC")
        yield srv


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """{"{image}": one JPEG, "{images}": a folder of three PNGs}, random pixels (fixed seed)."""
    import numpy as np
    from PIL import Image
    d = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(d / "one.jpg")
    (d / "many").mkdir()
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)).save(
            d / "many" / f"{i}.png")
    return {IMAGE: str(d / "one.jpg"), IMAGES: str(d / "many")}


def test_expected_lists_are_disjoint():
    assert not {f for _, f, _, _ in EXPECTED_TO_PASS} & set(EXPECTED_TO_FAIL)


@pytest.mark.parametrize("example, args, prints_pass",
                         [pytest.param(f, a, p, id=i) for i, f, a, p in EXPECTED_TO_PASS])
def test_example(examples_server, request, tmp_path, example, args, prints_pass):
    path = Path(EXAMPLES_DIR) / example
    if not path.is_file():
        pytest.skip(f"{example} is not in TRITON_CLIENT_EXAMPLES={EXAMPLES_DIR}")
    if IMAGE in args or IMAGES in args:
        if importlib.util.find_spec("PIL") is None:
            pytest.skip("grpc_image_client.py needs Pillow (PIL), not installed")
        files = request.getfixturevalue("images")
        args = [files.get(a, a) for a in args]

    argv = [sys.executable, str(path), "-u", examples_server.grpc_url] + list(args)
    try:
        p = subprocess.run(argv, capture_output=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        pytest.fail(f"{example} still running after {RUN_TIMEOUT_S} s\n$ {' '.join(argv)}\n"
                    f"{out[-4000:]}\n{examples_server.describe()}", pytrace=False)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    report = (f"$ {' '.join(argv)}\n--- stdout (tail) ---\n{out[-4000:]}\n"
              f"--- stderr (tail) ---\n{err[-4000:]}\n{examples_server.describe()}")
    assert p.returncode == 0, f"{example} exited with {p.returncode}\n{report}"
    if prints_pass:
        assert "PASS" in out, f"{example} exited 0 without printing PASS\n{report}"
    if example == "reuse_infer_objects_client.py":
        # it prints no PASS; three inferences (shm, no shm, shm) each end with this line
        assert out.count("======== END ========") == 3, report
    assert examples_server.alive(), examples_server.describe()


MODEL_CONTROL = ["simple_http_model_control.py", "simple_grpc_model_control.py",
                 "simple_grpc_aio_model_control.py"]


@pytest.mark.parametrize("example", MODEL_CONTROL)
def test_model_control_example(repos, tmp_path, example):
    path = Path(EXAMPLES_DIR) / example
    if not path.is_file():
        pytest.skip(f"{example} is not in TRITON_CLIENT_EXAMPLES={EXAMPLES_DIR}")
    want = re.search(r"!= (\d+)", path.read_text())
    n = int(want.group(1)) if want else 7
    sources = {p.name: p for p in sorted(repos["repo_examples"].iterdir())}
    sources.update({p.name: p for p in sorted(EXAMPLE_REPO.iterdir()) if p.is_dir()})
    names = ["simple"] + sorted(k for k in sources if k != "simple")
    if len(names) < n:
        pytest.skip(f"{example} expects {n} models in the index; there are {len(names)}")
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in names[:n]:
        (repo / name).symlink_to(sources[name], target_is_directory=True)
    with running_server([repo], ["--model-control-mode=explicit"], log_dir=tmp_path,
                        name="model_control") as srv:
        url = srv.url if "http" in example else srv.grpc_url
        p = subprocess.run([sys.executable, str(path), "-u", url], capture_output=True,
                           timeout=RUN_TIMEOUT_S, cwd=tmp_path, stdin=subprocess.DEVNULL)
        out = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
        report = f"{out[-4000:]}\n{srv.describe()}"
        assert p.returncode == 0, f"{example} exited with {p.returncode}\n{report}"
        assert "PASS: model control" in out, report
        assert srv.alive(), srv.describe()
