"""The runtime image (issue #40): `make image`'s script builds it with buildah (chroot isolation,
no daemon; on a Debian 12 base made with mmdebstrap where no registry answers, as here), and the
server runs from it (`buildah run --isolation chroot --network host`) against
examples/model_repository mounted at /models: health, an inference over HTTP and over gRPC, the
metrics. The image runs as a non-root user, exposes 8000-8002, has a health check, takes
Triton's flags as its entrypoint's and answers to `tritonserver` too; its unpacked size is
printed (the goal: under 400 MB, the Python runtime included).

Runs in the timed tier, alone: it builds an image (minutes, mostly I/O)."""
import json
import os
import shutil
import signal
import subprocess

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conftest import ROOT, free_port, listening
from e2e_util import get, wait_for

IMAGE = "localhost/nereid-e2e:test"


def buildah(*args, timeout=600, check=True):
    p = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert p.returncode == 0, (args, p.stdout[-2000:], p.stderr[-4000:])
    return p.stdout


@pytest.fixture(scope="module")
def image():
    assert shutil.which("buildah"), "buildah (scripts/setup.sh installs it) is missing"
    assert os.geteuid() == 0, "buildah's chroot isolation needs root here"
    p = subprocess.run(["bash", str(ROOT / "scripts" / "image.sh")], capture_output=True,
                       text=True, timeout=1800,
                       env=dict(os.environ, IMAGE=IMAGE, BUILD=str(ROOT / "build")))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    print(p.stdout)
    yield IMAGE
    buildah("rmi", "-f", IMAGE, check=False)


def test_image_config(image):
    cfg = json.loads(buildah("inspect", "--type", "image", image))["Docker"]["config"]
    assert cfg["User"] == "10001"
    assert cfg["Entrypoint"] == ["/usr/local/bin/nereid"]
    assert cfg["Cmd"] == ["--model-repository=/models"]
    assert set(cfg["ExposedPorts"]) == {"8000/tcp", "8001/tcp", "8002/tcp"}
    assert "/v2/health/ready" in " ".join(cfg["Healthcheck"]["Test"])


def unpacked_mb(ctr):
    mnt = buildah("mount", ctr).strip()
    try:
        p = subprocess.run(["du", "-sxm", mnt], capture_output=True, text=True, timeout=300)
        return int(p.stdout.split()[0])
    finally:
        buildah("umount", ctr, check=False)


def test_server_runs_from_the_image(image, tmp_path, capsys):
    ctr = buildah("from", "--quiet", image).strip()
    proc = None
    try:
        mb = unpacked_mb(ctr)
        with capsys.disabled():
            print(f"\nimage {image}: {mb} MB unpacked (goal: under 400 MB)")
        assert mb < 400, f"the image grew to {mb} MB unpacked"
        # the image's own tools
        out = buildah("run", "--isolation", "chroot", ctr, "--",
                      "/usr/local/bin/tritonserver", "--help")
        assert "--model-repository" in out
        assert "numpy" in buildah("run", "--isolation", "chroot", ctr, "--", "python3", "-c",
                                  "import numpy; print(numpy.__name__)")
        http, grpc_, metrics = free_port(), free_port(), free_port()
        log = open(tmp_path / "server.log", "wb")
        proc = subprocess.Popen(
            ["buildah", "run", "--isolation", "chroot", "--network", "host",
             "-v", f"{ROOT / 'examples' / 'model_repository'}:/models:ro", ctr, "--",
             "/usr/local/bin/nereid", "--model-repository=/models", f"--http-port={http}",
             f"--grpc-port={grpc_}", f"--metrics-port={metrics}"],
            stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: listening(http) or proc.poll() is not None, 120, "nereid in the image")
        assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
        assert get(http, "/v2/health/ready").status == 200
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        b = np.ones((1, 16), dtype=np.int32)
        for mod, url in ((httpclient, f"127.0.0.1:{http}"), (grpcclient, f"127.0.0.1:{grpc_}")):
            c = mod.InferenceServerClient(url)
            ins = [mod.InferInput("INPUT0", [1, 16], "INT32"),
                   mod.InferInput("INPUT1", [1, 16], "INT32")]
            ins[0].set_data_from_numpy(a)
            ins[1].set_data_from_numpy(b)
            r = c.infer("simple", ins)
            np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        text = get(metrics, "/metrics").body.decode()
        assert 'nv_inference_request_success{model="simple",version="1"} 2' in text, text[:2000]
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        buildah("rm", ctr, check=False)
