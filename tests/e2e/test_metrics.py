"""Prometheus metrics (GET /metrics on --metrics-port): Triton 2.51's families, HELP/TYPE lines
and order (spec/triton-answers/metrics.txt, copied to data/triton_metrics.txt), counters that move
by exactly what a known sequence of requests produces (successes at batch 1 and > 1, a validation
failure that is not counted, a request-level backend failure, a full queue and a queue timeout)
and that equal the statistics API's counts, the pending count while requests wait, the optional
summaries, CPU metrics, the flags (--allow-metrics, --allow-cpu-metrics, --metrics-config,
--metrics-interval-ms) and the startup line. Every text is parsed with prometheus_client's parser.
"""

import math
import re
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

import models
from conftest import run_cli
from e2e_util import DATA_DIR, get, infer_json, post, recorded_request_body, replay, request

LONG = 60000000  # max_queue_delay_microseconds no test waits for
CPU1 = "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
REASONS = ["REJECTED", "CANCELED", "BACKEND", "OTHER"]
DURATIONS = {  # metric family -> statistics field
    "nv_inference_request_duration_us": "success",
    "nv_inference_queue_duration_us": "queue",
    "nv_inference_compute_input_duration_us": "compute_input",
    "nv_inference_compute_infer_duration_us": "compute_infer",
    "nv_inference_compute_output_duration_us": "compute_output",
}
SUMMARIES = ["nv_inference_request_summary_us", "nv_inference_queue_summary_us",
             "nv_inference_compute_input_summary_us", "nv_inference_compute_infer_summary_us",
             "nv_inference_compute_output_summary_us"]


# ----------------------------------------------------------------------------- helpers

def recorded_bodies():
    """The recorded bodies of metrics.txt, in file order (A.1, A.2, B)."""
    text = (DATA_DIR / "triton_metrics.txt").read_text()
    return [part.split("#### ---- body ends ----")[0]
            for part in text.split("#### ---- body begins ----\n")[1:]]


def meta_lines(text):
    return [line for line in text.splitlines() if line.startswith("# ")]


def scrape(srv, path="/metrics"):
    r = get(srv.metrics_port, path)
    assert r.status == 200, r
    assert r.header("Content-Type") == "text/plain; charset=utf-8", r.headers
    assert r.header("Content-Length") == str(len(r.body))
    return r.text


def parse(text):
    """{family: {(sample name, sorted label items): value}} through prometheus_client's parser,
    which must accept the whole text."""
    out = {}
    for fam in text_string_to_metric_families(text):
        d = out.setdefault(fam.name, {"type": fam.type, "samples": {}})
        for s in fam.samples:
            d["samples"][(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(fams, family, model=None, version="1", sample=None, **labels):
    if model is not None:
        labels.update(model=model, version=version)
    items = tuple(sorted(labels.items()))
    samples = fams[family]["samples"]
    if sample is None and (family + "_total", items) in samples:
        sample = family + "_total"  # the parser's name for a counter's sample
    return samples[(sample or family, items)]


def stats(srv, model):
    r = get(srv.port, f"/v2/models/{model}/stats")
    assert r.status == 200, r
    return r.json()["model_stats"]


def assert_equals_statistics(srv, fams, model, version="1"):
    """Every per-model counter equals the statistics API's number for the same version."""
    st = next(s for s in stats(srv, model) if s["version"] == version)
    inf = st["inference_stats"]
    assert value(fams, "nv_inference_request_success", model, version) == inf["success"]["count"]
    assert sum(value(fams, "nv_inference_request_failure", model, version, reason=r)
               for r in REASONS) == inf["fail"]["count"]
    assert value(fams, "nv_inference_count", model, version) == st["inference_count"]
    assert value(fams, "nv_inference_exec_count", model, version) == st["execution_count"]
    for fam, field in DURATIONS.items():  # the statistics' ns sum, divided once
        assert value(fams, fam, model, version) == inf[field]["ns"] // 1000, fam
    return st


def assert_durations(fams, model, successes):
    """No success: every duration 0 (failures add none). Successes: request and compute_infer
    durations > 0 (the others may sum to less than 1 us)."""
    for fam in DURATIONS:
        v = value(fams, fam, model)
        if successes == 0:
            assert v == 0, (fam, model)
        elif fam in ("nv_inference_request_duration_us", "nv_inference_compute_infer_duration_us"):
            assert v > 0, (fam, model)


def simple_inputs(batch, seed=0):
    rng = np.random.default_rng(seed)
    ins = []
    for name in ("INPUT0", "INPUT1"):
        i = httpclient.InferInput(name, [batch, 16], "INT32")
        i.set_data_from_numpy(rng.integers(-100, 100, (batch, 16)).astype(np.int32))
        ins.append(i)
    return ins


def batch_sum_infer(port, model, value_, rid, rows=1, priority=None):
    payload = {"id": rid, "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [rows, 1],
                                      "data": [value_] * rows}]}
    if priority is not None:
        payload["parameters"] = {"priority": priority}
    return infer_json(port, model, payload)


def wait_for(pred, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def counting_repo(tmp_path):
    """simple, identity_bytes, a batch_sum model whose default level holds 2 requests (level 1
    unbounded) and one whose queued requests time out after 100 ms (REJECT)."""
    repo = tmp_path / "repo_counting"
    models.write_model(repo, "simple")
    models.write_model(repo, "identity_bytes")
    models.write_batch_sum(repo, "qfull", (
        f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} priority_levels: 2 "
        "default_priority_level: 2 default_queue_policy { max_queue_size: 2 } "
        "priority_queue_policy { key: 1 value { } } }\n" + CPU1), max_batch_size=4)
    models.write_batch_sum(repo, "qtimeout", (
        f"dynamic_batching {{ max_queue_delay_microseconds: {LONG} default_queue_policy {{ "
        "timeout_action: REJECT default_timeout_microseconds: 100000 } }\n" + CPU1))
    return repo


# ----------------------------------------------------------------------------- the text

def test_fresh_server_matches_recorded_families(small_server):
    """Before any request: the HELP/TYPE lines, in order, are the recording's (A.1), every
    counter is 0, and each READY version has its series (failures: four reasons each)."""
    text = scrape(small_server)
    assert meta_lines(text) == meta_lines(recorded_bodies()[0])
    fams = parse(text)
    names = ["identity_bytes", "identity_fp32", "order_test", "simple"]
    for fam in ["nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                "nv_inference_pending_request_count", *DURATIONS]:
        assert sorted(dict(k[1])["model"] for k in fams[fam]["samples"]) == names, fam
        assert set(fams[fam]["samples"].values()) == {0.0}, fam
    failures = fams["nv_inference_request_failure"]["samples"]
    assert sorted((dict(k[1])["model"], dict(k[1])["reason"]) for k in failures) == \
        sorted((m, r) for m in names for r in REASONS)
    assert set(failures.values()) == {0.0}
    assert value(fams, "nv_pinned_memory_pool_total_bytes") == 268435456
    assert value(fams, "nv_pinned_memory_pool_used_bytes") == 0
    assert 0 < value(fams, "nv_cpu_memory_used_bytes") <= value(fams, "nv_cpu_memory_total_bytes")
    # label order and line shape as Triton prints them
    assert 'nv_inference_request_failure{model="simple",reason="BACKEND",version="1"} 0\n' in text
    assert "nv_pinned_memory_pool_total_bytes 268435456\n" in text


def test_recorded_sequence_counts_as_triton(server_factory, repos):
    """metrics.txt section A on a fresh server: the recorded requests (3 + 1 successes, two
    validation failures that are not counted, one BACKEND failure) give the recorded counters."""
    srv = server_factory([repos["repo_small"]])
    whats = ["metrics run: simple OK inference 1", "metrics run: simple OK inference 2",
             "metrics run: simple OK inference 3",
             "metrics run: identity_fp32 OK inference (batch 2)",
             "metrics run: validation failure (wrong shape on simple) - NOT counted as a failure",
             "metrics run: BYTES element-count failure (3 elements for shape [1,2]) - NOT counted",
             "metrics run: the one COUNTED failure (identity_bytes: BYTES length prefix 100 but 3 "
             "bytes; detected in the backend -> reason BACKEND)"]
    assert [replay(srv.port, w).status for w in whats] == [200, 200, 200, 200, 400, 400, 400]
    text = scrape(srv)
    fams = parse(text)
    recorded = parse(recorded_bodies()[1])
    for model in ("identity_bytes", "identity_fp32", "simple"):
        for fam in ("nv_inference_request_success", "nv_inference_count",
                    "nv_inference_exec_count", "nv_inference_pending_request_count"):
            assert value(fams, fam, model) == value(recorded, fam, model), (fam, model)
        for r in REASONS:
            assert value(fams, "nv_inference_request_failure", model, reason=r) == \
                value(recorded, "nv_inference_request_failure", model, reason=r), (model, r)
        assert_durations(fams, model, value(fams, "nv_inference_request_success", model))
        assert_equals_statistics(srv, fams, model)
    st = stats(srv, "identity_bytes")[0]  # an execution without an inference, as recorded
    assert (st["execution_count"], st["inference_count"]) == (1, 0)
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in st["batch_stats"]] == [(1, 1)]


def test_known_sequence_moves_counters_exactly(server_factory, counting_repo):
    """Successes at batch 1 and 3, a validation failure (not counted), a backend failure
    (BACKEND), a full queue (REJECTED, with the pending count at 2 while two requests wait) and
    a queue timeout (REJECTED): every counter moves by exactly that, equal to the statistics."""
    srv = server_factory([counting_repo])
    client = httpclient.InferenceServerClient(srv.url)
    try:
        before = parse(scrape(srv))
        for i, batch in enumerate([1, 1, 3]):
            client.infer("simple", simple_inputs(batch, i))
        with pytest.raises(InferenceServerException, match="unexpected shape"):
            bad = httpclient.InferInput("INPUT0", [1, 15], "INT32")
            bad.set_data_from_numpy(np.zeros((1, 15), np.int32))
            client.infer("simple", [bad, simple_inputs(1)[1]])
        # a BYTES element whose length prefix (100) runs past the data: the backend fails it
        r = replay(srv.port, "identity_bytes binary BYTES element length prefix exceeds data")
        assert r.status == 400 and b"incomplete string data" in r.body
    finally:
        client.close()
    # full queue: the default level holds 2; of three requests one is refused at once
    with ThreadPoolExecutor(4) as ex:
        low = [ex.submit(batch_sum_infer, srv.port, "qfull", float(2 ** i), f"low{i}")
               for i in range(3)]
        assert wait_for(lambda: sum(f.done() for f in low) == 1)
        fams = parse(scrape(srv))
        assert value(fams, "nv_inference_pending_request_count", "qfull") == 2
        assert value(fams, "nv_inference_request_failure", "qfull", reason="REJECTED") == 1
        assert value(fams, "nv_inference_request_success", "qfull") == 0
        # a priority-1 request of 2 rows completes the batch of 4 (max_batch_size)
        high = ex.submit(batch_sum_infer, srv.port, "qfull", 8.0, "high", rows=2, priority=1)
        codes = sorted(f.result().status for f in low + [high])
    assert codes == [200, 200, 200, 503]
    # queue timeout under REJECT
    r = batch_sum_infer(srv.port, "qtimeout", 1.0, "t")
    assert r.status == 503 and b"Request timeout expired" in r.body, r
    fams = parse(scrape(srv))

    def delta(fam, model, **labels):
        old = value(before, fam, model, **labels)
        return value(fams, fam, model, **labels) - old

    expect = {  # model: (success, inferences, executions, failures by reason)
        "simple": (3, 5, 3, {}),
        "identity_bytes": (0, 0, 1, {"BACKEND": 1}),
        "qfull": (3, 4, 1, {"REJECTED": 1}),
        "qtimeout": (0, 0, 0, {"REJECTED": 1}),
    }
    for model, (ok, inferences, execs, fails) in expect.items():
        assert delta("nv_inference_request_success", model) == ok, model
        assert delta("nv_inference_count", model) == inferences, model
        assert delta("nv_inference_exec_count", model) == execs, model
        for reason in REASONS:
            assert delta("nv_inference_request_failure", model, reason=reason) == \
                fails.get(reason, 0), (model, reason)
        assert value(fams, "nv_inference_pending_request_count", model) == 0
        st = assert_equals_statistics(srv, fams, model)
        assert st["inference_stats"]["fail"]["count"] == sum(fails.values())
        assert_durations(fams, model, ok)


def test_broken_model_only_in_failure_family(main_server):
    """A version that failed to load keeps its four failure series (all 0) and nothing else, as
    in the recording (section B); every family's HELP/TYPE is the recording's."""
    text = scrape(main_server)
    assert meta_lines(text) == meta_lines(recorded_bodies()[2])
    broken = [line for line in text.splitlines() if 'model="broken"' in line]
    assert broken == [f'nv_inference_request_failure{{model="broken",reason="{r}",version="1"}} 0'
                      for r in REASONS]
    fams = parse(text)
    versions = {(dict(k[1])["model"], dict(k[1])["version"])
                for k in fams["nv_inference_request_success"]["samples"]}
    assert ("two_versions", "1") in versions and ("two_versions", "2") in versions
    for model, version in versions:
        assert_equals_statistics(main_server, fams, model, version)


# ----------------------------------------------------------------------------- the endpoint

def test_paths_and_methods(small_server):
    port = small_server.metrics_port
    assert scrape(small_server, "/metrics/").startswith("# HELP nv_inference_request_success ")
    assert scrape(small_server, "/metrics?name=x").startswith("# HELP ")
    for path in ("/", "/metricsx", "/v2/health/ready", "/METRICS"):
        r = get(port, path)  # Triton: 200, empty; nereid: 404 (a deliberate departure)
        assert r.status == 404 and r.body == b'{"error":"Not Found"}', (path, r)
        assert r.header("Content-Type") == "application/json"
    for method in ("POST", "PUT", "DELETE"):
        r = request(port, method, "/metrics", body=b"")
        assert r.status == 405 and r.body == b'{"error":"Method Not Allowed"}', (method, r)
    assert post(port, "/metrics", b"x" * 100000).status == 405
    # the HTTP port does not serve metrics
    assert get(small_server.port, "/metrics").status == 404


def test_startup_lines(small_server):
    # ready once HTTP answers: the metrics service's line may come a moment later
    wait_for(lambda: "Started Metrics Service" in small_server.log)
    log = small_server.log
    http = re.search(rf"\] Started HTTPService at 127\.0\.0\.1:{small_server.port}\n", log)
    met = re.search(rf"\] Started Metrics Service at 127\.0\.0\.1:{small_server.metrics_port}\n",
                    log)
    assert http and met and http.start() < met.start(), small_server.log_tail()
    cpu = re.search(r"\] Collecting CPU metrics\n", log)
    assert cpu and cpu.start() < met.start()


def test_metrics_address_flag(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], ["--metrics-address=127.0.0.1"])
    # the server is ready once HTTP answers; the metrics line may still be on its way
    assert wait_for(lambda: f"Started Metrics Service at 127.0.0.1:{srv.metrics_port}" in
                    srv.log), srv.log_tail()
    assert scrape(srv)


# ----------------------------------------------------------------------------- flags

def test_allow_metrics_false(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], ["--allow-metrics=false"])
    with pytest.raises(OSError):
        get(srv.metrics_port, "/metrics")
    assert "Metrics Service" not in srv.log and "Collecting CPU metrics" not in srv.log
    assert get(srv.port, "/v2/health/ready").status == 200


def test_allow_cpu_metrics_false(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], ["--allow-cpu-metrics=false",
                                                  "--allow-gpu-metrics=false"])
    text = scrape(srv)
    assert "nv_cpu_" not in text
    assert "nv_pinned_memory_pool_total_bytes 268435456\n" in text
    assert "Collecting CPU metrics" not in srv.log
    parse(text)


def test_cpu_metrics_are_polled(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], ["--metrics-interval-ms=50"])
    fams = parse(scrape(srv))
    total = value(fams, "nv_cpu_memory_total_bytes")
    assert 0 < value(fams, "nv_cpu_memory_used_bytes") <= total
    time.sleep(0.3)  # several polls: utilization is a fraction since the previous one
    util = value(parse(scrape(srv)), "nv_cpu_utilization")
    assert math.isnan(util) or 0 <= util <= 1


def test_counter_latencies_false(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], ["--metrics-config", "counter_latencies=false"])
    text = scrape(srv)
    assert "_duration_us" not in text and "nv_inference_request_success{" in text
    parse(text)


def test_summaries(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], ["--metrics-config=summary_latencies=true"])
    client = httpclient.InferenceServerClient(srv.url)
    try:
        for i in range(20):
            client.infer("simple", simple_inputs(1 + i % 3, i))
    finally:
        client.close()
    text = scrape(srv)
    fams = parse(text)
    # after every gauge, in Triton's order
    order = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert order[-5:] == SUMMARIES
    for name, counter in zip(SUMMARIES, DURATIONS):
        fam = fams[name]
        assert fam["type"] == "summary"
        assert value(fams, name, "simple", sample=name + "_count") == 20
        assert value(fams, name, "simple", sample=name + "_sum") == value(fams, counter, "simple")
        qs = [value(fams, name, "simple", quantile=q)
              for q in ("0.5", "0.9", "0.95", "0.99", "0.999")]
        assert all(not math.isnan(q) and q >= 0 for q in qs) and qs == sorted(qs), (name, qs)
        if name == "nv_inference_request_summary_us":
            assert qs[-1] > 0
        # a model without requests: counts 0, quantiles NaN (printed "Nan" as Triton)
        assert value(fams, name, "simple_noconfig", sample=name + "_count") == 0
        assert math.isnan(value(fams, name, "simple_noconfig", quantile="0.5"))
    assert ('nv_inference_request_summary_us{model="simple_noconfig",version="1",'
            'quantile="0.5"} Nan\n') in text
    assert ("# HELP nv_inference_compute_input_summary_us Cumulative compute input duration in "
            "microseconds (does not include cached requests)\n") in text


def test_summary_quantiles(server_factory, repos):
    srv = server_factory([repos["repo_strict"]], [
        "--metrics-config", "summary_latencies=true",
        "--metrics-config", "summary_quantiles=0.25:0.01,junk,0.75:x,0.75:0.01"])
    assert ("Invalid option: [junk]. No ':' delimiter found. Expected format is "
            "<quantile>:<error>") in srv.log
    assert "Invalid option: [0.75:x]. Error: stod" in srv.log
    fams = parse(scrape(srv))
    qs = sorted(dict(k[1])["quantile"] for k in fams["nv_inference_queue_summary_us"]["samples"]
                if dict(k[1]).get("model") == "simple" and "quantile" in dict(k[1]))
    assert qs == ["0.25", "0.75"]


@pytest.mark.parametrize("arg", ["summary_latencies", "=true", "summary_latencies=", "a,b=c"])
def test_bad_metrics_config(repos, arg):
    p = run_cli([f"--model-repository={repos['repo_small']}", "--metrics-config", arg])
    err = p.stderr.decode()
    assert p.returncode != 0
    assert (f'Bad option: "--metrics-config".\n--metrics-config option format is '
            f"<setting>=<value>. Got {arg}\n") in err, err[-600:]
    assert "Started" not in p.stdout.decode() + err


@pytest.mark.parametrize("flag,arg", [("--metrics-port", "abc"), ("--metrics-port", "70000"),
                                      ("--metrics-interval-ms", "x"),
                                      ("--allow-metrics", "maybe"),
                                      ("--allow-cpu-metrics", "2")])
def test_bad_metrics_values(repos, flag, arg):
    p = run_cli([f"--model-repository={repos['repo_small']}", f"{flag}={arg}"])
    err = p.stderr.decode()
    assert p.returncode != 0
    assert f'Bad option: "{flag}".' in err and arg in err, err[-600:]


def test_help_lists_metrics_flags():
    p = run_cli(["--help"])
    text = (p.stdout + p.stderr).decode()
    for flag in ("--allow-metrics", "--allow-cpu-metrics", "--allow-gpu-metrics",
                 "--metrics-port", "--metrics-address", "--metrics-interval-ms",
                 "--metrics-config"):
        line = next(line for line in text.splitlines() if flag in line)
        assert "not implemented" not in line, line
