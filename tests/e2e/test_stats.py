"""Statistics extension: GET /v2/models[/<m>[/versions/<v>]]/stats. Counts after known requests,
inference_count vs execution_count, queue/compute counts with non-zero ns, batch_stats, error texts.
The module gets its own fresh main server (module-scoped fixture), so counts start at zero."""

import concurrent.futures
import json
import time

import numpy as np

from e2e_util import assert_error, assert_matches_recorded, get, infer_json, recorded, replay
from models import DTYPE_MODELS

DURATIONS = ["success", "fail", "queue", "compute_input", "compute_infer", "compute_output",
             "cache_hit", "cache_miss"]
STAT_KEYS = ["name", "version", "last_inference", "inference_count", "execution_count",
             "inference_stats", "response_stats", "batch_stats", "memory_usage"]

READY = sorted([("add_fp16", "1"), ("dyn_batch", "1"), ("identity_bytes", "1"),
                ("identity_fp32", "1"), ("order_test", "1"), ("simple", "1"),
                ("simple_noconfig", "1"), ("two_versions", "1"), ("two_versions", "2")]
               + [(m, "1") for m in DTYPE_MODELS if m != "identity_fp32"])


def stats(port, model=None, version=None):
    path = "/v2/models" + (f"/{model}" if model else "") + \
        (f"/versions/{version}" if version else "") + "/stats"
    r = get(port, path)
    assert r.status == 200 and r.header("Content-Type") == "application/json", r
    return r.json()["model_stats"]


def one(port, model, version=None):
    s = stats(port, model, version)
    assert len(s) == 1, s
    return s[0]


def simple_req(batch, seed=0):
    rng = np.random.default_rng(seed)
    return {"inputs": [{"name": n, "shape": [batch, 16], "datatype": "INT32",
                        "data": rng.integers(-100, 100, batch * 16).tolist()}
                       for n in ("INPUT0", "INPUT1")]}


def fp32_req(batch, n=3):
    return {"inputs": [{"name": "INPUT0", "shape": [batch, n], "datatype": "FP32",
                        "data": [1.0] * (batch * n)}]}


def check_shape(entry):
    assert list(entry) == STAT_KEYS, list(entry)
    assert isinstance(entry["version"], str)
    assert list(entry["inference_stats"]) == DURATIONS
    for d in entry["inference_stats"].values():
        assert list(d) == ["count", "ns"] and all(type(v) is int and v >= 0 for v in d.values())
    for b in entry["batch_stats"]:
        assert list(b) == ["batch_size", "compute_input", "compute_infer", "compute_output"]
    assert entry["response_stats"] == {} and entry["memory_usage"] == []


# the first test runs against the fresh server
def test_zero_state_exact_text(main_server):
    assert_matches_recorded(get(main_server.port, "/v2/models/simple/stats"),
                            "simple stats before inferences")
    assert_matches_recorded(get(main_server.port, "/v2/models/two_versions/stats"),
                            "stats for two_versions (both versions)")


def test_all_models_form(main_server):
    all_stats = stats(main_server.port)
    assert [(s["name"], s["version"]) for s in all_stats] == READY  # no 'broken', sorted
    for s in all_stats:
        check_shape(s)
    # every per-model answer is the matching slice of the all-models answer
    r = get(main_server.port, "/v2/models/add_fp16/stats")
    assert r.json()["model_stats"] == [s for s in all_stats if s["name"] == "add_fp16"]


def test_counts_after_known_requests(main_server):
    p = main_server.port
    before = one(p, "simple")
    assert before["inference_count"] == 0 and before["execution_count"] == 0
    t0 = int(time.time() * 1000)
    batches = [1, 1, 2, 8, 3]
    for i, b in enumerate(batches):
        assert infer_json(p, "simple", simple_req(b, i)).status == 200
    s = one(p, "simple")
    check_shape(s)
    st = s["inference_stats"]
    assert s["inference_count"] == sum(batches) == 15
    assert s["execution_count"] == len(batches)
    assert st["success"]["count"] == len(batches)
    assert st["fail"] == {"count": 0, "ns": 0}
    assert st["queue"]["count"] == len(batches)
    for k in ("compute_input", "compute_infer", "compute_output"):
        assert st[k]["count"] == len(batches), k
    for k in ("success", "queue", "compute_input", "compute_infer", "compute_output"):
        assert st[k]["ns"] > 0, k
    assert st["success"]["ns"] >= st["compute_infer"]["ns"]
    assert st["cache_hit"] == {"count": 0, "ns": 0} and st["cache_miss"] == {"count": 0, "ns": 0}
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in s["batch_stats"]] == \
        [(1, 2), (2, 1), (3, 1), (8, 1)]
    for b in s["batch_stats"]:
        for k in ("compute_input", "compute_infer", "compute_output"):
            assert b[k]["count"] == b["compute_infer"]["count"] and b[k]["ns"] > 0
    assert sum(b["compute_infer"]["ns"] for b in s["batch_stats"]) == st["compute_infer"]["ns"]
    # last_inference is a wall-clock timestamp in ms (not a duration)
    assert t0 - 5000 <= s["last_inference"] <= int(time.time() * 1000) + 5000
    # the versioned form answers the same
    assert one(p, "simple", "1") == s


def test_validation_failures_are_not_counted(main_server):
    p = main_server.port
    before = one(p, "identity_fp32")
    bad = [
        {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "INT32", "data": [1, 2, 3]}]},
        {"inputs": [{"name": "INPUT0", "shape": [9, 1], "datatype": "FP32", "data": [0] * 9}]},
        {"inputs": [{"name": "INPUT9", "shape": [1, 1], "datatype": "FP32", "data": [0]}]},
        {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [0]}]},
    ]
    for req in bad:
        assert infer_json(p, "identity_fp32", req).status == 400
    after = one(p, "identity_fp32")
    assert after == before
    assert infer_json(p, "identity_fp32", fp32_req(2)).status == 200
    after = one(p, "identity_fp32")
    assert after["inference_stats"]["success"]["count"] == \
        before["inference_stats"]["success"]["count"] + 1
    assert after["inference_count"] == before["inference_count"] + 2
    assert after["inference_stats"]["fail"]["count"] == 0


def test_versions_counted_separately(main_server):
    p = main_server.port
    for v in (None, 1, 1, 2):
        assert infer_json(p, "two_versions", fp32_req(1), version=v).status == 200
    s = stats(p, "two_versions")
    assert [(x["name"], x["version"]) for x in s] == [("two_versions", "1"),
                                                      ("two_versions", "2")]
    assert [x["inference_stats"]["success"]["count"] for x in s] == [2, 2]
    v1 = one(p, "two_versions", "1")
    assert v1 == s[0]


def test_dyn_batch_sequential(main_server):
    p = main_server.port
    before = one(p, "dyn_batch")
    for b in (1, 2, 4):
        assert infer_json(p, "dyn_batch", fp32_req(b)).status == 200
    s = one(p, "dyn_batch")
    assert s["inference_count"] - before["inference_count"] == 7
    assert s["execution_count"] - before["execution_count"] == 3
    assert s["inference_stats"]["success"]["count"] - \
        before["inference_stats"]["success"]["count"] == 3


def test_dyn_batch_concurrent_invariants(main_server):
    """Whatever batches the dynamic batcher forms: sum of batch sizes over executions equals
    inference_count, and every request is one success and one queue entry."""
    p = main_server.port
    before = one(p, "dyn_batch")
    n = 32
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(lambda _: infer_json(p, "dyn_batch", fp32_req(1)).status, range(n)))
    assert codes == [200] * n
    s = one(p, "dyn_batch")
    st, bst = s["inference_stats"], before["inference_stats"]
    assert s["inference_count"] - before["inference_count"] == n
    assert st["success"]["count"] - bst["success"]["count"] == n
    assert st["queue"]["count"] - bst["queue"]["count"] == n
    execs = s["execution_count"] - before["execution_count"]
    assert 1 <= execs <= n
    by_size = lambda e: {b["batch_size"]: b["compute_infer"]["count"] for b in e["batch_stats"]}
    a, b0 = by_size(s), by_size(before)
    delta = {k: a[k] - b0.get(k, 0) for k in a if a[k] != b0.get(k, 0)}
    assert sum(k * v for k, v in delta.items()) == n
    assert sum(delta.values()) == execs
    assert max(delta) <= 8


def test_stats_errors(main_server):
    p = main_server.port
    for what in ("stats for unknown model", "stats for unknown version of simple",
                 "stats for broken model"):
        assert_matches_recorded(replay(p, what), what)
    assert_error(get(p, "/v2/models/nosuchmodel/stats"), 400,
                 "requested model 'nosuchmodel' is not available")
    assert_error(get(p, "/v2/models/simple/versions/7/stats"), 400,
                 "requested model version is not available for model 'simple'")
    assert_error(get(p, "/v2/models/broken/stats"), 400,
                 "requested model 'broken' is not available")


def test_stats_answer_is_compact_json(main_server):
    r = get(main_server.port, "/v2/models/stats")
    assert b" " not in r.body and b"\n" not in r.body
    assert r.header("Content-Length") == str(len(r.body))
    json.loads(r.body)


def test_recorded_shape_matches(main_server):
    """Keys and nesting equal the recorded Triton answer after 3 inferences."""
    rec = json.loads(recorded("simple stats after 3 inferences")["body"])["model_stats"][0]
    assert infer_json(main_server.port, "simple", simple_req(1)).status == 200
    got = one(main_server.port, "simple")

    def skeleton(v):
        if isinstance(v, dict):
            return {k: skeleton(x) for k, x in v.items()}
        if isinstance(v, list):
            return [skeleton(v[0])] if v else []
        return type(v).__name__
    assert skeleton(got) == skeleton(rec)
