"""Triton's launch surface (issue #39): every flag of `tritonserver --help` (2.51, recorded in
data/triton_help.txt) starts nereid; each one nereid cannot honour here says so in exactly one
warning line at start-up; the flags implemented so far do what Triton's do
(--model-load-retry-count, --reuse-http-port, --http/--grpc-header-forward-pattern)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from conftest import NereidServer, free_port, run_cli
from e2e_util import get, post, request

HELP = Path(__file__).resolve().parent / "data" / "triton_help.txt"

# A value for each flag that asks for something (so that a flag nereid cannot honour must say
# so); flags not listed here get "1".
VALUES = {
    "allow-sagemaker": "true", "allow-vertex-ai": "true", "enable-peer-access": "true",
    "model-namespacing": "true", "rate-limit": "execution_count",
    "rate-limit-resource": "R1:4:0", "cuda-memory-pool-byte-size": "0:67108864",
    "cuda-virtual-address-size": "0:1073741824", "model-load-gpu-limit": "0:0.5",
    "min-supported-compute-capability": "6.0", "sagemaker-safe-port-range": "8080-8090",
    "cache-config": "local,size=1048576", "cache-directory": "/opt/tritonserver/caches",
    "model-load-thread-count": "4",
    "repoagent-directory": "/opt/tritonserver/repoagents", "vertex-ai-default-model": "simple",
    "buffer-manager-thread-count": "2",
}
# What nereid does with the flag itself (these must not warn): the flags the test sets up the
# server with, and the ones implemented with Triton's meaning.
SETUP = {"model-repository", "model-store", "http-port", "http-address", "grpc-port",
         "grpc-address", "metrics-port", "metrics-address", "help"}


def triton_flags():
    return sorted(set(re.findall(r"^  --([a-z0-9-]+)", HELP.read_text(), re.M)))


def help_flags():
    p = run_cli(["--help"])
    text = (p.stdout + p.stderr).decode()
    return set(re.findall(r"^  --([a-z0-9-]+)", text, re.M))


def test_every_triton_flag_is_known():
    """Each of the 87 flags of Triton 2.51's --help is in nereid's table (none exits 2)."""
    flags = triton_flags()
    assert len(flags) >= 80, flags
    missing = [f for f in flags if f not in help_flags()]
    assert missing == [], missing


def warnings_of(log):
    return [line for line in log.splitlines() if line.startswith("W")]


def test_flags_without_effect_start_the_server_with_one_line_each(server_factory, repos):
    """Every flag whose effect nereid does not have here, given once or twice, starts the
    server; each says what is not done in exactly one warning line naming it; the server then
    serves as usual."""
    no_effect = ["allow-sagemaker", "sagemaker-port", "sagemaker-safe-port-range",
                 "sagemaker-thread-count", "allow-vertex-ai", "vertex-ai-port",
                 "vertex-ai-thread-count", "vertex-ai-default-model", "repoagent-directory",
                 "cache-directory", "pinned-memory-pool-byte-size", "cuda-memory-pool-byte-size",
                 "cuda-virtual-address-size", "enable-peer-access",
                 "min-supported-compute-capability", "model-load-gpu-limit",
                 "buffer-manager-thread-count"]
    args = [f"--{f}={VALUES.get(f, '1')}" for f in no_effect]
    args += ["--cache-config=local,size=2048"]  # given twice
    srv = server_factory([repos["repo_small"]], args, name="noeffect")
    warns = warnings_of(srv.log)
    for f in no_effect:
        mine = [w for w in warns if f"] --{f}=" in w]
        assert len(mine) == 1, (f, mine, warns)
        assert "has no effect: " in mine[0], mine[0]
    assert get(srv.port, "/v2/health/ready").status == 200


def test_flags_at_their_defaults_say_nothing(server_factory, repos):
    """A flag given with the value that asks for nothing (Triton's default where nereid does
    the same) prints no line."""
    args = ["--rate-limit=off", "--allow-sagemaker=false", "--allow-vertex-ai=false",
            "--model-namespacing=false", "--enable-peer-access=false",
            "--buffer-manager-thread-count=0", "--model-load-thread-count=2",
            "--model-load-retry-count=0", "--reuse-http-port=false"]
    srv = server_factory([repos["repo_small"]], args, name="defaults")
    assert not any("has no effect" in w for w in warnings_of(srv.log)), warnings_of(srv.log)


@pytest.mark.parametrize("flag,value", [
    ("rate-limit", "sometimes"), ("cuda-memory-pool-byte-size", "64"),
    ("rate-limit-resource", "R1"), ("model-load-retry-count", "-1"),
    ("http-header-forward-pattern", "my_header(["), ("grpc-header-forward-pattern", "*x"),
    ("sagemaker-safe-port-range", "8080"), ("trace-rate", "often")])
def test_bad_values_are_refused(repos, flag, value):
    p = run_cli([f"--model-repository={repos['repo_small']}", f"--{flag}={value}"])
    err = p.stderr.decode()
    assert p.returncode != 0, err[-500:]
    assert f'Bad option: "--{flag}".' in err, err[-800:]
    assert "Started HTTPService" not in (p.stdout + p.stderr).decode()


# ----------------------------------------------------------------------------- implemented

FLAKY_INIT = '''import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Fails its first initialize (a marker file remembers it): loads on a retry."""
    def initialize(self, args):
        marker = os.path.join(args["model_repository"], "tried")
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("first load fails on purpose")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
'''

# request.parameters() back as the output
PARAMS = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "PARAMS", np.array([r.parameters().encode()], dtype=np.object_))])
            for r in requests]
'''


def python_model(repo, name, source, io):
    d = Path(repo) / name
    (d / "1").mkdir(parents=True)
    (d / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{io}\n')
    (d / "1" / "model.py").write_text(source)


FP32_IO = ('input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
           'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]')
PARAMS_IO = ('input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
             'output [ { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]')


def test_model_load_retry_count(server_factory, tmp_path):
    """A model whose first load fails is READY with --model-load-retry-count=1 (the retry is
    logged), and stays UNAVAILABLE without it."""
    for retries, ready in ((0, False), (1, True)):
        repo = tmp_path / f"r{retries}"
        python_model(repo, "flaky_init", FLAKY_INIT, FP32_IO)
        srv = server_factory([repo], [f"--model-load-retry-count={retries}",
                                      "--exit-on-error=false"], name=f"retry{retries}")
        status = get(srv.port, "/v2/models/flaky_init/ready").status
        assert status == (200 if ready else 400), (retries, status, srv.log_tail())
        retried = "retrying (1 of 1)" in srv.log
        assert retried == (retries == 1), srv.log_tail()
        assert "first load fails on purpose" in srv.log


def test_reuse_http_port(tmp_path, repos):
    """Two servers given --reuse-http-port=true bind the same HTTP port; without the flag the
    second cannot."""
    port = free_port()
    servers = []
    try:
        for i in range(2):
            s = NereidServer([repos["repo_small"]], ["--reuse-http-port=true"],
                             tmp_path / f"reuse{i}.log", port=port)
            s.start()
            servers.append(s)
            s.wait_live()
        third = NereidServer([repos["repo_small"]], [], tmp_path / "noreuse.log", port=port)
        third.start()
        rc = third.wait_exit(timeout=60)
        assert rc != 0 and "already in use" in third.log, third.log[-1500:]
    finally:
        for s in servers:
            assert s.stop() == 0, s.describe()


def params_of(result):
    return json.loads(result.as_numpy("PARAMS")[0])


def test_header_forward_patterns(server_factory, tmp_path):
    """Headers whose names match the pattern reach the model as string parameters, beside the
    request's own parameters: HTTP names match case-insensitively (Triton's default); gRPC's
    metadata keys are lower-case, so a case-sensitive (?-i) upper-case pattern forwards none."""
    python_model(tmp_path / "repo", "params", PARAMS, PARAMS_IO)
    srv = server_factory([tmp_path / "repo"], ["--http-header-forward-pattern=MY_HEADER.*",
                                               "--grpc-header-forward-pattern=(?-i)MY_HEADER.*"],
                         name="fwd")
    headers = {"my_header_1": "my_value_1", "My_Header_2": 'quoted "x" and \\ backslash',
               "header_3": "not forwarded"}
    x = np.zeros(4, dtype=np.float32)
    hc = httpclient.InferenceServerClient(srv.url)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(x)
    got = params_of(hc.infer("params", [inp], headers=dict(headers), parameters={"k": 1}))
    # (tritonclient sends header names in lower case: the upper-case pattern matched them)
    assert got == {"k": 1, "my_header_1": "my_value_1",
                   "my_header_2": 'quoted "x" and \\ backslash'}, got
    # a JSON part this large is parsed on the bulk pool (http_bulk.c), after the worker that
    # read the headers has moved on: they are forwarded all the same
    pad = "p" * (300 * 1024)
    got = params_of(hc.infer("params", [inp], headers=dict(headers), parameters={"pad": pad}))
    assert got == {"pad": pad, "my_header_1": "my_value_1",
                   "my_header_2": 'quoted "x" and \\ backslash'}, got.keys()
    gc = grpcclient.InferenceServerClient(srv.grpc_url)
    ginp = grpcclient.InferInput("INPUT0", [4], "FP32")
    ginp.set_data_from_numpy(x)
    lower = {k.lower(): v for k, v in headers.items()}  # gRPC refuses upper-case keys
    got = params_of(gc.infer("params", [ginp], headers=lower))
    assert got == {}, got


def test_grpc_header_forward_pattern_and_stream(server_factory, tmp_path):
    """gRPC metadata matching the pattern is forwarded for unary calls and for every request
    of a stream (the stream's metadata)."""
    import queue
    python_model(tmp_path / "repo", "params", PARAMS, PARAMS_IO)
    srv = server_factory([tmp_path / "repo"], ["--grpc-header-forward-pattern=^my_"],
                         name="gfwd")
    x = np.zeros(4, dtype=np.float32)
    gc = grpcclient.InferenceServerClient(srv.grpc_url)
    ginp = grpcclient.InferInput("INPUT0", [4], "FP32")
    ginp.set_data_from_numpy(x)
    headers = {"my_a": "1", "xmy_b": "2"}
    assert params_of(gc.infer("params", [ginp], headers=headers)) == {"my_a": "1"}
    got = queue.Queue()
    gc.start_stream(callback=lambda result, error: got.put((result, error)),
                    headers={"my_s": "stream"})
    for _ in range(2):
        gc.async_stream_infer("params", [ginp])
    for _ in range(2):
        r, e = got.get(timeout=60)
        assert e is None, e
        assert params_of(r) == {"my_s": "stream"}
    gc.stop_stream()
    # the HTTP side has no pattern: nothing forwarded there
    hc = httpclient.InferenceServerClient(srv.url)
    inp = httpclient.InferInput("INPUT0", [4], "FP32")
    inp.set_data_from_numpy(x)
    assert params_of(hc.infer("params", [inp], headers={"my_a": "1"})) == {}


# ----------------------------------------------------------------------------- restricted APIs

# One call per API group: (group, HTTP call, gRPC call); each takes (client, model, headers).
def _shm(c, m, h):
    return c.get_system_shared_memory_status(headers=h)


def _infer(mod):
    def call(c, m, h):
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        ins = [mod.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
        for i in ins:
            i.set_data_from_numpy(a)
        return c.infer(m, ins, headers=h)
    return call


GROUPS = [
    ("health", lambda c, m, h: c.is_server_live(headers=h)),
    ("metadata", lambda c, m, h: c.get_server_metadata(headers=h)),
    ("inference", None),
    ("shared-memory", _shm),
    ("model-config", lambda c, m, h: c.get_model_config(m, headers=h)),
    ("model-repository", lambda c, m, h: c.get_model_repository_index(headers=h)),
    ("statistics", lambda c, m, h: c.get_inference_statistics(m, headers=h)),
    ("trace", lambda c, m, h: c.get_trace_settings(headers=h)),
    ("logging", lambda c, m, h: c.get_log_settings(headers=h)),
]


@pytest.fixture(scope="module")
def restricted_server(tmp_path_factory, repos):
    """Every group restricted, each with a header of its own, over both protocols."""
    from conftest import running_server
    args = [f"--http-restricted-api={g}:key-{g}=value-{g}" for g, _ in GROUPS]
    args += [f"--grpc-restricted-protocol={g}:key-{g}=value-{g}" for g, _ in GROUPS]
    with running_server([repos["repo_small"]], args,
                        log_dir=tmp_path_factory.mktemp("restricted"), name="restricted",
                        wait=False) as srv:
        # /v2/health/live is restricted too: wait for the port with the header
        import time
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if get(srv.port, "/v2/health/live",
                       headers={"key-health": "value-health"}).status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        yield srv


INFER_BODY = json.dumps({"inputs": [
    {"name": n, "shape": [1, 16], "datatype": "INT32", "data": list(range(16))}
    for n in ("INPUT0", "INPUT1")]}).encode()
HTTP_CALLS = {
    "health": ("GET", "/v2/health/live"), "metadata": ("GET", "/v2"),
    "inference": ("POST", "/v2/models/simple/infer"),
    "shared-memory": ("GET", "/v2/systemsharedmemory/status"),
    "model-config": ("GET", "/v2/models/simple/config"),
    "model-repository": ("POST", "/v2/repository/index"),
    "statistics": ("GET", "/v2/models/simple/stats"), "logging": ("GET", "/v2/logging"),
    "trace": ("GET", "/v2/trace/setting"),
}


@pytest.mark.parametrize("group", sorted(HTTP_CALLS))
def test_restricted_group_over_http(restricted_server, group):
    """Without its header (or with another value, or another group's header) a group's API is
    refused with Triton's 403 and text; with it, it is served."""
    from e2e_util import request
    method, path = HTTP_CALLS[group]
    body = INFER_BODY if group == "inference" else b""

    def call(h):
        return request(restricted_server.port, method, path, body=body, headers=h)
    other = "health" if group != "health" else "metadata"
    for h in ({}, {f"key-{group}": "wrong"}, {f"key-{other}": f"value-{other}"}):
        r = call(h)
        assert r.status == 403, (h, r.status)
        assert r.json() == {"error": f"This API is restricted, expecting header 'key-{group}'"}
    r = call({f"key-{group}": f"value-{group}"})
    assert r.status == 200, (group, r.status, r.body)


@pytest.mark.parametrize("group,call", GROUPS, ids=[g for g, _ in GROUPS])
def test_restricted_group_over_grpc(restricted_server, group, call):
    """gRPC: the header is triton-grpc-protocol-<key>; without it UNAVAILABLE and Triton's
    text; with it the call is served (trace: answered, whatever its answer)."""
    from tritonclient.utils import InferenceServerException
    call = call or _infer(grpcclient)
    c = grpcclient.InferenceServerClient(restricted_server.grpc_url)
    key = f"triton-grpc-protocol-key-{group}"
    want = f"This protocol is restricted, expecting header '{key}'"
    for h in ({}, {key: "wrong"}, {f"key-{group}": f"value-{group}"}):
        with pytest.raises(InferenceServerException) as e:
            call(c, "simple", h)
        assert e.value.status() == "StatusCode.UNAVAILABLE" and want in e.value.message(), \
            (h, e.value)
    try:
        call(c, "simple", {key: f"value-{group}"})
    except InferenceServerException as e:  # served: whatever the method answers, not refused
        assert "is restricted" not in e.message(), e


def test_restricted_stream(restricted_server):
    """A stream without the inference header ends at once with the refusal; with it, its
    requests are answered."""
    import queue
    a = np.arange(16, dtype=np.int32).reshape(1, 16)
    ins = [grpcclient.InferInput(n, [1, 16], "INT32") for n in ("INPUT0", "INPUT1")]
    for i in ins:
        i.set_data_from_numpy(a)
    for headers, ok in (({}, False),
                        ({"triton-grpc-protocol-key-inference": "value-inference"}, True)):
        c = grpcclient.InferenceServerClient(restricted_server.grpc_url)
        got = queue.Queue()
        c.start_stream(callback=lambda result, error: got.put((result, error)), headers=headers)
        try:
            c.async_stream_infer("simple", ins)
        except Exception:  # the refused stream may have ended already: its error is below
            assert not ok
        result, error = got.get(timeout=60)
        if ok:
            assert error is None, error
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)
        else:
            assert "This protocol is restricted, expecting header " \
                   "'triton-grpc-protocol-key-inference'" in str(error), error
        c.stop_stream()
        c.close()


def test_restricted_flag_values_refused(repos):
    for v in ("inference", "inference:k", "bogus:k=v", "health,health:k=v", ":k=v"):
        p = run_cli([f"--model-repository={repos['repo_small']}", f"--http-restricted-api={v}"])
        assert p.returncode != 0 and b'Bad option: "--http-restricted-api".' in p.stderr, \
            (v, p.stderr[-500:])
    p = run_cli([f"--model-repository={repos['repo_small']}",
                 "--grpc-restricted-protocol=health:a=1", "--grpc-restricted-protocol=health:b=2"])
    assert p.returncode != 0 and b"given more than once" in p.stderr, p.stderr[-500:]


# ----------------------------------------------------------------------------- --backend-config

def _copies_with_threads(repo_small, dest, n):
    """n copies of identity_fp32, each asking for 4 intra-op threads of its own."""
    import shutil
    src = Path(repo_small) / "identity_fp32"
    for i in range(n):
        d = dest / f"ident{i}"
        shutil.copytree(src, d)
        cfg = (d / "config.pbtxt").read_text().replace('name: "identity_fp32"', f'name: "ident{i}"')
        cfg += '\nparameters { key: "intra_op_thread_count" value: { string_value: "4" } }\n'
        (d / "config.pbtxt").write_text(cfg)


def _threads(srv):
    return len(list(Path(f"/proc/{srv.proc.pid}/task").iterdir()))


def test_onnxruntime_global_threadpool(server_factory, repos, tmp_path):
    """--backend-config=onnxruntime,enable-global-threadpool=1: every session runs on one
    intra-op pool (intra_op_thread_count) instead of pools of its own: six models that each
    ask for four intra-op threads start 18 threads without it and 3 with it; they all answer."""
    _copies_with_threads(repos["repo_small"], tmp_path / "repo", 6)
    counts = {}
    for mode, args in (("own", []), ("global", [
            "--backend-config=onnxruntime,enable-global-threadpool=1",
            "--backend-config=onnxruntime,intra_op_thread_count=4",
            "--backend-config=onnxruntime,inter_op_thread_count=1"])):
        srv = server_factory([tmp_path / "repo"], args, name=f"tp_{mode}")
        c = httpclient.InferenceServerClient(srv.url)
        for i in range(6):
            x = np.arange(4, dtype=np.float32).reshape(1, 4)
            inp = httpclient.InferInput("INPUT0", [1, 4], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(c.infer(f"ident{i}", [inp]).as_numpy("OUTPUT0"), x)
        counts[mode] = _threads(srv)
        assert ("one global thread pool" in srv.log) == (mode == "global"), srv.log_tail()
        assert srv.stop() == 0
    assert counts["global"] + 12 <= counts["own"], counts


def test_default_max_batch_size(server_factory, repos):
    """--backend-config=onnxruntime,default-max-batch-size=8: a model without a config gets
    max_batch_size 8 from autocomplete (and Triton's warning with that number)."""
    srv = server_factory([repos["repo_strict"]],
                         ["--backend-config=onnxruntime,default-max-batch-size=8"], name="dmbs")
    cfg = get(srv.port, "/v2/models/simple_noconfig/config").json()
    assert cfg["max_batch_size"] == 8, cfg
    assert "autofilled max_batch_size to 8 for model 'simple_noconfig'" in srv.log


def test_backend_config_without_effect_says_so(server_factory, repos):
    """A setting no backend reads is one warning line: an unknown key of a known backend, a
    backend nereid does not have, a global key no backend takes; the known ones print none."""
    args = ["--backend-config=onnxruntime,bogus=1",
            "--backend-config=tensorrt,coalesce-request-input=1", "--backend-config=nosuch=2",
            "--backend-config=python,stub-timeout-seconds=40",
            "--backend-config=default-max-batch-size=4"]
    srv = server_factory([repos["repo_small"]], args, name="bcfg")
    warns = [w for w in warnings_of(srv.log) if "--backend-config=" in w]
    assert len(warns) == 3, warns
    assert "the onnxruntime backend has no setting 'bogus'" in warns[0]
    assert "nereid has no backend 'tensorrt'" in warns[1]
    assert "no backend has a setting 'nosuch'" in warns[2]


# ----------------------------------------------------------------------------- rate limiter

TIMED = '''import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Holds its instance 20 ms and says when (its span, wall clock) and which process."""
    def execute(self, requests):
        t0 = time.time()
        time.sleep(0.02)
        span = np.array([t0, time.time()], dtype=np.float64)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SPAN", span)]) for _ in requests]
'''


def timed_model(repo, name, count=1, resources='{ name: "R" count: 1 }', priority=1):
    io = ('input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
          'output [ { name: "SPAN" data_type: TYPE_FP64 dims: [ 2 ] } ]\n'
          f'instance_group [ {{ kind: KIND_CPU count: {count} rate_limiter {{ '
          f'resources [ {resources} ] priority: {priority} }} }} ]')
    python_model(repo, name, TIMED, io)


def spans(srv, plan):
    """Runs plan {model: (threads, requests each)} at once; {model: [(start, end)]}."""
    from concurrent.futures import ThreadPoolExecutor

    def client(model, n):
        c = httpclient.InferenceServerClient(srv.url)
        inp = httpclient.InferInput("INPUT0", [4], "FP32")
        inp.set_data_from_numpy(np.zeros(4, dtype=np.float32))
        return [tuple(c.infer(model, [inp]).as_numpy("SPAN")) for _ in range(n)]
    with ThreadPoolExecutor(sum(t for t, _ in plan.values())) as ex:
        futs = {m: [ex.submit(client, m, n) for _ in range(t)] for m, (t, n) in plan.items()}
        return {m: sorted(s for f in fs for s in f.result()) for m, fs in futs.items()}


def overlaps(a, b):
    return sum(1 for x in a for y in b if x[0] < y[1] and y[0] < x[1])


def test_rate_limiter_excludes_models_sharing_a_resource(server_factory, tmp_path):
    """Two models whose instances each need the one unit of resource R never execute at the
    same time with --rate-limit=execution_count; with the limiter off (the default) they do."""
    repo = tmp_path / "repo"
    timed_model(repo, "ma")
    timed_model(repo, "mb")
    for mode in ("execution_count", "off"):
        srv = server_factory([repo], [f"--rate-limit={mode}"], name=f"rl_{mode}")
        got = spans(srv, {"ma": (3, 6), "mb": (3, 6)})
        n = overlaps(got["ma"], got["mb"])
        if mode == "execution_count":
            assert n == 0, (n, got)
        else:
            assert n > 0, got
        assert srv.stop() == 0


def test_rate_limiter_resource_count_flag(server_factory, tmp_path):
    """--rate-limit-resource=R:2 lets two of the instances run at once; an instance that asks
    for more than the count given fails to load with Triton's text."""
    repo = tmp_path / "repo"
    timed_model(repo, "ma")
    timed_model(repo, "mb")
    timed_model(repo, "big", resources='{ name: "R" count: 3 }')
    srv = server_factory([repo], ["--rate-limit=execution_count", "--rate-limit-resource=R:2",
                                  "--exit-on-error=false"], name="rl_count")
    got = spans(srv, {"ma": (3, 6), "mb": (3, 6)})
    assert overlaps(got["ma"], got["mb"]) > 0, got
    r = post(srv.port, "/v2/repository/index").json()
    big = [m for m in r if m["name"] == "big"][0]
    assert big["state"] == "UNAVAILABLE" and "Resource count for \"R\" is limited to 2" in \
        big["reason"], big


def test_rate_limiter_priority(server_factory, tmp_path):
    """Priority weights the turns: with one unit of R shared by two instances of priority 1
    (model hi) and two of priority 2 (model lo), all kept busy, hi executes about twice as
    often as lo while both are waiting."""
    repo = tmp_path / "repo"
    timed_model(repo, "hi", count=2, priority=1)
    timed_model(repo, "lo", count=2, priority=2)
    srv = server_factory([repo], ["--rate-limit=execution_count"], name="rl_prio")
    got = spans(srv, {"hi": (6, 10), "lo": (6, 10)})
    both = min(got["hi"][-1][1], got["lo"][-1][1])  # until one of them ran out of requests
    n_hi = sum(1 for s in got["hi"] if s[1] <= both)
    n_lo = sum(1 for s in got["lo"] if s[1] <= both)
    assert overlaps(got["hi"], got["lo"]) == 0
    assert 1.5 <= n_hi / n_lo <= 2.7, (n_hi, n_lo)


def test_resources_without_the_limiter_say_so(server_factory, repos, tmp_path):
    """--rate-limit-resource with the limiter off is one warning line; so are the config
    sections nereid does not act on (response_cache, model_repository_agents)."""
    import shutil
    repo = tmp_path / "repo"
    shutil.copytree(Path(repos["repo_small"]) / "identity_fp32", repo / "identity_fp32")
    cfg = repo / "identity_fp32" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + '\nresponse_cache { enable: true }\n'
                   'model_repository_agents { agents [ { name: "checksum" } ] }\n')
    srv = server_factory([repo], ["--rate-limit-resource=R:2"], name="rl_off")
    warns = warnings_of(srv.log)
    assert sum("--rate-limit-resource has no effect" in w for w in warns) == 1, warns
    assert sum("response_cache { enable: true } has no effect" in w for w in warns) == 1, warns
    assert sum("model_repository_agents has no effect" in w for w in warns) == 1, warns


# ----------------------------------------------------------------------------- parallel loading

SLOW_INIT = '''import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(0.3)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
'''


def most_at_once(log):
    """The most loads in progress at once, from the "loading:" / "loaded in" lines."""
    now = most = 0
    for line in log.splitlines():
        if "] loading: " in line:
            now += 1
            most = max(most, now)
        elif "loaded in " in line:
            now -= 1
    return most


@pytest.mark.parametrize("threads", [1, 4])
def test_model_load_thread_count(server_factory, tmp_path, repos, threads):
    """--model-load-thread-count=N: up to N models load at once at startup (Triton's default
    4), one at a time with 1; ensembles load after the models they use; all serve."""
    import shutil
    repo = tmp_path / "repo"
    for i in range(6):
        python_model(repo, f"slow{i}", SLOW_INIT, FP32_IO)
    import models
    for n in ("identity_fp32", "dyn_batch"):
        shutil.copytree(Path(repos["repo"]) / n, repo / n)
    # "a_chain" sorts before the models it uses: it must still load after them
    models.write_ensemble(repo, "a_chain", models.ensemble_chain_config(name="a_chain"))
    srv = server_factory([repo], [f"--model-load-thread-count={threads}"], name=f"mlt{threads}")
    most = most_at_once(srv.log)
    assert (most == 1) if threads == 1 else (2 <= most <= threads), (most, srv.log_tail())
    for i in range(6):
        assert get(srv.port, f"/v2/models/slow{i}/ready").status == 200
    assert get(srv.port, "/v2/health/ready").status == 200
    r = request(srv.port, "POST", "/v2/models/a_chain/infer", body=json.dumps({"inputs": [
        {"name": "IN", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}))
    assert r.status == 200 and r.json()["outputs"][0]["data"] == [1, 2], r.body


# ----------------------------------------------------------------------------- backend / runtime

def test_backend_and_runtime_resolution_texts(server_factory, repos, tmp_path):
    """A backend nereid does not have, a `runtime` library that is not there, and one whose
    name climbs out of the directory it is found in fail to load with Triton's texts; the
    runtime that names the built-in backend (libtriton_onnxruntime.so) loads."""
    import shutil
    repo = tmp_path / "repo"
    src = Path(repos["repo_small"]) / "identity_fp32"
    cases = {
        "nosuch": ('backend: "nosuch"', "unable to find backend library for backend 'nosuch', "
                   "try specifying runtime on the model configuration."),
        "missing": ('runtime: "libcustom.so"', "unable to find backend library 'libcustom.so' "
                    "for model 'missing', searched: "),
        "escape": ('runtime: "../escape.so"', "backend library name '../escape.so' escapes "
                   "backend directory"),
        "builtin": ('runtime: "libtriton_onnxruntime.so"', None),
    }
    for name, (line, _) in cases.items():
        shutil.copytree(src, repo / name)
        cfg = (repo / name / "config.pbtxt").read_text().replace('name: "identity_fp32"',
                                                                 f'name: "{name}"')
        if line.startswith("backend:"):
            cfg = cfg.replace('backend: "onnxruntime"', line)
        else:
            cfg += "\n" + line + "\n"
        (repo / name / "config.pbtxt").write_text(cfg)
    (repo / "escape.so").write_text("")  # found from <model dir>/.., outside it
    srv = server_factory([repo], ["--exit-on-error=false"], name="runtime")
    index = {m["name"]: m for m in post(srv.port, "/v2/repository/index").json()}
    for name, (_, text) in cases.items():
        if text is None:
            assert index[name]["state"] == "READY", index[name]
        else:
            assert index[name]["state"] == "UNAVAILABLE" and text in index[name]["reason"], \
                (name, index[name])
