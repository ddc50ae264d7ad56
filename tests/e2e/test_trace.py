"""Tracing in Triton's "triton" mode (issue #39): --trace-config (and the deprecated --trace-*
flags), the JSON trace file as Triton's documentation gives its schema (docs/user_guide/trace.md:
a record {id, model_name, model_version[, request_id][, parent_id]} per trace, then one
{id, timestamps: [{name, ns}]} per timestamp and, at level TENSORS, one {id, activity, tensor}
per tensor), sampling by rate and count, log-frequency's indexed files, and the trace extension's
settings over HTTP and gRPC, changed at run time as Triton changes them."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conftest import ROOT, run_cli
from e2e_util import get, post
import models

HTTP_ORDER = ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START",
              "COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END",
              "INFER_RESPONSE_COMPLETE", "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END"]
GRPC_ORDER = [n.replace("HTTP_RECV", "GRPC_WAITREAD").replace("HTTP_SEND", "GRPC_SEND")
              for n in HTTP_ORDER]
A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = np.full((1, 16), 3, dtype=np.int32)


def simple_inputs(mod):
    ins = [mod.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    ins[0].set_data_from_numpy(A)
    ins[1].set_data_from_numpy(B)
    return ins


def infer_http(url, model="simple", request_id=""):
    c = httpclient.InferenceServerClient(url)
    r = c.infer(model, simple_inputs(httpclient), request_id=request_id)
    assert (r.as_numpy("OUTPUT0") == A + B).all()


def infer_grpc(url, model="simple", request_id=""):
    c = grpcclient.InferenceServerClient(url)
    r = c.infer(model, simple_inputs(grpcclient), request_id=request_id)
    assert (r.as_numpy("OUTPUT0") == A + B).all()


def traces(records):
    """{id: {"model": record, "stamps": [(name, ns)], "tensors": [record]}} from a trace file's
    records, each checked against the schema."""
    out = {}
    for rec in records:
        t = out.setdefault(rec["id"], {"model": None, "stamps": [], "tensors": []})
        if "model_name" in rec:
            assert t["model"] is None, rec
            assert set(rec) <= {"id", "model_name", "model_version", "request_id", "parent_id"}
            assert isinstance(rec["model_version"], int), rec
            t["model"] = rec
        elif "timestamps" in rec:
            assert set(rec) == {"id", "timestamps"} and len(rec["timestamps"]) == 1, rec
            ts = rec["timestamps"][0]
            assert set(ts) == {"name", "ns"} and isinstance(ts["ns"], int) and ts["ns"] > 0
            t["stamps"].append((ts["name"], ts["ns"]))
        else:
            assert set(rec) == {"id", "activity", "tensor"}, rec
            assert set(rec["tensor"]) == {"name", "data", "shape", "dtype"}, rec
            t["tensors"].append(rec)
    for i, t in out.items():
        assert t["model"] is not None, (i, t)
    return out


def load(path):
    return traces(json.loads(Path(path).read_text()))


def check_stamps(t, order):
    """The timestamps of one trace: each of `order` once, in that order, never going back."""
    names = [n for n, _ in t["stamps"]]
    assert names == order, names
    ns = [v for _, v in t["stamps"]]
    assert ns == sorted(ns), t["stamps"]


def start(server_factory, repos, tmp_path, args, name="trace", repo="repo_small"):
    return server_factory([repos[repo]], args, name=name)


# ---------------------------------------------------------------------------- the file

def test_every_request_traced_over_both_protocols(server_factory, repos, tmp_path):
    """rate=1, level TIMESTAMPS: each request is a trace with its own id, its model and version,
    its request id when it has one, and Triton's twelve timestamps in order (HTTP_* over HTTP,
    GRPC_* over gRPC). With log-frequency 0 the file is written at exit, one JSON array."""
    f = tmp_path / "trace.json"
    srv = start(server_factory, repos, tmp_path,
                ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=1",
                 f"--trace-config=triton,file={f}"])
    infer_http(srv.url, request_id="h1")
    infer_http(srv.url)
    infer_grpc(srv.grpc_url, request_id="g1")
    assert not f.exists()  # log-frequency 0: Triton writes the file when it shuts down
    assert srv.stop() == 0
    t = load(f)
    assert len(t) == 3, t
    by_req = {v["model"].get("request_id"): v for v in t.values()}
    assert set(by_req) == {"h1", None, "g1"}, by_req
    for rid, v in by_req.items():
        assert v["model"]["model_name"] == "simple" and v["model"]["model_version"] == 1
        assert "parent_id" not in v["model"]
        check_stamps(v, GRPC_ORDER if rid == "g1" else HTTP_ORDER)
        assert v["tensors"] == []


def test_rate_and_count(server_factory, repos, tmp_path):
    """rate=3 samples every third request; count=2 stops after two traces, which are then
    written to <file>.0 as soon as both are in (Triton's indexed file), and the settings read
    count 0."""
    f = tmp_path / "t.json"
    srv = start(server_factory, repos, tmp_path,
                ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=3",
                 "--trace-config=count=2", f"--trace-config=triton,file={f}"])
    for i in range(12):
        infer_http(srv.url, request_id=str(i))
    index0 = Path(f"{f}.0")
    assert index0.exists()
    t = load(index0)
    assert sorted(v["model"]["request_id"] for v in t.values()) == ["2", "5"], t
    s = get(srv.port, "/v2/trace/setting").json()
    assert s["trace_count"] == "0" and s["trace_rate"] == "3", s
    assert srv.stop() == 0
    assert not f.exists() and not Path(f"{f}.1").exists()


def test_log_frequency_writes_indexed_files(server_factory, repos, tmp_path):
    """log-frequency=2: <file>.0 and <file>.1 hold two traces each as they are collected; the
    fifth goes to <file>.2 at exit (what remains, indexed too, as Triton saves it)."""
    f = tmp_path / "t.json"
    srv = start(server_factory, repos, tmp_path,
                [f"--trace-file={f}", "--trace-level=TIMESTAMPS", "--trace-rate=1",
                 "--trace-log-frequency=2"])
    for i in range(5):
        infer_http(srv.url, request_id=str(i))
    assert len(load(f"{f}.0")) == 2 and len(load(f"{f}.1")) == 2
    assert srv.stop() == 0
    assert [v["model"]["request_id"] for v in load(f"{f}.2").values()] == ["4"]
    assert not f.exists()
    for flag in ("trace-file", "trace-level", "trace-rate", "trace-log-frequency"):
        assert f"Warning: '--{flag}' has been deprecated" in srv.log, srv.log[-2000:]


def test_tensors_level(server_factory, repos, tmp_path):
    """Level TENSORS (with TIMESTAMPS): the request's inputs as TENSOR_QUEUE_INPUT and its
    outputs as TENSOR_BACKEND_OUTPUT, their elements comma separated, shape and datatype."""
    f = tmp_path / "t.json"
    srv = start(server_factory, repos, tmp_path,
                ["--trace-config=level=TIMESTAMPS", "--trace-config=level=TENSORS",
                 "--trace-config=rate=1", f"--trace-config=triton,file={f}"])
    infer_http(srv.url)
    assert get(srv.port, "/v2/trace/setting").json()["trace_level"] == ["TIMESTAMPS", "TENSORS"]
    assert srv.stop() == 0
    (t,) = load(f).values()
    check_stamps(t, HTTP_ORDER)
    got = {(r["activity"], r["tensor"]["name"]): r["tensor"] for r in t["tensors"]}
    csv = lambda a: ",".join(str(int(x)) for x in a.flatten())  # noqa: E731
    assert got == {
        ("TENSOR_QUEUE_INPUT", "INPUT0"): {"name": "INPUT0", "data": csv(A), "shape": "1,16",
                                           "dtype": "INT32"},
        ("TENSOR_QUEUE_INPUT", "INPUT1"): {"name": "INPUT1", "data": csv(B), "shape": "1,16",
                                           "dtype": "INT32"},
        ("TENSOR_BACKEND_OUTPUT", "OUTPUT0"): {"name": "OUTPUT0", "data": csv(A + B),
                                               "shape": "1,16", "dtype": "INT32"},
        ("TENSOR_BACKEND_OUTPUT", "OUTPUT1"): {"name": "OUTPUT1", "data": csv(A - B),
                                               "shape": "1,16", "dtype": "INT32"},
    }, got


def test_tensors_level_bytes(server_factory, repos, tmp_path):
    """BYTES elements are written as Triton writes them, each in quotes, comma separated (the
    record's JSON escapes the quotes, a comma, a NUL and non-ASCII text stay what they are)."""
    f = tmp_path / "t.json"
    srv = start(server_factory, repos, tmp_path,
                ["--trace-config=level=TENSORS", "--trace-config=rate=1",
                 f"--trace-config=triton,file={f}"])
    words = ["a,b", 'say "hi"', "nul\x00in", "中"]
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "BYTES",
                                   "data": words}]})
    r = post(srv.port, "/v2/models/identity_bytes/infer", body.encode())
    assert r.status == 200, r.body
    assert srv.stop() == 0
    (t,) = load(f).values()
    assert t["stamps"] == []  # TENSORS alone: no timestamps
    data = {r["activity"]: r["tensor"]["data"] for r in t["tensors"]}
    want = ",".join(f'"{w}"' for w in words)
    assert data == {"TENSOR_QUEUE_INPUT": want, "TENSOR_BACKEND_OUTPUT": want}, data


def test_ensemble_steps_are_child_traces(server_factory, repos, tmp_path):
    """An ensemble request is one trace (no COMPUTE_* stamps: its steps compute); each of its
    steps is a child trace of its own id whose parent_id is the ensemble's, written with it."""
    repo = tmp_path / "repo"
    models.write_simple_two_versions(repo)
    models.write_ensemble(repo, "ensemble_add_sub", models.ensemble_add_sub_config())
    f = tmp_path / "t.json"
    srv = server_factory([repo], ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=1",
                                  f"--trace-config=triton,file={f}"], name="ens")
    infer_http(srv.url, model="ensemble_add_sub", request_id="e")
    assert srv.stop() == 0
    t = load(f)
    roots = [v for v in t.values() if "parent_id" not in v["model"]]
    assert len(roots) == 1 and roots[0]["model"]["model_name"] == "ensemble_add_sub"
    root_id = roots[0]["model"]["id"]
    check_stamps(roots[0], [n for n in HTTP_ORDER if not n.startswith("COMPUTE")])
    kids = [v for v in t.values() if "parent_id" in v["model"]]
    assert len(kids) == 6, t
    for k in kids:
        assert k["model"]["parent_id"] == root_id and k["model"]["model_name"] == "simple"
        assert k["model"]["request_id"] == "e"
        names = [n for n, _ in k["stamps"]]
        assert names == HTTP_ORDER[2:10], names  # no frontend of their own
    assert sorted(k["model"]["model_version"] for k in kids) == [1, 1, 1, 2, 2, 2]


# ---------------------------------------------------------------------------- settings

def test_settings_changed_at_run_time(server_factory, repos, tmp_path):
    """Tracing off at start (a file given): turned on globally through HTTP, then a model's own
    rate through gRPC; a model setting cleared follows the global one again; the traces written
    follow each setting in turn."""
    f = tmp_path / "t.json"
    srv = start(server_factory, repos, tmp_path, [f"--trace-config=triton,file={f}"])
    s = get(srv.port, "/v2/trace/setting").json()
    assert s == {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
                 "log_frequency": "0", "trace_file": str(f), "trace_mode": "triton"}, s
    infer_http(srv.url, request_id="off")
    r = post(srv.port, "/v2/trace/setting", b'{"trace_level":["TIMESTAMPS"],"trace_rate":"1"}')
    assert r.status == 200 and r.json()["trace_level"] == ["TIMESTAMPS"], r.body
    infer_http(srv.url, request_id="on")
    g = grpcclient.InferenceServerClient(srv.grpc_url)
    ms = g.update_trace_settings(model_name="simple", settings={"trace_rate": "2"},
                                 as_json=True)["settings"]
    assert ms["trace_rate"]["value"] == ["2"] and ms["trace_level"]["value"] == ["TIMESTAMPS"]
    # the global setting is unchanged; identity_fp32 follows it
    assert get(srv.port, "/v2/trace/setting").json()["trace_rate"] == "1"
    assert get(srv.port, "/v2/models/identity_fp32/trace/setting").json()["trace_rate"] == "1"
    for i in range(4):
        infer_http(srv.url, request_id=f"m{i}")
    r = post(srv.port, "/v2/models/simple/trace/setting", b'{"trace_rate":null}')
    assert r.status == 200 and r.json()["trace_rate"] == "1", r.body
    infer_http(srv.url, request_id="back")
    # turned off again: nothing more
    r = post(srv.port, "/v2/trace/setting", b'{"trace_level":["OFF"]}')
    assert r.status == 200 and r.json()["trace_level"] == ["OFF"]
    infer_http(srv.url, request_id="off2")
    assert srv.stop() == 0
    ids = sorted(v["model"]["request_id"] for v in load(f).values())
    assert ids == ["back", "m1", "m3", "on"], ids


@pytest.mark.parametrize("body, status, text", [
    ('{"trace_file":"/tmp/t.json"}', 501,
     "trace file location can not be updated through network protocol"),
    ('{"trace_rate":"often"}', 400, "Unable to parse 'trace_rate', got: often"),
    ('{"trace_rate":"99999999999"}', 400,
     "Unable to parse 'trace_rate', value is out of range [ 0, 4294967295 ], got: 99999999999"),
    ('{"trace_count":"-5"}', 400, "Unable to parse 'trace_count'. Expecting value >= -1, got:-5"),
    ('{"log_frequency":"x"}', 400, "Unable to parse 'log_frequency', got: x"),
    ('{"trace_level":["OFF","TIMESTAMPS"]}', 400,
     "Expect only one trace level 'OFF' is specified"),
    ('{"trace_level":["TIMESTAMPS"],"trace_rate":"0"}', 400,
     "Attempting to set invalid trace setting :sample rate must be non-zero"),
    ("[1]", 400, "trace settings must be a JSON object"),
])
def test_http_updates_refused(server_factory, repos, tmp_path, body, status, text):
    """Triton's texts; a refused update changes nothing."""
    srv = start(server_factory, repos, tmp_path, [f"--trace-config=triton,file={tmp_path}/t"])
    before = get(srv.port, "/v2/trace/setting").json()
    r = post(srv.port, "/v2/trace/setting", body.encode())
    assert r.status == status and r.json() == {"error": text}, (r.status, r.body)
    assert get(srv.port, "/v2/trace/setting").json() == before


def test_level_without_a_file_is_refused(main_server):
    """No trace file was given: turning tracing on is refused as Triton refuses it; a model's
    settings of an unknown model are refused too."""
    r = post(main_server.port, "/v2/models/simple/trace/setting",
             b'{"trace_level":["TIMESTAMPS"]}')
    assert r.status == 400 and r.json() == {
        "error": "Attempting to set invalid trace setting :trace file name is not given"}, r.body
    r = post(main_server.port, "/v2/models/simple/trace/setting", b'{"trace_rate":"10"}')
    assert r.status == 200 and r.json()["trace_rate"] == "10", r.body  # OFF: valid
    r = post(main_server.port, "/v2/models/simple/trace/setting", b'{"trace_rate":null}')
    assert r.json()["trace_rate"] == "1000"
    r = get(main_server.port, "/v2/models/nosuch/trace/setting")
    assert r.status == 400 and r.json() == {"error": "Request for unknown model : nosuch"}


def test_grpc_updates_refused(server_factory, repos, tmp_path):
    srv = start(server_factory, repos, tmp_path, [f"--trace-config=triton,file={tmp_path}/t"])
    g = grpcclient.InferenceServerClient(srv.grpc_url)
    for settings, code, text in [
        ({"trace_file": "/x"}, "StatusCode.UNIMPLEMENTED",
         "trace file location can not be updated through network protocol"),
        ({"trace_rate": ["1", "2"]}, "StatusCode.INVALID_ARGUMENT",
         "expect only 1 value for 'trace_rate'"),
        ({"trace_count": "-3"}, "StatusCode.INVALID_ARGUMENT",
         "Unable to parse 'trace_count'. Expecting value >= -1, got: -3"),
        ({"trace_level": ["OFF", "TENSORS"]}, "StatusCode.INVALID_ARGUMENT",
         "Expect only one trace level 'OFF' is specified"),
    ]:
        with pytest.raises(InferenceServerException) as e:
            g.update_trace_settings(settings=settings)
        assert (e.value.status(), e.value.message()) == (code, text), settings
    s = g.get_trace_settings(as_json=True)["settings"]
    assert s["trace_level"]["value"] == ["OFF"] and s["trace_count"]["value"] == ["-1"]


# ---------------------------------------------------------------------------- the flags

@pytest.mark.parametrize("arg, rc, text", [
    ("--trace-config=foo,file=x", 2, 'Bad option: "--trace-config".\ninvalid value for trace '
     'mode option: foo. Available options are "triton" and "opentelemetry"'),
    ("--trace-config=,file=x", 2, "No trace mode specified. --trace-config option format is "
     "<trace mode>,<setting>=<value> or <setting>=<value>. Got ,file=x"),
    ("--trace-config=triton,file", 2, "--trace-config option format is '<trace mode>,"
     "<setting>=<value>'. Got triton,file"),
    ("--trace-config=rate=abc", 1, 'Bad option: "--trace-config rate".\nInvalid option value. '
     "Got abc"),
    ("--trace-config=level=loud", 1, 'Bad option: "--trace-config level".\ninvalid value for '
     "trace level option: loud"),
    ("--trace-level=loud", 2, 'Bad option: "--trace-level".\ninvalid value for trace level '
     "option: loud"),
])
def test_bad_trace_flags(repos, arg, rc, text):
    p = run_cli([f"--model-repository={repos['repo_small']}", arg])
    err = p.stderr.decode()
    assert p.returncode == rc and text in err, (p.returncode, err[-1500:])


def test_flags_precedence(server_factory, repos, tmp_path):
    """--trace-config wins over the deprecated flags (with Triton's warning); a level of OFF
    anywhere turns tracing off; a level without a file says that nothing will be traced."""
    srv = start(server_factory, repos, tmp_path,
                ["--trace-rate=5", "--trace-config=rate=7", "--trace-level=TIMESTAMPS",
                 "--trace-config=level=OFF", f"--trace-config=triton,file={tmp_path}/x"])
    s = get(srv.port, "/v2/trace/setting").json()
    assert s["trace_rate"] == "7" and s["trace_level"] == ["OFF"], s
    assert "Warning: Overriding deprecated '--trace-rate' in favor of provided rate value in " \
           "--trace-config!" in srv.log
    srv2 = start(server_factory, repos, tmp_path, ["--trace-config=level=TIMESTAMPS"],
                 name="nofile")
    assert "no request will be traced: trace file name is not given" in srv2.log
    assert get(srv2.port, "/v2/trace/setting").json()["trace_level"] == ["TIMESTAMPS"]


# ---------------------------------------------------------------------------- opentelemetry

class OtlpReceiver:
    """An OTLP/HTTP collector written for the test: it decodes each POSTed
    ExportTraceServiceRequest with the opentelemetry-proto package and keeps (resource
    attributes, span) pairs; `stall` makes it take the request and never answer."""

    def __init__(self, stall=False):
        import http.server
        import socketserver
        import threading
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        self.spans, self.posts, self.lock = [], [], threading.Lock()
        self.release = threading.Event()
        recv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if stall:
                    recv.release.wait(60)
                    return
                req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with recv.lock:
                    recv.posts.append((self.path, self.headers["Content-Type"]))
                    for rs in req.resource_spans:
                        res = {a.key: a.value.string_value for a in rs.resource.attributes}
                        for ss in rs.scope_spans:
                            for sp in ss.spans:
                                recv.spans.append((res, ss.scope.name, sp))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def wait_spans(self, n, timeout=20):
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= n:
                    return list(self.spans)
            time.sleep(0.05)
        with self.lock:
            return list(self.spans)

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    r = OtlpReceiver()
    yield r
    r.close()


def otel_args(url, *more):
    return ["--trace-config=mode=opentelemetry", f"--trace-config=opentelemetry,url={url}",
            "--trace-config=level=TIMESTAMPS", "--trace-config=opentelemetry,bsp_schedule_delay=50",
            *more]


def attrs(span):
    out = {}
    for a in span.attributes:
        v = a.value
        out[a.key] = v.string_value if v.HasField("string_value") else v.int_value
    return out


def test_opentelemetry_spans(server_factory, repos, tmp_path, receiver):
    """Mode opentelemetry: each traced request is Triton's three spans (InferRequest with the
    frontend's events, the model's span under it with REQUEST_START, QUEUE_START, REQUEST_END
    and its triton.* attributes, compute under that with the four COMPUTE_* events), one trace
    id, kind SERVER, Unix times; sent as OTLP/HTTP protobuf to the url, with the resource
    attributes given and Triton's default service.name otherwise."""
    import time
    srv = start(server_factory, repos, tmp_path, otel_args(
        receiver.url, "--trace-config=rate=1",
        "--trace-config=opentelemetry,resource=deployment.environment=test"))
    s = get(srv.port, "/v2/trace/setting").json()
    assert s["trace_mode"] == "opentelemetry" and s["url"] == receiver.url, s
    assert s["bsp_schedule_delay"] == "50" and s["bsp_max_queue_size"] == "2048", s
    assert "trace_file" not in s and "log_frequency" not in s, s
    t0 = time.time_ns()
    infer_http(srv.url, request_id="h")
    infer_grpc(srv.grpc_url)
    spans = receiver.wait_spans(6)
    assert len(spans) == 6, spans
    assert receiver.posts[0] == ("/v1/traces", "application/x-protobuf")
    res, scope, _ = spans[0]
    assert res == {"deployment.environment": "test", "service.name": "triton-inference-server"}
    by_trace = {}
    for _, _, sp in spans:
        by_trace.setdefault(sp.trace_id, []).append(sp)
    assert len(by_trace) == 2 and all(len(v) == 3 for v in by_trace.values())
    for group in by_trace.values():
        named = {sp.name: sp for sp in group}
        root, model, compute = named["InferRequest"], named["simple"], named["compute"]
        assert root.parent_span_id == b"" and len(root.trace_id) == 16
        assert model.parent_span_id == root.span_id and compute.parent_span_id == model.span_id
        assert {sp.kind for sp in group} == {2}  # SPAN_KIND_SERVER
        ev = lambda sp: [e.name for e in sp.events]  # noqa: E731
        grpc = ev(root)[0].startswith("GRPC")
        pre = ("GRPC_WAITREAD", "GRPC_SEND") if grpc else ("HTTP_RECV", "HTTP_SEND")
        assert ev(root) == [f"{pre[0]}_START", f"{pre[0]}_END", f"{pre[1]}_START",
                            f"{pre[1]}_END"], ev(root)
        assert ev(model) == ["REQUEST_START", "QUEUE_START", "REQUEST_END"]
        assert ev(compute) == ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START",
                               "COMPUTE_END"]
        a = attrs(model)
        assert a["triton.model_name"] == "simple" and a["triton.model_version"] == 1
        assert a["triton.trace_parent_id"] == 0 and a["triton.trace_id"] > 0
        assert a.get("triton.request_id") == (None if grpc else "h"), a
        for sp in group:
            assert t0 - 5e9 < sp.start_time_unix_nano <= sp.end_time_unix_nano < t0 + 60e9
            times = [e.time_unix_nano for e in sp.events]
            assert times == sorted(times), (sp.name, times)
        assert root.start_time_unix_nano <= model.start_time_unix_nano
        assert compute.end_time_unix_nano <= model.end_time_unix_nano <= root.end_time_unix_nano


def test_opentelemetry_context_propagation(server_factory, repos, tmp_path, receiver):
    """rate=0: only requests that bring a W3C traceparent are traced, and their spans continue
    the client's trace (its trace id; InferRequest's parent is the client's span), over HTTP and
    gRPC; a malformed traceparent is no context."""
    srv = start(server_factory, repos, tmp_path, otel_args(receiver.url, "--trace-config=rate=0"))
    assert "no request will be traced" not in srv.log  # rate 0 is the way to ask for this
    tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    hc = httpclient.InferenceServerClient(srv.url)
    gc = grpcclient.InferenceServerClient(srv.grpc_url)
    hc.infer("simple", simple_inputs(httpclient))  # no context: not traced
    hc.infer("simple", simple_inputs(httpclient), headers={"traceparent": "00-zz-00-01"})
    hc.infer("simple", simple_inputs(httpclient), headers={"traceparent": f"00-{tid}-{sid}-01"})
    gid = "0af7651916cd43dd8448eb211c80319c"
    gc.infer("simple", simple_inputs(grpcclient), headers={"traceparent": f"00-{gid}-{sid}-01"})
    spans = receiver.wait_spans(6)
    import time
    time.sleep(0.3)  # nothing more comes
    spans = receiver.wait_spans(7, timeout=0.2)
    assert len(spans) == 6, [sp.name for _, _, sp in spans]
    roots = {sp.trace_id.hex(): sp for _, _, sp in spans if sp.name == "InferRequest"}
    assert set(roots) == {tid, gid}
    for r in roots.values():
        assert r.parent_span_id.hex() == sid


def test_opentelemetry_ensemble_steps(server_factory, tmp_path, receiver):
    """An ensemble's steps are model spans under the ensemble's model span, each with its
    compute span, in the request's one trace."""
    repo = tmp_path / "repo"
    models.write_simple_two_versions(repo)
    models.write_ensemble(repo, "ensemble_add_sub", models.ensemble_add_sub_config())
    srv = server_factory([repo], otel_args(receiver.url, "--trace-config=rate=1"), name="ens")
    infer_http(srv.url, model="ensemble_add_sub")
    spans = [sp for _, _, sp in receiver.wait_spans(14)]
    assert len(spans) == 14, [sp.name for sp in spans]  # root, ensemble, 6 x (model, compute)
    assert len({sp.trace_id for sp in spans}) == 1
    ens = next(sp for sp in spans if sp.name == "ensemble_add_sub")
    steps = [sp for sp in spans if sp.name == "simple"]
    assert len(steps) == 6 and all(sp.parent_span_id == ens.span_id for sp in steps)
    assert all(attrs(sp)["triton.trace_parent_id"] == attrs(ens)["triton.trace_id"]
               for sp in steps)
    computes = [sp for sp in spans if sp.name == "compute"]
    assert sorted(c.parent_span_id for c in computes) == sorted(s.span_id for s in steps)


def test_opentelemetry_collector_stalls(server_factory, repos, tmp_path):
    """A collector that takes the export and never answers: requests keep being answered at
    once, the queue stays bounded (the log says spans are dropped), and the server still stops
    promptly (the export in flight is given up)."""
    import time
    stall = OtlpReceiver(stall=True)
    try:
        srv = start(server_factory, repos, tmp_path, otel_args(
            stall.url, "--trace-config=rate=1", "--trace-config=opentelemetry,bsp_max_queue_size=8",
            "--trace-config=opentelemetry,bsp_max_export_batch_size=4"))
        hc = httpclient.InferenceServerClient(srv.url)
        t0 = time.monotonic()
        for _ in range(200):
            r = hc.infer("simple", simple_inputs(httpclient))
            assert (r.as_numpy("OUTPUT0") == A + B).all()
        assert time.monotonic() - t0 < 30
        assert "the span queue is full (bsp_max_queue_size 8)" in srv.log, srv.log[-2000:]
        t1 = time.monotonic()
        assert srv.stop() == 0
        assert time.monotonic() - t1 < 8, time.monotonic() - t1
    finally:
        stall.close()


def test_opentelemetry_collector_down(server_factory, repos, tmp_path):
    """No collector at the url: requests are answered; the log says the export fails (once)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    srv = start(server_factory, repos, tmp_path, otel_args(
        f"http://127.0.0.1:{port}/v1/traces", "--trace-config=rate=1"))
    for _ in range(20):
        infer_http(srv.url)
    import time
    deadline = time.monotonic() + 10
    while "cannot export spans" not in srv.log and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.log.count("OpenTelemetry: cannot export spans to") == 1, srv.log[-2000:]


def test_opentelemetry_bad_settings(repos):
    p = run_cli([f"--model-repository={repos['repo_small']}", "--trace-config=mode=opentelemetry",
                 "--trace-config=opentelemetry,bsp_max_queue_size=lots"])
    err = p.stderr.decode()
    assert p.returncode == 1 and 'Bad option: "--trace-config opentelemetry,bsp_max_queue_size".' \
        "\nInvalid option value. Got lots" in err, err[-1500:]


BLS_TRACED = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            ins = [pb_utils.get_input_tensor_by_name(r, n) for n in ("INPUT0", "INPUT1")]
            kw = {"trace": r.trace()} if r.request_id() != "untraced-child" else {}
            assert r.trace().get_context() is None
            res = pb_utils.InferenceRequest(model_name="simple", inputs=ins,
                                            requested_output_names=["OUTPUT0"], **kw).exec()
            if res.has_error():
                raise pb_utils.TritonModelException(res.error().message())
            out.append(pb_utils.InferenceResponse(
                [pb_utils.get_output_tensor_by_name(res, "OUTPUT0")]))
        return out
'''
BLS_IO = ('input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1, 16 ] }, '
          '{ name: "INPUT1" data_type: TYPE_INT32 dims: [ 1, 16 ] } ]\n'
          'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1, 16 ] } ]')


def test_bls_request_with_trace_is_a_child(server_factory, repos, tmp_path):
    """A Python model's BLS request made with trace=request.trace() is a child trace of the
    request that made it (parent_id), as Triton traces BLS calls; one made without it is not
    traced (Triton's default for BLS), even at rate=1."""
    repo = tmp_path / "repo"
    shutil.copytree(Path(repos["repo_small"]) / "simple", repo / "simple")
    d = repo / "bls_traced"
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(f'name: "bls_traced"\nbackend: "python"\n{BLS_IO}\n')
    (d / "1" / "model.py").write_text(BLS_TRACED)
    f = tmp_path / "t.json"
    srv = server_factory([repo], ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=1",
                                  f"--trace-config=triton,file={f}"], name="blstrace")
    c = httpclient.InferenceServerClient(srv.url)
    for rid in ("p1", "untraced-child"):
        r = c.infer("bls_traced", simple_inputs(httpclient), request_id=rid)
        assert (r.as_numpy("OUTPUT0") == A + B).all()
    assert srv.stop() == 0
    t = load(f)
    parents = [v for v in t.values() if v["model"]["model_name"] == "bls_traced"]
    assert sorted(v["model"]["request_id"] for v in parents) == ["p1", "untraced-child"]
    parent = next(v for v in parents if v["model"]["request_id"] == "p1")
    kids = [v for v in t.values() if v["model"]["model_name"] == "simple"]
    assert len(kids) == 1 and kids[0]["model"].get("parent_id") == parent["model"]["id"], t
    check_stamps(parent, HTTP_ORDER)
    assert [n for n, _ in kids[0]["stamps"]] == HTTP_ORDER[2:10]


def test_decoupled_response_complete_is_the_first_responses(server_factory, tmp_path):
    """A decoupled model's request sends several responses: its INFER_RESPONSE_COMPLETE is
    taken once, when the first one is sent (as Triton's stream handler takes it on its first
    callback), before REQUEST_END (the final one)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "python" / "square_int32",
                    repo / "square_int32")
    f = tmp_path / "t.json"
    srv = server_factory([repo], ["--trace-config=level=TIMESTAMPS", "--trace-config=rate=1",
                                  f"--trace-config=triton,file={f}"], name="dectrace")
    got = []
    c = grpcclient.InferenceServerClient(srv.grpc_url)
    c.start_stream(callback=lambda result, error: got.append((result, error)))
    i = grpcclient.InferInput("IN", [1], "INT32")
    i.set_data_from_numpy(np.array([3], dtype=np.int32))
    c.async_stream_infer("square_int32", [i])
    c.stop_stream()  # waits for the stream's end
    assert len(got) == 3 and all(e is None for _, e in got), got
    assert srv.stop() == 0
    (t,) = load(f).values()
    stamps = dict(t["stamps"])
    names = [n for n, _ in t["stamps"]]
    assert names.count("INFER_RESPONSE_COMPLETE") == 1, names
    assert stamps["QUEUE_START"] <= stamps["INFER_RESPONSE_COMPLETE"] < stamps["REQUEST_END"]


def test_perf_tools_trace_flags(server_factory, repos, tmp_path):
    """nereid-perf takes perf_analyzer's --trace-level, --trace-rate, --trace-count and
    --log-frequency and changes the server's global trace settings before its run, as
    perf_analyzer 2.51 does (checked side by side, over HTTP and gRPC); a value the server
    refuses stops the tool with the server's text."""
    import subprocess
    perf = Path(os.environ.get("NEREID_BIN") or ROOT / "build" / "bin" / "nereid").parent / \
        "nereid-perf"
    pa = ROOT / "scripts" / "perf_analyzer"
    f = tmp_path / "t.json"
    srv = start(server_factory, repos, tmp_path, [f"--trace-config=triton,file={f}"])
    want = {"trace_level": ["TIMESTAMPS"], "trace_rate": "3", "trace_count": "-1",
            "log_frequency": "50", "trace_file": str(f), "trace_mode": "triton"}
    for tool in (pa, perf):
        for proto, u in (("http", srv.url), ("grpc", srv.grpc_url)):
            post(srv.port, "/v2/trace/setting", b'{"trace_level":["OFF"],"trace_rate":null,'
                 b'"log_frequency":null}')
            p = subprocess.run([str(tool), "-m", "simple", "-u", u, "-i", proto, "-p", "200", "-s", "1000",
                                "--trace-level=TIMESTAMPS", "--trace-rate=3",
                                "--log-frequency=50"], capture_output=True, text=True,
                               timeout=180)
            assert p.returncode == 0, (tool, proto, p.stdout[-800:], p.stderr[-800:])
            got = get(srv.port, "/v2/trace/setting").json()
            assert got == want, (tool, proto, got)
    assert Path(f"{f}.0").exists()  # 50 traces were written while the tools ran
    p = subprocess.run([str(perf), "-m", "simple", "-u", srv.url, "--trace-rate=often"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "Unable to parse 'trace_rate', got: often" in p.stderr, p.stderr
