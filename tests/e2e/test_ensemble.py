"""Ensembles (issue #36): platform "ensemble" models run their steps as a graph over the
composing models, over HTTP and gRPC with the official tritonclient: Triton's qa
ensemble_add_sub (six steps over two versions of `simple`), a diamond (fan-out, fan-in), a
step with a dynamic batcher fed by ensemble and direct traffic at once; only the steps the
requested outputs need run; a step's error comes back behind Triton's "in ensemble '<e>', ";
Triton's load-time checks in its words; in explicit mode loading an ensemble loads its
composing models and unloading one of those unloads the ensemble, and an unload with
unload_dependents takes the composing models only the ensemble's load brought in; a composing
model reloaded under load loses no ensemble request; the ensemble's own statistics.

No test asserts on wall-clock time; deadlines only bound how long a test waits."""
import json
import threading

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

import models
from e2e_util import get, infer_json, post, wait_for

A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = np.full((1, 16), 3, dtype=np.int32)


@pytest.fixture
def repo(tmp_path):
    """simple (versions 1 and 2), identity_fp32, dyn_batch and the ensembles over them."""
    d = tmp_path / "repo"
    models.write_simple_two_versions(d)
    models.write_model(d, "identity_fp32")
    models.write_model(d, "dyn_batch")
    models.write_ensemble(d, "ensemble_add_sub", models.ensemble_add_sub_config())
    models.write_ensemble(d, "ensemble_diamond", models.ensemble_diamond_config())
    models.write_ensemble(d, "ensemble_chain", models.ensemble_chain_config())
    return d


@pytest.fixture
def server(server_factory, repo):
    return server_factory([repo])


def int_inputs(mod, names, a=A, b=B):
    ins = [mod.InferInput(names[0], list(a.shape), "INT32"),
           mod.InferInput(names[1], list(b.shape), "INT32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    return ins


def success_counts(client, model):
    kw = {"as_json": True} if isinstance(client, grpcclient.InferenceServerClient) else {}
    stats = client.get_inference_statistics(model, **kw)["model_stats"]
    return {s["version"]: int(s["inference_stats"]["success"].get("count", 0)) for s in stats}


def test_ensemble_add_sub_over_http_and_grpc(server):
    for mod, url in ((httpclient, server.url), (grpcclient, f"127.0.0.1:{server.grpc_port}")):
        c = mod.InferenceServerClient(url)
        r = c.infer("ensemble_add_sub", int_inputs(mod, ["INPUT0", "INPUT1"]))
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), A + B)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), A - B)


def test_only_the_steps_the_requested_outputs_need_run(server):
    """Triton's qa test_ensemble_add_sub_one_output: OUTPUT0 comes from the steps on version
    -1 (2) only, so asking for it alone runs three steps on version 2 and none on version 1."""
    c = httpclient.InferenceServerClient(server.url)
    before = success_counts(c, "simple")
    r = c.infer("ensemble_add_sub", int_inputs(httpclient, ["INPUT0", "INPUT1"]),
                outputs=[httpclient.InferRequestedOutput("OUTPUT0")])
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), A + B)
    assert r.as_numpy("OUTPUT1") is None
    after = success_counts(c, "simple")
    assert after["1"] - before["1"] == 0 and after["2"] - before["2"] == 3, (before, after)
    r = c.infer("ensemble_add_sub", int_inputs(httpclient, ["INPUT0", "INPUT1"]))
    final = success_counts(c, "simple")
    assert final["1"] - after["1"] == 3 and final["2"] - after["2"] == 3, (after, final)


def test_a_diamond_fans_out_and_in(server):
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    before = success_counts(c, "simple")["2"]
    for k in range(5):
        a, b = A + k, B * (k + 1)
        r = c.infer("ensemble_diamond", int_inputs(grpcclient, ["IN0", "IN1"], a, b))
        np.testing.assert_array_equal(r.as_numpy("SUM"), 4 * a)
        np.testing.assert_array_equal(r.as_numpy("DIFF"), 4 * b)
    assert success_counts(c, "simple")["2"] - before == 4 * 5


def test_a_batching_step_serves_ensemble_and_direct_traffic_together(server):
    """dyn_batch (a dynamic batcher) is the second step of ensemble_chain and is called
    directly at the same time, from 8 threads; every answer is its own request's data."""
    errors = []

    def client(i):
        c = httpclient.InferenceServerClient(server.url)
        for k in range(25):
            data = np.full((1, 5), float(i * 1000 + k), dtype=np.float32)
            inp = httpclient.InferInput("IN" if i % 2 else "INPUT0", [1, 5], "FP32")
            inp.set_data_from_numpy(data)
            model, out = ("ensemble_chain", "OUT") if i % 2 else ("dyn_batch", "OUTPUT0")
            got = c.infer(model, [inp]).as_numpy(out)
            if not np.array_equal(got, data):
                errors.append((model, data, got))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    c = httpclient.InferenceServerClient(server.url)
    assert success_counts(c, "ensemble_chain")["1"] == 100
    assert success_counts(c, "dyn_batch")["1"] == 200  # 100 direct, 100 from the ensemble


def test_a_failing_step_ends_the_request_with_its_text(server_factory, repo):
    """IN is [-1] for the ensemble, simple wants [16]: the step's own validation refuses 8
    elements, and the client gets that text behind Triton's prefix, with its code."""
    models.write_ensemble(repo, "ens_shape", models._ensemble_config(
        "ens_shape", 8, [("IN", "TYPE_INT32", [-1])], [("OUT", "TYPE_INT32", [-1])],
        [("simple", -1, {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT0": "OUT"})]))
    srv = server_factory([repo])
    r = infer_json(srv.port, "ens_shape", {"id": "r7", "inputs": [
        {"name": "IN", "shape": [1, 8], "datatype": "INT32", "data": list(range(8))}]})
    assert r.status == 400, r
    msg = r.json()["error"]
    assert msg.startswith("in ensemble 'ens_shape', [request id: r7] unexpected shape for input "
                          "'INPUT1' for model 'simple'. Expected [-1,16], got [1,8]."), msg
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc_port}")
    inp = grpcclient.InferInput("IN", [1, 8], "INT32")
    inp.set_data_from_numpy(np.arange(8, dtype=np.int32).reshape(1, 8))
    with pytest.raises(InferenceServerException) as e:
        c.infer("ens_shape", [inp])
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "in ensemble 'ens_shape', " in e.value.message()
    stats = c.get_inference_statistics("ens_shape", as_json=True)["model_stats"][0]
    assert int(stats["inference_stats"]["fail"]["count"]) == 2


def load(port, model):
    return post(port, f"/v2/repository/models/{model}/load")


def test_load_time_checks_are_tritons(server_factory, repo):
    bad = {
        "ens_dtype": models._ensemble_config(
            "ens_dtype", 8, [("IN", "TYPE_FP32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("simple", -1, {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT0": "OUT"})]),
        "ens_shape": models._ensemble_config(
            "ens_shape", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [4, 4])],
            [("simple", -1, {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT0": "OUT"})]),
        "ens_batch": models._ensemble_config(
            "ens_batch", 16, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("simple", -1, {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT0": "OUT"})]),
        "ens_input": models._ensemble_config(
            "ens_input", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("simple", -1, {"INPUT0": "IN", "NOPE": "IN"}, {"OUTPUT0": "OUT"})]),
        "ens_output": models._ensemble_config(
            "ens_output", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("simple", -1, {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT9": "OUT"})]),
        "ens_unmapped": models._ensemble_config(
            "ens_unmapped", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("simple", -1, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})]),
        "ens_version": models._ensemble_config(
            "ens_version", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("simple", 3, {"INPUT0": "IN", "INPUT1": "IN"}, {"OUTPUT0": "OUT"})]),
        "ens_self": models._ensemble_config(
            "ens_self", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("ens_self", -1, {"IN": "IN"}, {"OUT": "OUT"})]),
        "ens_cycle_a": models._ensemble_config(
            "ens_cycle_a", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("ens_cycle_b", -1, {"IN": "IN"}, {"OUT": "OUT"})]),
        "ens_cycle_b": models._ensemble_config(
            "ens_cycle_b", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("ens_cycle_a", -1, {"IN": "IN"}, {"OUT": "OUT"})]),
        "ens_missing": models._ensemble_config(
            "ens_missing", 8, [("IN", "TYPE_INT32", [16])], [("OUT", "TYPE_INT32", [16])],
            [("nosuch", -1, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})]),
    }
    for name, cfg in bad.items():
        models.write_ensemble(repo, name, cfg)
    srv = server_factory([repo], ["--model-control-mode=explicit"])
    want = {
        "ens_dtype": "in ensemble ens_dtype, ensemble tensor IN: inconsistent data type: "
                     "TYPE_FP32 is inferred from model ens_dtype while TYPE_INT32 is inferred "
                     "from model simple",
        "ens_shape": "in ensemble ens_shape, ensemble tensor OUT: inconsistent shape: [-1,4,4] "
                     "is inferred from model ens_shape while [-1,16] is inferred from model "
                     "simple",
        "ens_batch": "ensemble ens_batch allows maximum batch size 16, but it contains model "
                     "simple which only allows maximum batch size to be 8",
        "ens_input": "in ensemble ens_input, ensemble tensor IN is mapping to non-existing input "
                     "NOPE in model simple",
        "ens_output": "in ensemble ens_output, ensemble tensor OUT is mapped from non-existing "
                      "output OUTPUT9 in model simple",
        "ens_unmapped": "in ensemble ens_unmapped, input INPUT1 in model simple is not mapped "
                        "to any ensemble tensors",
        "ens_version": "ensemble 'ens_version' depends on 'simple' whose required version 3 is "
                       "not loaded.",
        "ens_self": "circular dependency between ensembles: ens_self -> ... -> ens_self -> "
                    "ens_self",
        "ens_cycle_a": "circular dependency between ensembles: ens_cycle_a -> ... -> ens_cycle_b "
                       "-> ens_cycle_a",
    }
    for name, text in want.items():
        r = load(srv.port, name)
        assert (r.status, r.json()) == (400, {"error": f"load failed for model '{name}': "
                                                       f"{text}\n"}), name
        assert f"Invalid argument: {text}" in srv.log
    r = load(srv.port, "ens_missing")  # a composing model in no repository: the poll fails
    assert (r.status, r.json()) == (500, {"error": "failed to load 'ens_missing', failed to poll "
                                                   "from model repository"})
    assert "failed to poll model 'nosuch': model not found in any model repository." in srv.log
    assert ("ensemble ens_missing contains models that are not available or ambiguous: nosuch"
            in srv.log)


def index(port):
    r = post(port, "/v2/repository/index")
    assert r.status == 200, r
    return {(e["name"], e.get("version")): (e.get("state"), e.get("reason")) for e in r.json()}


def test_explicit_mode_loads_what_an_ensemble_needs_and_unloads_what_needs_a_model(
        server_factory, repo):
    srv = server_factory([repo], ["--model-control-mode=explicit"])
    assert index(srv.port)[("simple", None)] == (None, None)  # not loaded
    assert load(srv.port, "ensemble_diamond").status == 200
    idx = index(srv.port)
    assert idx[("simple", "1")] == ("READY", None) and idx[("simple", "2")] == ("READY", None)
    assert idx[("ensemble_diamond", "1")] == ("READY", None)
    c = httpclient.InferenceServerClient(srv.url)
    r = c.infer("ensemble_diamond", int_inputs(httpclient, ["IN0", "IN1"]))
    np.testing.assert_array_equal(r.as_numpy("SUM"), 4 * A)
    assert post(srv.port, "/v2/repository/models/simple/unload").status == 200
    wait_for(lambda: index(srv.port)[("ensemble_diamond", "1")] == ("UNAVAILABLE", "unloaded"),
             30, "the ensemble unloaded with its composing model")
    assert ("ensemble ensemble_diamond contains models that are not available or ambiguous: "
            "simple" in srv.log)
    with pytest.raises(InferenceServerException) as e:
        c.infer("ensemble_diamond", int_inputs(httpclient, ["IN0", "IN1"]))
    assert "ensemble_diamond" in e.value.message()
    assert load(srv.port, "ensemble_diamond").status == 200  # loads simple again
    r = c.infer("ensemble_diamond", int_inputs(httpclient, ["IN0", "IN1"]))
    np.testing.assert_array_equal(r.as_numpy("DIFF"), 4 * B)


def test_unload_dependents_takes_what_only_the_ensembles_load_brought_in(server_factory, repo):
    """Triton's cascading removal: an unload with unload_dependents also unloads the composing
    models (nested ensembles followed) that were loaded only because an ensemble needed them
    and that no other loaded ensemble uses; a model a load named itself, or one another
    ensemble still uses, stays. A plain unload takes the ensemble alone."""
    models.write_ensemble(repo, "ensemble_nested", models.ensemble_nested_config())
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=ensemble_chain"])
    for name in ("ensemble_nested", "ensemble_diamond", "dyn_batch"):  # dyn_batch: named now
        assert load(srv.port, name).status == 200, name
    ready, gone = ("READY", None), ("UNAVAILABLE", "unloaded")

    def states(*names):
        idx = index(srv.port)
        return [idx[(n, "1")] for n in names]

    assert states("ensemble_add_sub", "simple", "identity_fp32", "dyn_batch") == [ready] * 4
    body = json.dumps({"parameters": {"unload_dependents": True}}).encode()
    hdr = {"Content-Type": "application/json"}
    # ensemble_add_sub goes; simple stays, ensemble_diamond uses it
    assert post(srv.port, "/v2/repository/models/ensemble_nested/unload", body, hdr).status == 200
    wait_for(lambda: states("ensemble_nested", "ensemble_add_sub") == [gone, gone], 30,
             "the nested ensemble unloaded with the ensemble that brought it in")
    assert states("simple", "ensemble_diamond") == [ready, ready]
    # identity_fp32 goes; dyn_batch stays, a load named it
    g = grpcclient.InferenceServerClient(srv.grpc_url)
    g.unload_model("ensemble_chain", unload_dependents=True)
    wait_for(lambda: states("ensemble_chain", "identity_fp32") == [gone, gone], 30,
             "identity_fp32 unloaded with ensemble_chain")
    assert states("dyn_batch") == [ready]
    # a plain unload: simple stays; unloaded with dependents after a new load, it goes
    g.unload_model("ensemble_diamond")
    wait_for(lambda: states("ensemble_diamond") == [gone], 30, "ensemble_diamond unloaded")
    assert states("simple") == [ready]
    assert load(srv.port, "ensemble_diamond").status == 200
    g.unload_model("ensemble_diamond", unload_dependents=True)
    wait_for(lambda: states("ensemble_diamond", "simple") == [gone, gone], 30,
             "simple unloaded with ensemble_diamond")
    assert states("dyn_batch") == [ready]


def test_unload_dependents_of_the_wrong_type_is_refused_and_unloads_nothing(server_factory, repo):
    """A non-boolean unload_dependents gets Triton's error on each protocol (HTTP 400 with
    TritonJson's text, gRPC INVALID_ARGUMENT), unloads nothing, and the server serves on."""
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=ensemble_diamond"])
    r = post(srv.port, "/v2/repository/models/ensemble_diamond/unload",
             b'{"parameters":{"unload_dependents":"yes"}}', {"Content-Type": "application/json"})
    assert (r.status, r.json()) == (400, {"error": "attempt to access JSON non-boolean as boolean"})
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(srv.grpc_url))
    req = service_pb2.RepositoryModelUnloadRequest(model_name="ensemble_diamond")
    req.parameters["unload_dependents"].int64_param = 1
    with pytest.raises(grpc.RpcError) as e:
        stub.RepositoryModelUnload(req)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == ("invalid value type for 'unload_dependents' parameter, "
                                 "expected bool_param.")
    idx = index(srv.port)
    assert idx[("ensemble_diamond", "1")] == ("READY", None)
    assert idx[("simple", "1")] == ("READY", None)
    c = httpclient.InferenceServerClient(srv.url)
    r = c.infer("ensemble_diamond", int_inputs(httpclient, ["IN0", "IN1"]))
    np.testing.assert_array_equal(r.as_numpy("SUM"), 4 * A)


def test_a_composing_model_reloaded_under_load_loses_no_ensemble_request(server_factory, repo):
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=ensemble_chain"])
    stop = threading.Event()
    errors, done = [], [0]

    def client(i):
        c = httpclient.InferenceServerClient(srv.url)
        k = 0
        while not stop.is_set():
            data = np.full((1, 4), float(i * 100000 + k), dtype=np.float32)
            inp = httpclient.InferInput("IN", [1, 4], "FP32")
            inp.set_data_from_numpy(data)
            try:
                got = c.infer("ensemble_chain", [inp]).as_numpy("OUT")
                if not np.array_equal(got, data):
                    errors.append((data, got))
            except InferenceServerException as e:
                errors.append(str(e))
            done[0] += 1
            k += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    cfg = repo / "dyn_batch" / "config.pbtxt"
    text = cfg.read_text()
    for n in range(3):  # each a changed config: a full reload beside the serving version
        wait_for(lambda: done[0] > (n + 1) * 20, 60, "ensemble requests before the reload")
        cfg.write_text(text.replace("max_queue_delay_microseconds: 100",
                                    f"max_queue_delay_microseconds: {200 + n}"))
        r = load(srv.port, "dyn_batch")
        assert r.status == 200, r
    wait_for(lambda: done[0] > 100, 60, "ensemble requests after the reloads")
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_the_ensembles_own_statistics(server):
    c = httpclient.InferenceServerClient(server.url)
    for _ in range(3):
        c.infer("ensemble_diamond", int_inputs(httpclient, ["IN0", "IN1"]))
    two = np.concatenate([A, A]), np.concatenate([B, B])
    c.infer("ensemble_diamond", int_inputs(httpclient, ["IN0", "IN1"], *two))
    s = c.get_inference_statistics("ensemble_diamond")["model_stats"][0]
    assert (s["inference_count"], s["execution_count"]) == (5, 4)
    st = s["inference_stats"]
    assert st["success"]["count"] == 4 and st["fail"]["count"] == 0
    for k in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert st[k]["count"] == 4, k
    # the compute times are its steps' sums: at least one step's each
    assert st["compute_infer"]["ns"] > 0
    sizes = {b["batch_size"]: b["compute_infer"]["count"] for b in s["batch_stats"]}
    assert sizes == {1: 3, 2: 1}
    meta = c.get_model_metadata("ensemble_diamond")
    assert meta["platform"] == "ensemble"
    cfg = c.get_model_config("ensemble_diamond")
    assert cfg["platform"] == "ensemble" and len(cfg["ensemble_scheduling"]["step"]) == 4
    assert json.dumps(cfg).count("instance_group") == 0 or cfg.get("instance_group") == []


def test_streaming_shared_memory_classification_and_metrics(server_factory, repo, tmp_path):
    """An ensemble over gRPC's ModelInferStream; its inputs and outputs in system shared memory;
    classification of an ensemble output with the labels of the step output it comes from; its
    Prometheus series under version "1", as Triton's ensemble scheduler reports it."""
    import queue

    import tritonclient.utils.shared_memory as shm

    (repo / "identity_fp32" / "labels.txt").write_text("".join(f"l{i}\n" for i in range(8)))
    cfg = repo / "identity_fp32" / "config.pbtxt"
    out = 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }'
    assert out in cfg.read_text()
    cfg.write_text(cfg.read_text().replace(out, out[:-1] + 'label_filename: "labels.txt" }'))
    models.write_ensemble(repo, "ens_labels", models._ensemble_config(
        "ens_labels", 8, [("IN", "TYPE_FP32", [-1])], [("OUT", "TYPE_FP32", [-1])],
        [("identity_fp32", -1, {"INPUT0": "IN"}, {"OUTPUT0": "OUT"})]))
    (repo / "ens_labels" / "3").mkdir()  # versions 1 and 3: the series still says "1"
    (repo / "ens_labels" / "1").rmdir()
    srv = server_factory([repo])
    g = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc_port}")
    got = queue.Queue()
    g.start_stream(callback=lambda result, error: got.put((result, error)))
    for k in range(3):
        g.async_stream_infer("ensemble_diamond", int_inputs(grpcclient, ["IN0", "IN1"], A + k, B),
                             request_id=f"s{k}")
    for k in range(3):
        result, error = got.get(timeout=30)
        assert error is None, error
        np.testing.assert_array_equal(result.as_numpy("SUM"), 4 * (A + int(
            result.get_response().id[1:])))
    g.stop_stream()

    h = httpclient.InferenceServerClient(srv.url)
    ih = shm.create_shared_memory_region("ens_in", "/nereid_ens_in", 128)
    oh = shm.create_shared_memory_region("ens_out", "/nereid_ens_out", 128)
    try:
        h.register_system_shared_memory("ens_in", "/nereid_ens_in", 128)
        h.register_system_shared_memory("ens_out", "/nereid_ens_out", 128)
        shm.set_shared_memory_region(ih, [A, B])
        ins = [httpclient.InferInput("INPUT0", [1, 16], "INT32"),
               httpclient.InferInput("INPUT1", [1, 16], "INT32")]
        ins[0].set_shared_memory("ens_in", 64)
        ins[1].set_shared_memory("ens_in", 64, offset=64)
        outs = [httpclient.InferRequestedOutput("OUTPUT0"),
                httpclient.InferRequestedOutput("OUTPUT1")]
        outs[0].set_shared_memory("ens_out", 64)
        outs[1].set_shared_memory("ens_out", 64, offset=64)
        h.infer("ensemble_add_sub", ins, outputs=outs)
        got = shm.get_contents_as_numpy(oh, np.int32, [2, 16])
        np.testing.assert_array_equal(got[0], (A + B)[0])
        np.testing.assert_array_equal(got[1], (A - B)[0])
        h.unregister_system_shared_memory()
    finally:
        shm.destroy_shared_memory_region(ih)
        shm.destroy_shared_memory_region(oh)

    data = np.array([[0.5, 3.0, 1.0]], dtype=np.float32)
    inp = httpclient.InferInput("IN", [1, 3], "FP32")
    inp.set_data_from_numpy(data)
    r = h.infer("ens_labels", [inp],
                outputs=[httpclient.InferRequestedOutput("OUT", class_count=2)])
    assert [x.decode() for x in r.as_numpy("OUT").reshape(-1)] == ["3.000000:1:l1",
                                                                    "1.000000:2:l2"]
    text = get(srv.metrics_port, "/metrics").body.decode()
    assert 'nv_inference_request_success{model="ens_labels",version="1"} 1' in text, text
    assert 'model="ens_labels",version="3"' not in text


def test_a_cancelled_stream_starts_no_more_steps(server_factory, repo):
    """The client cancels its ModelStreamInfer call while the first step of an ensemble waits
    in a dynamic batcher's queue (2 s of max_queue_delay): that step still ends, the next one
    never starts, and the ensemble counts a CANCELED failure (Triton cancels over gRPC too)."""
    slow = repo / "slow_batch"
    (slow / "1").mkdir(parents=True)
    (slow / "1" / "model.onnx").write_bytes((repo / "dyn_batch" / "1" / "model.onnx").read_bytes())
    (slow / "config.pbtxt").write_text(
        (repo / "dyn_batch" / "config.pbtxt").read_text().replace('"dyn_batch"', '"slow_batch"')
        .replace("max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 2000000"))
    models.write_ensemble(repo, "ens_slow", models.ensemble_chain_config(
        "ens_slow", first="slow_batch", second="identity_fp32"))
    srv = server_factory([repo])
    g = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc_port}")
    g.start_stream(callback=lambda result, error: None)
    inp = grpcclient.InferInput("IN", [1, 4], "FP32")
    inp.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
    g.async_stream_infer("ens_slow", [inp])
    wait_for(lambda: success_counts(g, "slow_batch") == {"1": 0} and get(
        srv.metrics_port, "/metrics").body.decode().count('nv_inference_pending_request_count'
                                                          '{model="slow_batch",version="1"} 1'),
             30, "the first step queued")
    g.stop_stream(cancel_requests=True)

    def failures():
        text = get(srv.metrics_port, "/metrics").body.decode()
        return ('nv_inference_request_failure{model="ens_slow",reason="CANCELED",version="1"} 1'
                in text)
    wait_for(failures, 30, "the ensemble request cancelled")
    assert success_counts(g, "slow_batch") == {"1": 1}  # the step that had started ended
    assert success_counts(g, "identity_fp32") == {"1": 0}  # the next one never started


# ---- the user guide's ensemble_model, rebuilt with ONNX steps ------------------------------

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def write_user_guide_ensemble(repo):
    """docs/user_guide/ensemble_models.md's ensemble_model: image_preprocess_model, then
    classification_model and segmentation_model on its output at once (a fan-out), with the
    guide's tensor names. Departure: IMAGE is the raw pixels (UINT8 [224,224,3]) rather than
    an encoded file (TYPE_STRING), which only a Python model can decode (issue #37)."""
    from onnx import TensorProto as T, helper, numpy_helper

    def save(nodes, name, ins, outs, inits, path):
        g = helper.make_graph(nodes, name, ins, outs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(m.SerializeToString())

    vi = helper.make_tensor_value_info
    save([helper.make_node("Cast", ["RAW_IMAGE"], ["f"], to=T.FLOAT),
          helper.make_node("Div", ["f", "k255"], ["s"]),
          helper.make_node("Sub", ["s", "mean"], ["c"]),
          helper.make_node("Div", ["c", "std"], ["n"]),
          helper.make_node("Transpose", ["n"], ["PREPROCESSED_OUTPUT"], perm=[0, 3, 1, 2])],
         "pre", [vi("RAW_IMAGE", T.UINT8, ["b", 224, 224, 3])],
         [vi("PREPROCESSED_OUTPUT", T.FLOAT, ["b", 3, 224, 224])],
         [numpy_helper.from_array(np.array(255, np.float32), "k255"),
          numpy_helper.from_array(MEAN, "mean"), numpy_helper.from_array(STD, "std")],
         repo / "image_preprocess_model" / "1" / "model.onnx")
    w = np.random.default_rng(3).standard_normal((3, 1000)).astype(np.float32)
    save([helper.make_node("GlobalAveragePool", ["FORMATTED_IMAGE"], ["p"]),
          helper.make_node("Flatten", ["p"], ["v"]),
          helper.make_node("MatMul", ["v", "w"], ["l"]),
          helper.make_node("Softmax", ["l"], ["CLASSIFICATION_OUTPUT"], axis=1)],
         "cls", [vi("FORMATTED_IMAGE", T.FLOAT, ["b", 3, 224, 224])],
         [vi("CLASSIFICATION_OUTPUT", T.FLOAT, ["b", 1000])], [numpy_helper.from_array(w, "w")],
         repo / "classification_model" / "1" / "model.onnx")
    save([helper.make_node("Sigmoid", ["FORMATTED_IMAGE"], ["SEGMENTATION_OUTPUT"])],
         "seg", [vi("FORMATTED_IMAGE", T.FLOAT, ["b", 3, 224, 224])],
         [vi("SEGMENTATION_OUTPUT", T.FLOAT, ["b", 3, 224, 224])], [],
         repo / "segmentation_model" / "1" / "model.onnx")

    def cfg(name, ins, outs, extra=""):
        def t(n, ty, dims, more=""):
            return f'{{ name: "{n}" data_type: {ty} dims: [ {", ".join(map(str, dims))} ] {more}}}'
        return (f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: 1\n'
                f"input [ {', '.join(t(*i) for i in ins)} ]\n"
                f"output [ {', '.join(t(*o) for o in outs)} ]\n{extra}")
    (repo / "image_preprocess_model" / "config.pbtxt").write_text(cfg(
        "image_preprocess_model", [("RAW_IMAGE", "TYPE_UINT8", [224, 224, 3])],
        [("PREPROCESSED_OUTPUT", "TYPE_FP32", [3, 224, 224])]))
    (repo / "classification_model" / "labels.txt").write_text(
        "".join(f"class{i}\n" for i in range(1000)))
    (repo / "classification_model" / "config.pbtxt").write_text(cfg(
        "classification_model", [("FORMATTED_IMAGE", "TYPE_FP32", [3, 224, 224])],
        [("CLASSIFICATION_OUTPUT", "TYPE_FP32", [1000], 'label_filename: "labels.txt" ')]))
    (repo / "segmentation_model" / "config.pbtxt").write_text(cfg(
        "segmentation_model", [("FORMATTED_IMAGE", "TYPE_FP32", [3, 224, 224])],
        [("SEGMENTATION_OUTPUT", "TYPE_FP32", [3, 224, 224])]))
    models.write_ensemble(repo, "ensemble_model", models._ensemble_config(
        "ensemble_model", 1, [("IMAGE", "TYPE_UINT8", [224, 224, 3])],
        [("CLASSIFICATION", "TYPE_FP32", [1000]), ("SEGMENTATION", "TYPE_FP32", [3, 224, 224])],
        [("image_preprocess_model", -1, {"RAW_IMAGE": "IMAGE"},
          {"PREPROCESSED_OUTPUT": "preprocessed_image"}),
         ("classification_model", -1, {"FORMATTED_IMAGE": "preprocessed_image"},
          {"CLASSIFICATION_OUTPUT": "CLASSIFICATION"}),
         ("segmentation_model", -1, {"FORMATTED_IMAGE": "preprocessed_image"},
          {"SEGMENTATION_OUTPUT": "SEGMENTATION"})]))
    return w


def test_the_user_guides_ensemble_model_with_onnx_steps(server_factory, tmp_path):
    repo = tmp_path / "guide"
    w = write_user_guide_ensemble(repo)
    srv = server_factory([repo])
    image = np.random.default_rng(5).integers(0, 256, (1, 224, 224, 3), dtype=np.uint8)
    pre = ((image.astype(np.float32) / 255 - MEAN) / STD).transpose(0, 3, 1, 2)
    logits = pre.mean(axis=(2, 3)) @ w
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    for mod, url in ((httpclient, srv.url), (grpcclient, f"127.0.0.1:{srv.grpc_port}")):
        c = mod.InferenceServerClient(url)
        inp = mod.InferInput("IMAGE", [1, 224, 224, 3], "UINT8")
        inp.set_data_from_numpy(image)
        r = c.infer("ensemble_model", [inp])
        np.testing.assert_allclose(r.as_numpy("CLASSIFICATION"), probs, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(r.as_numpy("SEGMENTATION"), 1 / (1 + np.exp(-pre)),
                                   rtol=1e-5, atol=1e-6)
        top = mod.InferRequestedOutput("CLASSIFICATION", class_count=2)
        got = c.infer("ensemble_model", [inp], outputs=[top]).as_numpy("CLASSIFICATION")
        best = np.argsort(-probs[0])[:2]
        assert [x.decode().split(":")[1:] for x in got.reshape(-1)] == [
            [str(i), f"class{i}"] for i in best]  # the labels of the step it comes from


def test_an_ensemble_of_an_ensemble(server_factory, repo):
    """Triton's qa embedded_ensemble: a step that is itself an ensemble. Its compute times add
    into the outer ensemble's (Triton's sums), and are never negative."""
    models.write_ensemble(repo, "ensemble_nested", models.ensemble_nested_config())
    srv = server_factory([repo])
    c = httpclient.InferenceServerClient(srv.url)
    for k in range(3):
        r = c.infer("ensemble_nested", int_inputs(httpclient, ["INPUT0", "INPUT1"], A + k, B))
        np.testing.assert_array_equal(r.as_numpy("OUT0"), 2 * (A + k))
        np.testing.assert_array_equal(r.as_numpy("OUT1"), 2 * B)
    outer = c.get_inference_statistics("ensemble_nested")["model_stats"][0]["inference_stats"]
    inner = c.get_inference_statistics("ensemble_add_sub")["model_stats"][0]["inference_stats"]
    for k in ("compute_input", "compute_infer", "compute_output"):
        assert outer[k]["count"] == 3 and inner[k]["count"] == 3, k
        # the outer's sums hold the inner's, and one more step's (simple version 2)
        assert inner[k]["ns"] <= outer[k]["ns"] < 1_000_000_000 * 3, (k, inner[k], outer[k])
