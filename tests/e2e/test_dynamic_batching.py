"""The dynamic batcher and model instances over HTTP (model_config.md section 4, section 5).

The model is models.graph_batch_sum: each response carries BATCH_SUM, the sum of the whole batch it
executed in. Request i sends the value 2**i, so BATCH_SUM tells exactly which requests ran together.
Queue contents are made known without timing: a long max_queue_delay_microseconds keeps a partial
batch waiting, and a batch forms only when the test completes it. Nothing asserts on time; a sleep
only makes it likely that earlier requests have arrived, which the assertions never depend on.
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import models
from e2e_util import assert_error, get, infer_json

LONG = 60000000  # max_queue_delay_microseconds that no test waits for
CPU1 = "instance_group [ { count: 1 kind: KIND_CPU } ]\n"


def infer(port, model, value, rid, *, rows=1, width=1, priority=None, timeout=None):
    """One request of `rows` x `width` values all equal to `value`."""
    payload = {"id": rid, "inputs": [{"name": "INPUT0", "datatype": "FP32",
                                      "shape": [rows, width], "data": [value] * (rows * width)}]}
    params = {}
    if priority is not None:
        params["priority"] = priority
    if timeout is not None:
        params["timeout"] = timeout
    if params:
        payload["parameters"] = params
    return infer_json(port, model, payload)


def outputs(resp):
    assert resp.status == 200, resp
    return {o["name"]: o["data"] for o in resp.json()["outputs"]}


def stats(port, model):
    return get(port, f"/v2/models/{model}/stats").json()["model_stats"][0]


def batch_counts(st):
    return {b["batch_size"]: b["compute_infer"]["count"] for b in st["batch_stats"]}


def start(server_factory, tmp_path, models_extra):
    repo = tmp_path / "repo"
    for name, extra in models_extra.items():
        models.write_batch_sum(repo, name, extra)
    return server_factory([repo])


def test_eight_concurrent_requests_run_as_one_batch_of_8(server_factory, tmp_path):
    srv = start(server_factory, tmp_path, {
        "db": f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} }}\n" + CPU1})
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(infer, srv.port, "db", float(2 ** i), f"r{i}") for i in range(8)]
        resps = [f.result() for f in futs]
    for i, r in enumerate(resps):
        out = outputs(r)
        assert r.json()["id"] == f"r{i}"
        assert out["OUTPUT0"] == [float(2 ** i)]        # its own data
        assert out["BATCH_SUM"] == [255.0]              # ran with all 8
    st = stats(srv.port, "db")
    assert st["execution_count"] == 1
    assert st["inference_count"] == 8
    assert st["inference_stats"]["success"]["count"] == 8
    assert st["inference_stats"]["queue"]["count"] == 8
    assert batch_counts(st) == {8: 1}


def test_requests_carrying_batches_are_gathered_and_scattered(server_factory, tmp_path):
    """Batches of 3, 2 and 3 rows (8 = max_batch_size: sent at once) run as one ORT call; each
    response holds exactly its own rows."""
    srv = start(server_factory, tmp_path, {
        "db": f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} }}\n" + CPU1})
    sizes = [3, 2, 3]
    with ThreadPoolExecutor(3) as ex:
        futs = [ex.submit(infer, srv.port, "db", float(2 ** i), f"r{i}", rows=n, width=2)
                for i, n in enumerate(sizes)]
        resps = [f.result() for f in futs]
    total = sum(2 ** i * n * 2 for i, n in enumerate(sizes))
    for i, r in enumerate(resps):
        out = outputs(r)
        assert out["OUTPUT0"] == [float(2 ** i)] * (sizes[i] * 2)
        assert out["BATCH_SUM"] == [float(total)] * sizes[i]
    st = stats(srv.port, "db")
    assert (st["execution_count"], st["inference_count"]) == (1, 8)
    assert batch_counts(st) == {8: 1}


def test_queue_full_answers_503_for_exactly_the_excess(server_factory, tmp_path):
    """Level 2 (the default) holds at most 4 requests; 6 arrive, 2 are refused at once. Then 4
    requests at level 1 (unbounded) complete a batch of 8, and all 8 queued ones succeed."""
    srv = start(server_factory, tmp_path, {"db": (
        f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} priority_levels: 2 "
        "default_priority_level: 2 default_queue_policy { max_queue_size: 4 } "
        "priority_queue_policy { key: 1 value { } } }\n" + CPU1)})
    with ThreadPoolExecutor(10) as ex:
        low = [ex.submit(infer, srv.port, "db", float(2 ** i), f"low{i}") for i in range(6)]
        refused, deadline = [], time.monotonic() + 60
        while len(refused) < 2 and time.monotonic() < deadline:  # the refusals come back first
            refused = [f for f in low if f.done()]
            time.sleep(0.01)
        assert len(refused) == 2, "two of six requests should be refused at once"
        high = [ex.submit(infer, srv.port, "db", float(2 ** (6 + i)), f"high{i}", priority=1)
                for i in range(4)]
        resps = [f.result() for f in low + high]
    rejected = [r for r in resps if r.status != 200]
    assert len(rejected) == 2
    for r in rejected:
        rid = next(f"low{i}" for i in range(6) if resps[i] is r)
        assert_error(r, 503, f"[request id: {rid}] Exceeds maximum queue size")
    accepted = [i for i in range(6) if resps[i].status == 200] + list(range(6, 10))
    mask = float(sum(2 ** i for i in accepted))
    for i in accepted:
        assert outputs(resps[i])["BATCH_SUM"] == [mask]
        assert outputs(resps[i])["OUTPUT0"] == [float(2 ** i)]
    st = stats(srv.port, "db")
    assert st["inference_stats"]["success"]["count"] == 8
    assert st["inference_stats"]["fail"]["count"] == 2
    assert st["execution_count"] == 1
    assert batch_counts(st) == {8: 1}


def test_higher_priority_is_batched_first(server_factory, tmp_path):
    """max_batch_size 4. Three priority-2 requests wait; a priority-1 request of batch 2 arrives.
    By priority it goes first with two of the others (2+1+1 = 4); in arrival order the three
    (3 + 2 > 4) would have gone without it."""
    srv = start(server_factory, tmp_path, {"db": (
        f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} priority_levels: 2 "
        "default_priority_level: 2 preferred_batch_size: [ 4 ] }\n" + CPU1)})
    with ThreadPoolExecutor(8) as ex:
        low = [ex.submit(infer, srv.port, "db", float(2 ** i), f"low{i}", priority=2)
               for i in range(3)]
        time.sleep(0.3)  # the lows are (very likely) queued first; the assertions hold anyway
        high = ex.submit(infer, srv.port, "db", 64.0, "high", rows=2, priority=1)
        h = outputs(high.result())
        # the one low left behind waits for 3 more
        more = [ex.submit(infer, srv.port, "db", float(2 ** (3 + i)), f"more{i}") for i in range(3)]
        lows = [outputs(f.result()) for f in low]
        [f.result() for f in more]
    with_high = [i for i in range(3) if int(h["BATCH_SUM"][0]) & (2 ** i)]
    assert len(with_high) == 2
    assert h["BATCH_SUM"][0] == 128.0 + sum(2 ** i for i in with_high)
    for i in with_high:
        assert lows[i]["BATCH_SUM"] == h["BATCH_SUM"][:1]
    st = stats(srv.port, "db")
    assert batch_counts(st) == {4: 2}


def test_queue_timeout_rejects_with_503(server_factory, tmp_path):
    srv = start(server_factory, tmp_path, {"db": (
        f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} default_queue_policy {{ "
        "timeout_action: REJECT default_timeout_microseconds: 50000 } }\n" + CPU1)})
    r = infer(srv.port, "db", 1.0, "t0")
    assert_error(r, 503, "Request timeout expired")
    st = stats(srv.port, "db")
    assert st["inference_stats"]["fail"]["count"] == 1
    assert st["inference_stats"]["success"]["count"] == 0
    assert st["execution_count"] == 0


def test_request_timeout_parameter_and_allow_timeout_override(server_factory, tmp_path):
    """`timeout` (us) shortens the queue's default timeout only with allow_timeout_override."""
    policy = "default_timeout_microseconds: {} allow_timeout_override: {}"
    srv = start(server_factory, tmp_path, {
        "on": (f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} default_queue_policy "
               f"{{ {policy.format(LONG * 2, 'true')} }} }}\n" + CPU1),
        "off": ("dynamic_batching { max_queue_delay_microseconds: 500000 default_queue_policy "
                f"{{ {policy.format(LONG * 2, 'false')} }} }}\n" + CPU1)})
    assert_error(infer(srv.port, "on", 1.0, "a", timeout=1000), 503, "Request timeout expired")
    # ignored: it runs once the (short) queue delay has passed
    assert outputs(infer(srv.port, "off", 1.0, "b", timeout=1000))["OUTPUT0"] == [1.0]
    # a batch that fills before the timeout runs
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(infer, srv.port, "on", float(2 ** i), f"c{i}", timeout=LONG)
                for i in range(8)]
        assert all(outputs(f.result())["BATCH_SUM"] == [255.0] for f in futs)
    assert stats(srv.port, "on")["inference_stats"]["fail"]["count"] == 1
    assert stats(srv.port, "off")["inference_stats"]["fail"]["count"] == 0


def test_differing_shapes_are_not_batched_together(server_factory, tmp_path):
    srv = start(server_factory, tmp_path, {
        "db": "dynamic_batching { max_queue_delay_microseconds: 300000 }\n" + CPU1})
    widths = [2, 3, 2, 3, 2, 3]
    with ThreadPoolExecutor(6) as ex:
        futs = [ex.submit(infer, srv.port, "db", float(2 ** i), f"r{i}", width=w)
                for i, w in enumerate(widths)]
        resps = [outputs(f.result()) for f in futs]
    for i, out in enumerate(resps):
        assert out["OUTPUT0"] == [float(2 ** i)] * widths[i]
        mates = int(out["BATCH_SUM"][0]) // widths[i]
        assert mates & (2 ** i)
        assert all(widths[k] == widths[i] for k in range(6) if mates & (2 ** k))
    assert stats(srv.port, "db")["inference_count"] == 6


def test_instance_groups_counts_names_threads_and_passive(server_factory, tmp_path):
    srv = start(server_factory, tmp_path, {"db": (
        "dynamic_batching { }\n"
        "instance_group [ { name: \"ga\" count: 2 kind: KIND_CPU },"
        " { name: \"pg\" count: 1 kind: KIND_CPU passive: true },"
        " { count: 3 kind: KIND_CPU } ]\n")})
    cfg = get(srv.port, "/v2/models/db/config").json()
    groups = [(g["name"], g["count"], g["passive"]) for g in cfg["instance_group"]]
    assert groups == [("ga", 2, False), ("pg", 1, True), ("db_2", 3, False)]
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(infer, srv.port, "db", float(i), f"r{i}") for i in range(16)]
        assert [outputs(f.result())["OUTPUT0"] for f in futs] == [[float(i)] for i in range(16)]
    names = set()
    for tid in os.listdir(f"/proc/{srv.proc.pid}/task"):
        try:
            with open(f"/proc/{srv.proc.pid}/task/{tid}/comm") as f:
                names.add(f.read().strip())
        except OSError:
            pass
    assert {"ga_0", "ga_1", "db_2_0", "db_2_1", "db_2_2"} <= names, names
    assert "pg_0" not in names  # loaded, but never scheduled: no serving thread


@pytest.mark.parametrize("count", [1, 2])
def test_stats_batch_stats_add_up(server_factory, tmp_path, count):
    """Under load from 8 clients, the counters agree with each other whatever batches formed."""
    srv = start(server_factory, tmp_path, {"db": (
        f"dynamic_batching {{ }}\ninstance_group [ {{ count: {count} kind: KIND_CPU }} ]\n")})
    errors = []

    def client(c):
        for k in range(10):
            v = float(c * 100 + k)
            out = outputs(infer(srv.port, "db", v, f"c{c}-{k}", rows=1 + k % 2))
            if out["OUTPUT0"] != [v] * (1 + k % 2):
                errors.append((c, k, out))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    st = stats(srv.port, "db")
    assert st["inference_stats"]["success"]["count"] == 80
    assert st["inference_count"] == 120
    counts = batch_counts(st)
    assert sum(counts.values()) == st["execution_count"]
    assert st["execution_count"] <= 80
    assert all(1 <= b <= 8 for b in counts)
