"""The response cache (issue #39): --cache-config=local,size=<bytes> with a model's
response_cache { enable: true }. A request equal to an earlier one (model, this load of its
version, inputs' dtype, shape and bytes, outputs asked for) is answered from the cache without
running the model, byte for byte as computed; statistics and metrics count hits and misses as
Triton does; the least recently used entries make room; a reload starts afresh."""

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from e2e_util import get, post, request

CACHE = "\nresponse_cache { enable: true }\n"


def cached_repo(repos, dest, names=("identity_fp32", "simple"), cache=True):
    for n in names:
        shutil.copytree(Path(repos["repo_small"]) / n, dest / n)
        if cache:
            cfg = dest / n / "config.pbtxt"
            cfg.write_text(cfg.read_text() + CACHE)
    return dest


def ident_body(values):
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, len(values)],
                                   "datatype": "FP32", "data": values}]})


def stats(port, model):
    s = get(port, f"/v2/models/{model}/stats").json()["model_stats"][0]
    i = s["inference_stats"]
    return {"hit": i["cache_hit"]["count"], "miss": i["cache_miss"]["count"],
            "success": i["success"]["count"], "inferences": s["inference_count"],
            "executions": s["execution_count"], "hit_ns": i["cache_hit"]["ns"],
            "miss_ns": i["cache_miss"]["ns"]}


@pytest.fixture
def server(server_factory, repos, tmp_path):
    repo = cached_repo(repos, tmp_path / "repo")
    return server_factory([repo], ["--cache-config=local,size=1048576"], name="cache")


def test_hit_is_byte_identical_and_counted(server):
    """The second of two equal requests is a hit: the same bytes, the model ran once; the
    statistics count one hit and one miss (with their durations) and two successes, the
    inference and execution counts one (cached requests are not inferences)."""
    body = ident_body([1.5, -2, 3, 4])
    path = "/v2/models/identity_fp32/infer"
    first = request(server.port, "POST", path, body=body)
    second = request(server.port, "POST", path, body=body)
    assert first.status == second.status == 200
    assert first.body == second.body, (first.body, second.body)
    s = stats(server.port, "identity_fp32")
    assert (s["hit"], s["miss"], s["success"], s["inferences"], s["executions"]) == \
        (1, 1, 2, 1, 1), s
    assert s["hit_ns"] > 0 and s["miss_ns"] > 0, s
    other = request(server.port, "POST", path, body=ident_body([1.5, -2, 3, 5]))
    assert json.loads(other.body)["outputs"][0]["data"] == [1.5, -2, 3, 5]
    assert stats(server.port, "identity_fp32")["miss"] == 2


def test_outputs_asked_for_are_part_of_the_key(server):
    """A request for OUTPUT1 alone does not get the cached answer of one for OUTPUT0 alone;
    both are answered right, then both hit; gRPC hits the same entries as HTTP."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    c = httpclient.InferenceServerClient(server.url)
    g = grpcclient.InferenceServerClient(server.grpc_url)
    for rnd in range(2):
        for out, want in (("OUTPUT0", a + b), ("OUTPUT1", a - b)):
            for mod, client in ((httpclient, c), (grpcclient, g)):
                ins = [mod.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
                ins[0].set_data_from_numpy(a)
                ins[1].set_data_from_numpy(b)
                r = client.infer("simple", ins, outputs=[mod.InferRequestedOutput(out)])
                np.testing.assert_array_equal(r.as_numpy(out), want)
                assert r.as_numpy("OUTPUT1" if out == "OUTPUT0" else "OUTPUT0") is None
    s = stats(server.port, "simple")
    # 2 entries (one per output asked for) are made on round 0 by HTTP; everything else hits
    assert (s["miss"], s["hit"], s["executions"]) == (2, 6, 2), s


def test_concurrent_identical_and_different_requests(server):
    """16 threads, each sending 30 requests drawn from 5 distinct inputs, each checking its
    own answer: every answer is right, and most are hits (at most a few misses per input
    while the first answers are being computed)."""
    def worker(k):
        c = httpclient.InferenceServerClient(server.url)
        for j in range(30):
            v = np.full((1, 4), float((k + j) % 5), dtype=np.float32)
            inp = httpclient.InferInput("INPUT0", [1, 4], "FP32")
            inp.set_data_from_numpy(v)
            np.testing.assert_array_equal(c.infer("identity_fp32", [inp]).as_numpy("OUTPUT0"), v)
    with ThreadPoolExecutor(16) as ex:
        for f in [ex.submit(worker, k) for k in range(16)]:
            f.result()
    s = stats(server.port, "identity_fp32")
    assert s["hit"] + s["miss"] == 480 and s["success"] == 480, s
    assert s["hit"] >= 400 and s["executions"] == s["miss"], s  # every miss ran once


def test_least_recently_used_entries_make_room(server_factory, repos, tmp_path):
    """Entries count their key (the input bytes), their outputs and their bookkeeping: about
    770 bytes for 64 floats in and out. With room for one, A A B A hits once (B pushed A out);
    with room for many, twice. An answer larger than the whole cache is never kept."""
    repo = cached_repo(repos, tmp_path / "repo", names=("identity_fp32",))
    path = "/v2/models/identity_fp32/infer"
    A, B = ident_body([1.0] * 64), ident_body([2.0] * 64)
    for size, hits in ((1200, 1), (1 << 20, 2), (400, 0)):
        srv = server_factory([repo], [f"--cache-config=local,size={size}"], name=f"lru{size}")
        for body in (A, A, B, A):
            assert request(srv.port, "POST", path, body=body).status == 200
        s = stats(srv.port, "identity_fp32")
        assert (s["hit"], s["miss"]) == (hits, 4 - hits), (size, s)
        assert srv.stop() == 0


def test_reload_drops_the_entries(server_factory, repos, tmp_path):
    """A reloaded model starts with no entries (its answers may differ now)."""
    repo = cached_repo(repos, tmp_path / "repo", names=("identity_fp32",))
    srv = server_factory([repo], ["--cache-config=local,size=1048576",
                                  "--model-control-mode=explicit", "--load-model=*"],
                         name="reload")
    path = "/v2/models/identity_fp32/infer"
    body = ident_body([7.0, 8.0])
    for _ in range(2):
        assert request(srv.port, "POST", path, body=body).status == 200
    assert stats(srv.port, "identity_fp32")["hit"] == 1
    cfg = (repo / "identity_fp32" / "config.pbtxt")
    cfg.write_text(cfg.read_text() +  # a changed config: a new load
                   '\nparameters { key: "changed" value: { string_value: "1" } }\n')
    assert post(srv.port, "/v2/repository/models/identity_fp32/load").status == 200
    assert request(srv.port, "POST", path, body=body).status == 200
    s = stats(srv.port, "identity_fp32")
    assert (s["hit"], s["miss"]) == (0, 1), s


def test_metrics(server):
    """nv_cache_*_per_model for the models whose cache is on, Triton's names."""
    path = "/v2/models/identity_fp32/infer"
    for _ in range(3):
        request(server.port, "POST", path, body=ident_body([9.0]))
    text = get(server.metrics_port, "/metrics").body.decode()
    assert 'nv_cache_num_hits_per_model{model="identity_fp32",version="1"} 2' in text, text
    assert 'nv_cache_num_misses_per_model{model="identity_fp32",version="1"} 1' in text
    assert "# TYPE nv_cache_hit_duration_per_model counter" in text
    assert "# TYPE nv_cache_miss_duration_per_model counter" in text


def test_without_cache_nothing_is_cached(server_factory, repos, tmp_path):
    """A model without response_cache runs every request (no cache statistics, no cache
    metrics); response_cache without --cache-config says so in one warning line."""
    repo = cached_repo(repos, tmp_path / "repo", names=("identity_fp32",), cache=False)
    shutil.copytree(Path(repos["repo_small"]) / "simple", repo / "simple")
    cfg = repo / "simple" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + CACHE)
    srv = server_factory([repo], [], name="nocache")
    for _ in range(2):
        request(srv.port, "POST", "/v2/models/identity_fp32/infer", body=ident_body([1.0]))
    s = stats(srv.port, "identity_fp32")
    assert (s["hit"], s["miss"], s["executions"]) == (0, 0, 2), s
    assert "nv_cache_num_hits_per_model" not in get(srv.metrics_port, "/metrics").body.decode()
    assert "model 'simple': response_cache { enable: true } has no effect: no cache is " \
           "configured" in srv.log


@pytest.mark.parametrize("value", ["redis,host=x", "local", "local,size=abc", "local,bogus=1"])
def test_bad_cache_config(repos, value):
    from conftest import run_cli
    p = run_cli([f"--model-repository={repos['repo_small']}", f"--cache-config={value}"])
    assert p.returncode != 0 and b'Bad option: "--cache-config".' in p.stderr, p.stderr[-400:]


def test_ensemble_answers_are_cached(server_factory, tmp_path):
    """An ensemble with response_cache { enable: true } (Triton's ensemble caching): the second
    equal request is answered from the cache, byte for byte, without running any step (its
    composing model's execution count stays); the ensemble's statistics count the hit and the
    miss; a different request still runs the steps."""
    import models
    repo = tmp_path / "repo"
    models.write_simple_two_versions(repo)
    cfg = models.ensemble_add_sub_config() + CACHE
    models.write_ensemble(repo, "ensemble_add_sub", cfg)
    srv = server_factory([repo], ["--cache-config=local,size=1048576"], name="enscache")
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    b = np.full((1, 16), 3, dtype=np.int32)
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": a.flatten().tolist()},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": b.flatten().tolist()}]})
    path = "/v2/models/ensemble_add_sub/infer"

    def simple_executions():
        s = get(srv.port, "/v2/models/simple/stats").json()["model_stats"]
        return sum(m["execution_count"] for m in s)

    first = request(srv.port, "POST", path, body=body)
    assert first.status == 200, first.body
    out = {o["name"]: o["data"] for o in json.loads(first.body)["outputs"]}
    assert out["OUTPUT0"] == (a + b).flatten().tolist() and \
        out["OUTPUT1"] == (a - b).flatten().tolist()
    ran = simple_executions()
    assert ran == 6, ran
    second = request(srv.port, "POST", path, body=body)
    assert second.status == 200 and second.body == first.body
    assert simple_executions() == ran  # no step ran
    s = stats(srv.port, "ensemble_add_sub")
    assert (s["hit"], s["miss"], s["success"]) == (1, 1, 2), s
    third = request(srv.port, "POST", path, body=body.replace('"data": [3,', '"data": [4,'))
    assert third.status == 200 and third.body != first.body
    assert simple_executions() == ran + 6
    assert "has no effect" not in srv.log
