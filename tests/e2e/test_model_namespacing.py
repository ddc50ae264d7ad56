"""--model-namespacing (issue #39): with it, each repository path is a namespace of its own, as
in Triton 2.51. One model name in two repositories loads twice; an ensemble runs the model of
its own repository (else the one model of that name anywhere); a request naming a model found
in several repositories gets Triton's INVALID_ARG text over HTTP and gRPC, and so do its
metadata and statistics; the repository index lists each; a load or an unload by name acts on
every repository's model of that name; the metrics show one series per (model, version) label
set, adding up the models that share it. Without the flag, a name in two repositories stops
the server, as before.

The models: `m` is an FP32 identity in repository A and doubles its input in repository B, so
an answer tells which one ran."""
import re

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto
from tritonclient.utils import InferenceServerException

import models
from e2e_util import get, post, wait_for

X = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
AMBIGUOUS = ("There are 2 identifiers of model 'm' in global map, model namespace must be "
             "provided to resolve ambiguity.")


def write_m(repo, double):
    d = repo / "m"
    models._write(d / "config.pbtxt", models.config_identity("m"))
    models._save(models.graph_identity(TensorProto.FLOAT, double=double), d / "1" / "model.onnx")


def write_ens(repo, name, step):
    models.write_ensemble(repo, name, models._ensemble_config(
        name, 8, [("IN", "TYPE_FP32", [-1])], [("OUT", "TYPE_FP32", [-1])],
        [(step, -1, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})]))


@pytest.fixture
def ns_repos(tmp_path):
    """A: m (identity), ens_a -> m, ens_fuzzy -> only_b, ens_amb -> dup.
    B: m (doubles), ens_b -> m, only_b (identity), dup. C: dup."""
    a, b, c = tmp_path / "A", tmp_path / "B", tmp_path / "C"
    write_m(a, False)
    write_m(b, True)
    write_ens(a, "ens_a", "m")
    write_ens(b, "ens_b", "m")
    write_ens(a, "ens_fuzzy", "only_b")
    write_ens(a, "ens_amb", "dup")
    for repo, name in ((b, "only_b"), (b, "dup"), (c, "dup")):
        models._write(repo / name / "config.pbtxt", models.config_identity(name))
        models._save(models.graph_identity(TensorProto.FLOAT), repo / name / "1" / "model.onnx")
    return a, b, c


def infer(client, model):
    mod = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    i = mod.InferInput("IN" if model.startswith("ens") else "INPUT0", list(X.shape), "FP32")
    i.set_data_from_numpy(X)
    r = client.infer(model, [i])
    return r.as_numpy("OUT" if model.startswith("ens") else "OUTPUT0")


def index(port):
    r = post(port, "/v2/repository/index")
    assert r.status == 200, r
    return sorted((e["name"], e.get("version"), e.get("state"), e.get("reason"))
                  for e in r.json())


def test_without_the_flag_a_name_in_two_repositories_stops_the_server(server_factory, ns_repos):
    a, b, _ = ns_repos
    srv = server_factory([a, b], expect_rc=1, wait=False)
    srv.wait_exit(60)
    assert "model 'm' exists in multiple model repositories" in srv.log


def test_each_repository_is_a_namespace(server_factory, ns_repos):
    a, b, c = ns_repos
    srv = server_factory([a, b, c], ["--model-namespacing=true", "--exit-on-error=false",
                                     "--strict-readiness=false"])
    assert f"loading: {a}::m:1" in srv.log and f"loading: {b}::m:1" in srv.log
    h = httpclient.InferenceServerClient(srv.url)
    g = grpcclient.InferenceServerClient(srv.grpc_url)
    for client in (h, g):
        np.testing.assert_array_equal(infer(client, "ens_a"), X)  # A's m
        np.testing.assert_array_equal(infer(client, "ens_b"), 2 * X)  # B's m
        np.testing.assert_array_equal(infer(client, "ens_fuzzy"), X)  # the one only_b
        np.testing.assert_array_equal(infer(client, "only_b"), X)  # a unique name serves
    # two `dup` outside A: the ensemble of A cannot tell which one it means
    assert (f"ensemble {a}::ens_amb contains models that are not available or ambiguous: dup"
            in srv.log)

    # a request by the name of two models: Triton's INVALID_ARG, over both protocols
    with pytest.raises(InferenceServerException) as e:
        infer(h, "m")
    assert e.value.message() == AMBIGUOUS and e.value.status() == "400"
    with pytest.raises(InferenceServerException) as e:
        infer(g, "m")
    assert e.value.message() == AMBIGUOUS and e.value.status() == "StatusCode.INVALID_ARGUMENT"
    r = get(srv.port, "/v2/models/m")
    assert r.status == 400 and r.json() == {"error": AMBIGUOUS}
    r = get(srv.port, "/v2/models/m/stats")
    assert r.status == 400 and r.json() == {"error": AMBIGUOUS}
    with pytest.raises(InferenceServerException) as e:
        g.get_model_metadata("m")
    assert e.value.message() == AMBIGUOUS
    assert not h.is_model_ready("m")

    # the index lists both, each READY
    idx = index(srv.port)
    assert idx.count(("m", "1", "READY", None)) == 2, idx
    assert idx.count(("dup", "1", "READY", None)) == 2, idx

    # one series per label set: ens_a ran A's m 2 times, ens_b B's m 2 times
    text = get(srv.metrics_port, "/metrics").body.decode()
    lines = [ln for ln in text.splitlines()
             if ln.startswith('nv_inference_count{model="m",version="1"}')]
    assert lines == ['nv_inference_count{model="m",version="1"} 4'], lines
    ok = re.findall(r'^nv_inference_request_success\{model="m",version="1"\} (\d+)$', text, re.M)
    assert ok == ["4"], ok


def test_load_and_unload_by_name_act_on_every_namespace(server_factory, ns_repos):
    a, b, _ = ns_repos
    srv = server_factory([a, b], ["--model-control-mode=explicit", "--model-namespacing=true",
                                  "--load-model=m"])
    assert index(srv.port).count(("m", "1", "READY", None)) == 2
    h = httpclient.InferenceServerClient(srv.url)
    assert post(srv.port, "/v2/repository/models/ens_b/load").status == 200
    np.testing.assert_array_equal(infer(h, "ens_b"), 2 * X)

    # unloading `m` unloads both, and the ensemble that uses B's
    assert post(srv.port, "/v2/repository/models/m/unload").status == 200
    wait_for(lambda: index(srv.port).count(("m", "1", "UNAVAILABLE", "unloaded")) == 2, 30,
             "both m unloaded")
    wait_for(lambda: ("ens_b", "1", "UNAVAILABLE", "unloaded") in index(srv.port), 30,
             "ens_b unloaded with its step")
    with pytest.raises(InferenceServerException) as e:
        infer(h, "m")
    assert e.value.message() == "Request for unknown model: 'm' is not found"
    assert e.value.status() == "400"

    # an ensemble's load loads the step of its own namespace only: then `m` is one model
    assert post(srv.port, "/v2/repository/models/ens_a/load").status == 200
    idx = index(srv.port)
    assert ("m", "1", "READY", None) in idx and ("m", "1", "UNAVAILABLE", "unloaded") in idx
    np.testing.assert_array_equal(infer(h, "m"), X)  # A's: unique again
    np.testing.assert_array_equal(infer(h, "ens_a"), X)

    # a load by name loads every repository's model of that name
    assert post(srv.port, "/v2/repository/models/m/load").status == 200
    assert index(srv.port).count(("m", "1", "READY", None)) == 2
    with pytest.raises(InferenceServerException) as e:
        infer(h, "m")
    assert e.value.message() == AMBIGUOUS
    np.testing.assert_array_equal(infer(h, "ens_a"), X)


def test_a_failed_load_names_the_model_with_its_namespace(server_factory, ns_repos):
    a, b, _ = ns_repos
    (b / "m" / "1" / "model.onnx").write_bytes(b"not an onnx model")
    srv = server_factory([a, b], ["--model-control-mode=explicit", "--model-namespacing=true"])
    r = post(srv.port, "/v2/repository/models/m/load")
    assert r.status == 400, r
    msg = r.json()["error"]
    assert msg.startswith(f"load failed for model '{b}::m': version 1 is at UNAVAILABLE state"), msg
    assert f"'{a}::m'" not in msg  # A's loaded
    idx = index(srv.port)
    assert ("m", "1", "READY", None) in idx
    # B's m failed but is known (Triton keeps it in its global map): `m` is still two models
    with pytest.raises(InferenceServerException) as e:
        infer(httpclient.InferenceServerClient(srv.url), "m")
    assert e.value.message() == AMBIGUOUS


def test_a_step_is_the_model_of_its_own_namespace_first(server_factory, tmp_path):
    """A's ensemble x runs y, found only in B; B's y runs x, which in B is a plain model: no
    cycle, as Triton resolves each step in the ensemble's own namespace first. A real cycle
    (A's c1 -> c2 -> c1) is refused, the models named with their namespaces."""
    a, b = tmp_path / "A", tmp_path / "B"
    write_ens(a, "x", "y")
    models.write_ensemble(b, "y", models._ensemble_config(
        "y", 8, [("INPUT0", "TYPE_FP32", [-1])], [("OUTPUT0", "TYPE_FP32", [-1])],
        [("x", -1, {"INPUT0": "INPUT0"}, {"OUTPUT0": "OUTPUT0"})]))
    models._write(b / "x" / "config.pbtxt", models.config_identity("x"))
    models._save(models.graph_identity(TensorProto.FLOAT, double=True), b / "x" / "1" / "model.onnx")
    write_ens(a, "c1", "c2")
    write_ens(a, "c2", "c1")
    srv = server_factory([a, b], ["--model-namespacing=true", "--exit-on-error=false",
                                  "--strict-readiness=false"])
    idx = index(srv.port)
    assert idx.count(("x", "1", "READY", None)) == 2, idx
    h = httpclient.InferenceServerClient(srv.url)
    i = httpclient.InferInput("INPUT0", list(X.shape), "FP32")
    i.set_data_from_numpy(X)
    np.testing.assert_array_equal(h.infer("y", [i]).as_numpy("OUTPUT0"), 2 * X)  # B's x
    assert f"circular dependency between ensembles: {a}::c" in srv.log
    assert ("c1", "1", "READY", None) not in idx
