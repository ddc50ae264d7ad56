"""Model control (issue #20): --model-control-mode=explicit|poll, --load-model, the repository
API over HTTP and gRPC with the official tritonclient, config overrides as Model Analyzer sends
them, reloads that lose no request, unloads that let in-flight requests finish, and polling.

No test asserts on wall-clock time; deadlines only bound how long a test waits for something
that must happen."""
import http.client
import json
import shutil
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

import models
from e2e_util import get, infer_json, post, wait_for

IDENT_DATA = [float(i) for i in range(16)]


def index(port, ready=None):
    body = b"" if ready is None else json.dumps({"ready": ready}).encode()
    r = post(port, "/v2/repository/index", body)
    assert r.status == 200, r
    return r.json()


def load(port, model, body=None):
    return post(port, f"/v2/repository/models/{model}/load",
                json.dumps(body).encode() if body is not None else b"")


def unload(port, model):
    return post(port, f"/v2/repository/models/{model}/unload")


def ident_ok(port, model="identity_fp32"):
    r = infer_json(port, model, {"inputs": [{"name": "INPUT0", "shape": [1, 16],
                                             "datatype": "FP32", "data": IDENT_DATA}]})
    return r.status == 200 and r.json()["outputs"][0]["data"] == IDENT_DATA


def model_states(port, name):
    return [(e.get("version"), e.get("state"), e.get("reason")) for e in index(port)
            if e["name"] == name]


@pytest.fixture
def repo(tmp_path, repos):
    """A private copy of repo_small (identity_bytes, identity_fp32, order_test, simple)."""
    d = tmp_path / "repo"
    shutil.copytree(repos["repo_small"], d)
    return d


def explicit(server_factory, repo, *args):
    return server_factory([repo], ["--model-control-mode=explicit", *args])


# ---- explicit mode: the repository API ------------------------------------------------------

def test_explicit_starts_empty_and_lists_names_only(server_factory, repo):
    srv = explicit(server_factory, repo)
    assert index(srv.port) == [{"name": n} for n in
                               ["identity_bytes", "identity_fp32", "order_test", "simple"]]
    assert index(srv.port, ready=True) == []
    assert get(srv.port, "/v2/models/simple/ready").status == 400
    assert get(srv.port, "/v2/health/ready").status == 200  # nothing loaded is not "not ready"
    assert "model_control_mode | MODE_EXPLICIT" in " ".join(srv.log.split())


def test_load_infer_unload_with_tritonclient_http(server_factory, repo):
    srv = explicit(server_factory, repo)
    c = httpclient.InferenceServerClient(srv.url)
    c.load_model("identity_fp32")
    assert c.is_model_ready("identity_fp32")
    assert ident_ok(srv.port)
    assert model_states(srv.port, "identity_fp32") == [("1", "READY", None)]
    assert c.get_model_config("identity_fp32")["max_batch_size"] == 8
    c.unload_model("identity_fp32")
    assert not c.is_model_ready("identity_fp32")
    wait_for(lambda: model_states(srv.port, "identity_fp32") == [("1", "UNAVAILABLE", "unloaded")],
             30, "identity_fp32 unloaded")
    r = infer_json(srv.port, "identity_fp32", {"inputs": []})
    assert r.json() == {"error": "Request for unknown model: 'identity_fp32' has no available "
                                 "versions"}, r
    r = infer_json(srv.port, "identity_fp32", {"inputs": []}, version=1)
    assert r.json() == {"error": "Request for unknown model: 'identity_fp32' version 1 is not at "
                                 "ready state"}, r
    # statistics and metrics of an unloaded model are gone, as in Triton
    assert c.get_inference_statistics()["model_stats"] == []
    assert 'model="identity_fp32"' not in get(srv.metrics_port, "/metrics").text
    assert "successfully unloaded 'identity_fp32' version 1" in srv.log
    # and it loads again
    c.load_model("identity_fp32")
    assert ident_ok(srv.port)
    assert 'nv_inference_request_success{model="identity_fp32",version="1"} 1' in \
        get(srv.metrics_port, "/metrics").text


def test_load_errors(server_factory, repo):
    models.write_model(repo, "broken")
    srv = explicit(server_factory, repo)
    r = load(srv.port, "no_such_model")
    assert r.status == 500, r
    assert r.json() == {"error": "failed to load 'no_such_model', failed to poll from model "
                                 "repository"}
    r = load(srv.port, "broken")
    assert r.status == 400, r
    err = r.json()["error"]
    assert err.startswith("load failed for model 'broken': version 1 is at UNAVAILABLE state: "
                          "Internal: onnx runtime error"), err
    assert err.endswith(";\n"), err
    [(v, state, reason)] = model_states(srv.port, "broken")
    assert (v, state) == ("1", "UNAVAILABLE") and reason.startswith("Internal: onnx runtime")
    # unloading what is not loaded is no error (Triton)
    assert unload(srv.port, "no_such_model").status == 200
    assert unload(srv.port, "simple").status == 200
    # a repository name is refused as before
    assert post(srv.port, "/v2/repository/r/models/simple/load").status == 501
    for body in ([1, 2], {"parameters": "x"}):  # not objects: refused, nothing loaded
        r = load(srv.port, "simple", body)
        assert r.status == 400 and r.json() == {
            "error": "attempt to access JSON non-object as object"}, r
    assert model_states(srv.port, "simple") == [(None, None, None)]
    r = load(srv.port, "simple", {"parameters": {"file:1/model.onnx": "@@@="}})
    assert r.status == 400 and "failed to decode base64 for load parameter" in r.json()["error"]
    r = load(srv.port, "simple", {"parameters": {"bogus": "x"}})
    assert r.status == 400 and r.json()["error"] == \
        "Unrecognized load parameter 'bogus' with type 'STRING'", r


def test_load_refused_outside_explicit_mode(server_factory, repo):
    for mode in ("none", "poll"):
        srv = server_factory([repo], [f"--model-control-mode={mode}"], name=mode)
        r = load(srv.port, "simple")
        assert r.status == 503 and r.json() == {
            "error": "explicit model load / unload is not allowed if polling is enabled"}, r
        assert unload(srv.port, "simple").status == 503
        assert ident_ok(srv.port)
        srv.stop()


def test_load_model_flags(server_factory, repo):
    srv = explicit(server_factory, repo, "--load-model=simple", "--load-model=identity_fp32")
    ready = {e["name"] for e in index(srv.port, ready=True)}
    assert ready == {"simple", "identity_fp32"}
    assert "startup_models_0 | simple" in " ".join(srv.log.split())
    srv.stop()
    srv = explicit(server_factory, repo, "--load-model=*")
    assert {e["name"] for e in index(srv.port, ready=True)} == \
        {"identity_bytes", "identity_fp32", "order_test", "simple"}


def test_load_model_not_found_at_startup(server_factory, repo):
    srv = explicit(server_factory, repo, "--load-model=nope", "--exit-on-error=false")
    assert "failed to load 'nope', failed to poll from model repository" in srv.log
    assert get(srv.port, "/v2/health/ready").status == 400  # strict readiness
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=nope"],
                         expect_rc=1, wait=False, name="exit")
    assert srv.wait_exit() == 1
    assert "failed to load all models" in srv.log


def test_load_model_flag_errors(server_factory, repo):
    srv = server_factory([repo], ["--load-model=simple"], expect_rc=1, wait=False)
    assert srv.wait_exit() == 1
    assert "--load-model can only be used with --model-control-mode=explicit" in srv.log
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=*",
                                  "--load-model=simple"], expect_rc=1, wait=False, name="wild")
    assert srv.wait_exit() == 1
    assert "Wildcard model name '*' must be the ONLY startup model" in srv.log


def test_grpc_repository_api(server_factory, repo):
    srv = explicit(server_factory, repo)
    if srv.grpc_port is None:
        pytest.skip("no gRPC")
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    names = [m.name for m in c.get_model_repository_index().models]
    assert names == ["identity_bytes", "identity_fp32", "order_test", "simple"]
    c.load_model("simple")
    assert c.is_model_ready("simple")
    idx = {m.name: (m.version, m.state) for m in c.get_model_repository_index().models}
    assert idx["simple"] == ("1", "READY") and idx["identity_fp32"] == ("", "")
    with pytest.raises(InferenceServerException) as e:
        c.load_model("nope")
    assert "failed to load 'nope', failed to poll from model repository" in e.value.message()
    # a model loaded over gRPC serves HTTP too (one repository)
    r = infer_json(srv.port, "simple", {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]})
    assert r.status == 200, r
    c.unload_model("simple")
    assert not c.is_model_ready("simple")


# ---- config overrides ----------------------------------------------------------------------

ANALYZER_CFG = {  # as Model Analyzer sends it: snake_case, int64 as strings
    "name": "identity_fp32", "backend": "onnxruntime", "max_batch_size": 4,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": ["-1"]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": ["-1"]}],
    "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
    "dynamic_batching": {"max_queue_delay_microseconds": "100"},
}


def test_config_override_applies(server_factory, repo):
    srv = explicit(server_factory, repo, "--load-model=identity_fp32")
    c = httpclient.InferenceServerClient(srv.url)
    c.load_model("identity_fp32", config=json.dumps(ANALYZER_CFG))
    cfg = c.get_model_config("identity_fp32")
    assert cfg["max_batch_size"] == 4
    assert cfg["instance_group"][0]["count"] == 2
    assert cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert ident_ok(srv.port)
    # the override is a whole config: a load without it goes back to config.pbtxt
    c.load_model("identity_fp32")
    cfg = c.get_model_config("identity_fp32")
    assert cfg["max_batch_size"] == 8 and "dynamic_batching" not in cfg


def test_partial_override_autocompletes(server_factory, repo):
    """simple_http_model_control.py's override: only max_batch_size, the rest auto-completed."""
    srv = explicit(server_factory, repo, "--load-model=simple")
    c = httpclient.InferenceServerClient(srv.url)
    with pytest.raises(InferenceServerException) as e:
        c.load_model("simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert "failed to load" in e.value.message()
    assert c.is_model_ready("simple")  # the bad override left the old one serving
    c.load_model("simple", config='{"max_batch_size":"16"}')
    assert c.get_model_config("simple")["max_batch_size"] == 16


def test_invalid_override_keeps_the_old_version(server_factory, repo):
    srv = explicit(server_factory, repo, "--load-model=identity_fp32")
    bad = dict(ANALYZER_CFG, instance_group=[{"count": 1, "kind": "KIND_NOPE"}])
    r = load(srv.port, "identity_fp32", {"parameters": {"config": json.dumps(bad)}})
    assert r.status == 500, r
    assert r.json()["error"].startswith("failed to load 'identity_fp32', failed to poll from "
                                        "model repository: Invalid argument: Invalid config "
                                        "override: "), r
    assert "KIND_NOPE" in r.json()["error"]
    other = dict(ANALYZER_CFG, name="other_name")
    r = load(srv.port, "identity_fp32", {"parameters": {"config": json.dumps(other)}})
    assert r.status == 500 and "unexpected directory name 'identity_fp32' for model " \
        "'other_name', directory name must equal model name" in r.json()["error"], r
    assert ident_ok(srv.port)
    assert model_states(srv.port, "identity_fp32") == [("1", "READY", None)]
    assert "polling is enabled" not in srv.log


def test_files_override(server_factory, repo, tmp_path):
    """Model files sent with the load (file:<path>, base64 over HTTP, bytes over gRPC)."""
    srv = explicit(server_factory, repo)
    onnx_bytes = (repo / "identity_fp32" / "1" / "model.onnx").read_bytes()
    cfg = dict(ANALYZER_CFG, name="sent", instance_group=[{"count": 1, "kind": "KIND_CPU"}])
    del cfg["dynamic_batching"]
    c = httpclient.InferenceServerClient(srv.url)
    c.load_model("sent", config=json.dumps(cfg), files={"file:1/model.onnx": onnx_bytes})
    assert ident_ok(srv.port, "sent")
    r = load(srv.port, "sent2", {"parameters": {"file:1/model.onnx": "AAAA"}})
    assert r.status == 400 and "'config' parameter" in r.json()["error"], r
    r = load(srv.port, "sent", {"parameters": {"config": json.dumps(cfg),
                                               "file:../x": "AAAA"}})
    assert r.status == 400 and "Invalid file path 'file:../x'" in r.json()["error"], r
    r = load(srv.port, "sent", {"parameters": {"config": json.dumps(cfg),
                                               "file:" + "A" * 256: "AAAA"}})
    assert r.status == 400 and "Invalid file path" in r.json()["error"], r
    assert ident_ok(srv.port, "sent")


# ---- reload and unload while serving ------------------------------------------------------

def test_reload_loses_no_request(server_factory, repo):
    """8 clients send continuously while the model is reloaded 50 times with alternating
    configs (instances 1/2, dynamic batching on/off): every request answered, correctly."""
    srv = explicit(server_factory, repo, "--load-model=identity_fp32")
    stop = threading.Event()
    counts = [0] * 8
    errors = []

    def client(i):
        # a keep-alive connection of its own (tritonclient.http's gevent pool belongs to the
        # thread that made it and warns when another thread collects it)
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        x = [float(k + i) for k in range(16)]
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32",
                                       "data": x}]})
        try:
            while not stop.is_set():
                conn.request("POST", "/v2/models/identity_fp32/infer", body,
                             {"Content-Type": "application/json"})
                r = conn.getresponse()
                answer = r.read()
                if r.status != 200 or json.loads(answer)["outputs"][0]["data"] != x:
                    errors.append(f"client {i}: {r.status} {answer[:200]!r}")
                counts[i] += 1
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append(f"client {i}: {e}")
        finally:
            conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        c = httpclient.InferenceServerClient(srv.url)
        for k in range(50):
            cfg = dict(ANALYZER_CFG, max_batch_size=8,
                       instance_group=[{"count": 1 + k % 2, "kind": "KIND_CPU"}])
            if k % 4 >= 2:
                del cfg["dynamic_batching"]
            c.load_model("identity_fp32", config=json.dumps(cfg))
            if errors:
                break
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors[:5]
    assert all(n > 0 for n in counts), counts
    assert ident_ok(srv.port)
    wait_for(lambda: srv.log.count("successfully unloaded 'identity_fp32' version 1") >= 50, 60,
             "every replaced version unloaded")


def test_unload_lets_inflight_requests_finish(server_factory, repo):
    """A request waiting in the queue (dynamic batching, 2 s delay) when its model is unloaded
    is answered; new requests are refused with Triton's error; the version ends UNAVAILABLE."""
    srv = explicit(server_factory, repo)
    slow = dict(ANALYZER_CFG, instance_group=[{"count": 1, "kind": "KIND_CPU"}],
                dynamic_batching={"max_queue_delay_microseconds": "2000000",
                                  "preferred_batch_size": [4]})
    c = httpclient.InferenceServerClient(srv.url)
    c.load_model("identity_fp32", config=json.dumps(slow))
    result = {}
    t = threading.Thread(target=lambda: result.update(ok=ident_ok(srv.port)))
    t.start()
    pending = 'nv_inference_pending_request_count{model="identity_fp32",version="1"} 1'
    wait_for(lambda: pending in get(srv.metrics_port, "/metrics").text, 10,
             "the request waiting in the queue")
    c.unload_model("identity_fp32")
    assert model_states(srv.port, "identity_fp32") in ([("1", "UNLOADING", None)],
                                                       [("1", "UNAVAILABLE", "unloaded")])
    r = infer_json(srv.port, "identity_fp32", {"inputs": []})
    assert "has no available versions" in r.json()["error"], r
    t.join(30)
    assert result.get("ok") is True
    wait_for(lambda: model_states(srv.port, "identity_fp32") == [("1", "UNAVAILABLE", "unloaded")],
             30, "the version unloaded once its request finished")


def test_version_policy_change_adds_and_removes_versions(server_factory, repo):
    d = repo / "identity_fp32"
    shutil.copytree(d / "1", d / "2")
    srv = explicit(server_factory, repo, "--load-model=identity_fp32")
    assert model_states(srv.port, "identity_fp32") == [("2", "READY", None)]  # latest 1
    cfg = (d / "config.pbtxt").read_text() + "version_policy: { all {} }\n"
    (d / "config.pbtxt").write_text(cfg)
    httpclient.InferenceServerClient(srv.url).load_model("identity_fp32")
    assert model_states(srv.port, "identity_fp32") == [("1", "READY", None), ("2", "READY", None)]
    (d / "config.pbtxt").write_text(cfg.replace("all {}", "specific { versions: [1] }"))
    httpclient.InferenceServerClient(srv.url).load_model("identity_fp32")
    wait_for(lambda: model_states(srv.port, "identity_fp32") ==
             [("1", "READY", None), ("2", "UNAVAILABLE", "unloaded")], 30, "version 2 unloaded")


# ---- poll mode ---------------------------------------------------------------------------

def test_poll_mode_follows_the_repository(server_factory, repo):
    srv = server_factory([repo], ["--model-control-mode=poll", "--repository-poll-secs=1"])
    assert "model_control_mode | MODE_POLL" in " ".join(srv.log.split())
    models.write_model(repo, "two_versions")
    wait_for(lambda: get(srv.port, "/v2/models/two_versions/ready").status == 200, 30,
             "two_versions added")
    shutil.rmtree(repo / "identity_bytes")
    assert model_states(srv.port, "identity_bytes") == []  # the index lists directories
    wait_for(lambda: get(srv.port, "/v2/models/identity_bytes/ready").status == 400, 30,
             "identity_bytes unloaded")
    # a config written half-way does not take the serving version down
    (repo / "identity_fp32" / "config.pbtxt").write_text('name: "identity_fp32"\ninput [ { name')
    wait_for(lambda: "identity_fp32" in srv.log.split("failed to load 'identity_fp32'", 1)[-1]
             if "failed to load 'identity_fp32'" in srv.log else False, 30, "the poll seeing it")
    assert ident_ok(srv.port)
    models.write_model(repo, "identity_fp32")  # written whole again: reloaded
    wait_for(lambda: srv.log.count("successfully loaded 'identity_fp32'") >= 2, 30, "reload")
    assert ident_ok(srv.port)


def test_a_grpc_model_load_does_not_hold_other_grpc_calls(server_factory, tmp_path):
    """A load over gRPC runs on a thread of its own, as over HTTP: while a model whose warmup
    takes seconds loads, the same gRPC server answers other calls (before, the load ran on the
    completion-queue thread and every other gRPC client waited for it)."""
    repo = tmp_path / "repo"
    d = models.write_model(repo, "identity_fp32")
    d.rename(d.parent / "slow_load")
    warmup = ('model_warmup [ { name: "w" batch_size: 1 count: 1000000 inputs { key: "INPUT0" '
              'value: { data_type: TYPE_FP32 dims: [ 16 ] zero_data: true } } } ]\n')
    (repo / "slow_load" / "config.pbtxt").write_text(models.config_identity("slow_load") + warmup)
    models.write_model(repo, "identity_fp32")
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=identity_fp32"])
    url = f"127.0.0.1:{srv.grpc_port}"
    done = threading.Event()

    def load():
        grpcclient.InferenceServerClient(url).load_model("slow_load")
        done.set()

    t = threading.Thread(target=load)
    t.start()
    wait_for(lambda: "loading: slow_load:1" in srv.log, 60, "the load started")
    g = grpcclient.InferenceServerClient(url)
    inp = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    inp.set_data_from_numpy(np.arange(16, dtype=np.float32).reshape(1, 16))
    for _ in range(20):
        assert g.is_server_live()
        assert g.infer("identity_fp32", [inp]).as_numpy("OUTPUT0")[0][3] == 3.0
    assert not done.is_set(), "the load ended before the other calls were answered"
    t.join()
    assert g.is_model_ready("slow_load")
