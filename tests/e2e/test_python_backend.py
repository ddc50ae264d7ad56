"""The Python backend (issue #37): Triton's model.py models on nereid, each instance in a process of
its own, tensors through shared memory, driven with the official tritonclient over HTTP and gRPC.

The documentation's examples (examples/python: add_sub, nobatch_auto_complete,
batch_auto_complete); initialize's args and the request's fields as model.py sees them; BYTES
tensors; async execute; a tensor larger than the shared memory's first size; logging and
finalize; every error path in Triton's words (an exception in initialize or execute, a syntax
error, no TritonPythonModel, no model.py, an environment without numpy, the wrong number of
responses, a response error with each TritonError code, an output left out); a stub killed
while idle, during execute and during initialize; 64 concurrent clients on two instances.
Business Logic Scripting (to ONNX, Python and ensemble models; to decoupled ones with
decoupled=True); decoupled models over gRPC streaming (the documentation's repeat and square),
the response sender's rules, errors and long streams; HTTP and unary gRPC refusing them.

No test asserts on wall-clock time; deadlines only bound how long a test waits."""
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from e2e_util import get, infer_json, post, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"

FP32_IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }
]
"""


def write_model(repo, name, model_py, config_body=FP32_IO, extra=""):
    d = Path(repo) / name
    (d / "1").mkdir(parents=True, exist_ok=True)
    (d / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n{config_body}\n{extra}\n')
    (d / "1" / "model.py").write_text(model_py)
    return d


HEADER = "import json, os, sys, time, asyncio\nimport numpy as np\n" \
         "import triton_python_backend_utils as pb_utils\n\n"

# OUTPUT0 = 2 * INPUT0, OUTPUT1 = the stub's pid (as floats); an input below -100 makes execute
# raise, -1 .. -5 make it misbehave in the ways Triton names.
FLAKY = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            v = float(x[0])
            if v < -100:
                raise ValueError("negative input %g" % v)
            if v == -1:
                return []
            if v == -2:
                return None
            if v == -3:
                return ["not a response"]
            if v == -4:
                return (pb_utils.InferenceResponse([]),)
            if v == -5:  # OUTPUT1 left out
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
                continue
            pid = np.full(4, os.getpid(), dtype=np.float32)
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", x * 2), pb_utils.Tensor("OUTPUT1", pid)]))
        return out
'''

# Every field initialize and execute see, as one JSON string (BYTES output INFO).
INTROSPECT = HEADER + '''
class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        pb_utils.Logger.log_info("introspect initialized as " + args["model_instance_name"])

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0")
            info = {"args": self.args, "id": r.request_id(), "corr": r.correlation_id(),
                    "flags": r.flags(), "params": r.parameters(),
                    "want": sorted(r.requested_output_names()),
                    "input": [x.name(), x.as_numpy().dtype.str, list(x.shape()), x.is_cpu()],
                    "module": __name__, "path_has_model_dir":
                        self.args["model_repository"] in sys.path,
                    "n_requests": len(requests)}
            t = pb_utils.Tensor("INFO", np.array([json.dumps(info).encode()], dtype=np.object_))
            out.append(pb_utils.InferenceResponse([t]))
        return out

    def finalize(self):
        pb_utils.Logger.log_warn("introspect finalized")
'''
INTROSPECT_IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

# BYTES in, BYTES out (upper-cased), any shape; async execute.
UPPER = HEADER + '''
class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        out = []
        for r in requests:
            s = pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy()
            up = np.array([v.upper() for v in s.reshape(-1)], dtype=np.object_).reshape(s.shape)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("UPPER", up)]))
        return out
'''
UPPER_IO = """
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1, -1 ] } ]
output [ { name: "UPPER" data_type: TYPE_STRING dims: [ -1, -1 ] } ]
"""

# Any FP32 vector back as it came (for the large-tensor test).
ECHO = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
            for r in requests]
'''
ECHO_IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

# A response carrying TritonError(code = INPUT0[0]).
ERRCODE = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            code = int(pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()[0])
            out.append(pb_utils.InferenceResponse(
                error=pb_utils.TritonError("error with code %d" % code, code)))
        return out
'''


def fp32(v):
    return np.array(v, dtype=np.float32)


def http_infer(client, model, x, outputs=None, name="INPUT0", request_id=""):
    inp = httpclient.InferInput(name, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    outs = [httpclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, [inp], outputs=outs, request_id=request_id)


def grpc_infer(client, model, x, outputs=None, name="INPUT0", **kw):
    inp = grpcclient.InferInput(name, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    outs = [grpcclient.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, [inp], outputs=outs, **kw)


def mode_text(client, model, mode):
    """The JSON the probe models answer in their TEXT output to MODE = mode (HTTP)."""
    inp = httpclient.InferInput("MODE", [1], "INT32")
    inp.set_data_from_numpy(np.array([mode], dtype=np.int32))
    return json.loads(client.infer(model, [inp]).as_numpy("TEXT")[0])


def stub_pids(server, instance=None):
    """The pids of the server's Python stubs (children running python), optionally only the one
    of `instance`."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == server.proc.pid and b"nereid_stub.py" in b"".join(argv):
            if instance is None or instance.encode() in argv:
                pids.append(int(d.name))
    return pids


# ---------------------------------------------------------------------------- the examples

@pytest.fixture(scope="module")
def examples_server(tmp_path_factory):
    from conftest import running_server
    log_dir = tmp_path_factory.mktemp("py_examples")
    with running_server([EXAMPLES], [], log_dir=log_dir, name="examples") as srv:
        yield srv


def test_add_sub_example_over_http_and_grpc(examples_server):
    """The documentation's add_sub client: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1,
    over both protocols; asking for OUTPUT1 alone returns OUTPUT1 alone."""
    rng = np.random.default_rng(7)
    a, b = rng.random(4, dtype=np.float32), rng.random(4, dtype=np.float32)
    for mod, url in ((httpclient, examples_server.url), (grpcclient, examples_server.grpc_url)):
        client = mod.InferenceServerClient(url)
        ins = [mod.InferInput("INPUT0", [4], "FP32"), mod.InferInput("INPUT1", [4], "FP32")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(b)
        r = client.infer("add_sub", ins)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
        r = client.infer("add_sub", ins, outputs=[mod.InferRequestedOutput("OUTPUT1")])
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
        assert r.as_numpy("OUTPUT0") is None
    # Triton names the backend where a model has no platform
    meta = httpclient.InferenceServerClient(examples_server.url).get_model_metadata("add_sub")
    assert meta["platform"] == "python"
    assert [(i["name"], i["datatype"], i["shape"]) for i in meta["inputs"]] == \
        [("INPUT0", "FP32", [4]), ("INPUT1", "FP32", [4])]


def test_auto_complete_examples(examples_server):
    """auto_complete_config declares the IO; with batching it sets max_batch_size 4 and a dynamic
    batcher, and a [2, 4] batch runs."""
    client = httpclient.InferenceServerClient(examples_server.url)
    nob = client.get_model_config("nobatch_auto_complete")
    bat = client.get_model_config("batch_auto_complete")
    for cfg in (nob, bat):
        assert [i["name"] for i in cfg["input"]] == ["INPUT0", "INPUT1"]
        assert [o["name"] for o in cfg["output"]] == ["OUTPUT0", "OUTPUT1"]
        assert all(t["data_type"] == "TYPE_FP32" and [int(d) for d in t["dims"]] == [4]
                   for t in cfg["input"] + cfg["output"])
        assert cfg["default_model_filename"] == "model.py"
    assert nob["max_batch_size"] == 0 and "dynamic_batching" not in nob
    assert bat["max_batch_size"] == 4 and "dynamic_batching" in bat
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)
    ins = [httpclient.InferInput("INPUT0", [2, 4], "FP32"),
           httpclient.InferInput("INPUT1", [2, 4], "FP32")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    r = client.infer("batch_auto_complete", ins)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)


# ---------------------------------------------------------------------------- behaviour

@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = tmp_path_factory.mktemp("pyrepo")
    write_model(d, "flaky", FLAKY)
    write_model(d, "introspect", INTROSPECT, INTROSPECT_IO)
    write_model(d, "upper", UPPER, UPPER_IO)
    write_model(d, "echo", ECHO, ECHO_IO)
    write_model(d, "errcode", ERRCODE)
    write_model(d, "flaky2", FLAKY.replace("flaky", "flaky2"),
                extra="instance_group [ { count: 2 kind: KIND_CPU } ]")
    return d


@pytest.fixture(scope="module")
def server(repo, tmp_path_factory):
    from conftest import running_server
    log_dir = tmp_path_factory.mktemp("py_server")
    with running_server([repo], [], log_dir=log_dir, name="py") as srv:
        yield srv


def test_initialize_args_and_request_fields(server):
    """initialize(args) gets Triton's seven string keys; a request shows its id, correlation id 0,
    flags 0, parameters "{}", the outputs asked for (a set) and its input as a numpy view; the
    model is imported as module "1.model" with its directories on sys.path."""
    client = httpclient.InferenceServerClient(server.url)
    r = http_infer(client, "introspect", fp32([1, 2, 3, 4]), request_id="req-17")
    info = json.loads(r.as_numpy("INFO")[0])
    args = info["args"]
    assert sorted(args) == sorted(["model_config", "model_instance_kind", "model_instance_name",
                                   "model_instance_device_id", "model_repository",
                                   "model_version", "model_name"])
    assert all(isinstance(v, str) for v in args.values())
    assert args["model_name"] == "introspect" and args["model_version"] == "1"
    assert args["model_instance_name"] == "introspect_0"
    assert args["model_instance_kind"] == "CPU" and args["model_instance_device_id"] == "0"
    assert Path(args["model_repository"]).name == "introspect"
    assert json.loads(args["model_config"])["name"] == "introspect"
    assert info["id"] == "req-17" and info["corr"] == 0 and info["flags"] == 0
    assert info["params"] == "{}" and info["want"] == ["INFO"]
    assert info["input"] == ["INPUT0", "<f4", [4], True]
    assert info["module"] == "1.model" and info["path_has_model_dir"]
    assert "model.py:" in server.log and "introspect initialized as introspect_0" in server.log


def test_request_parameters_reach_the_model(server):
    """request.parameters() is the request's custom parameters as JSON (string, int, bool and,
    over gRPC, double), over both protocols; what the server consumes itself (priority,
    timeout, sequence flags, binary_data_output) is not among them."""
    custom = {"temperature_name": "hot \"x\"", "max_tokens": 7, "greedy": True, "big": -3}
    x = fp32([1, 2, 3, 4])
    for mod, url in ((httpclient, server.url), (grpcclient, server.grpc_url)):
        client = mod.InferenceServerClient(url)
        inp = mod.InferInput("INPUT0", [4], "FP32")
        inp.set_data_from_numpy(x)
        params = dict(custom, **({"ratio": 0.25} if mod is grpcclient else {}))
        r = client.infer("introspect", [inp], parameters=params, priority=1, timeout=5000000)
        got = json.loads(json.loads(r.as_numpy("INFO")[0])["params"])
        want = dict(custom, **({"ratio": 0.25} if mod is grpcclient else {}))
        assert got == want, (mod.__name__, got)


def test_bytes_tensors_and_async_execute(server):
    """BYTES in and out keep their shape and bytes (empty strings and non-ASCII included);
    `async def execute` is awaited."""
    words = np.array([[b"abc", b""], ["d\u00e9f".encode(), b"x" * 300]], dtype=np.object_)
    for mod, url in ((httpclient, server.url), (grpcclient, server.grpc_url)):
        client = mod.InferenceServerClient(url)
        inp = mod.InferInput("TEXT", [2, 2], "BYTES")
        inp.set_data_from_numpy(words)
        got = client.infer("upper", [inp]).as_numpy("UPPER")
        assert got.shape == (2, 2)
        assert [bytes(v) for v in got.reshape(-1)] == \
            [b"ABC", b"", "d\u00e9f".encode().upper(), b"X" * 300]


def test_large_tensor_grows_the_shared_memory(server):
    """A 12 MB input and its 12 MB answer do not fit the stub's first 1 MiB: both sides grow it,
    and the bytes come back intact; a small request after it still works."""
    client = httpclient.InferenceServerClient(server.url, network_timeout=120)
    x = np.random.default_rng(1).random(3 * 1024 * 1024, dtype=np.float32)
    np.testing.assert_array_equal(http_infer(client, "echo", x).as_numpy("OUTPUT0"), x)
    np.testing.assert_array_equal(http_infer(client, "echo", fp32([5])).as_numpy("OUTPUT0"),
                                  fp32([5]))


def test_exception_in_execute_fails_that_request_only(server):
    """An exception in execute: HTTP 500 / gRPC INTERNAL with Triton's text (the instance's name,
    the exception, the traceback from model.py); the next request succeeds."""
    hc = httpclient.InferenceServerClient(server.url)
    with pytest.raises(InferenceServerException) as e:
        http_infer(hc, "flaky", fp32([-1000, 0, 0, 0]))
    msg = e.value.message()
    assert e.value.status() == "500" or "500" in str(e.value.status())
    assert msg.startswith("Failed to process the request(s) for model 'flaky_0', message: "
                          "ValueError: negative input -1000\n\nAt:\n"), msg
    assert "model.py(" in msg and "): execute" in msg
    np.testing.assert_array_equal(http_infer(hc, "flaky", fp32([1, 2, 3, 4])).as_numpy("OUTPUT0"),
                                  fp32([2, 4, 6, 8]))
    gc = grpcclient.InferenceServerClient(server.grpc_url)
    with pytest.raises(InferenceServerException) as e:
        grpc_infer(gc, "flaky", fp32([-1000, 0, 0, 0]))
    assert e.value.status() == "StatusCode.INTERNAL"
    assert "ValueError: negative input -1000" in e.value.message()


@pytest.mark.parametrize("value,text", [
    (-1, "Number of InferenceResponse objects do not match the number of InferenceRequest "
         "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0\n"),
    (-2, "Expected a list in the execute return, found type '<class 'NoneType'>'."),
    (-3, "Expected an 'InferenceResponse' object in the execute function return list, found "
         "type '<class 'str'>'."),
    (-4, "Expected a list in the execute return, found type '<class 'tuple'>'."),
])
def test_wrong_returns_from_execute(server, value, text):
    """What execute returns is checked as Triton's stub checks it, in its words."""
    hc = httpclient.InferenceServerClient(server.url)
    with pytest.raises(InferenceServerException) as e:
        http_infer(hc, "flaky", fp32([value, 0, 0, 0]))
    assert e.value.message() == "Failed to process the request(s) for model 'flaky_0', " \
                                "message: " + text


def test_output_left_out_is_absent(server):
    """A requested output the model does not return is absent from the reply (no error), as on
    Triton."""
    r = infer_json(server.port, "flaky", {"inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [-5, 1, 2, 3]}]})
    assert r.status == 200, r.body
    outs = json.loads(r.body)["outputs"]
    assert [o["name"] for o in outs] == ["OUTPUT0"]
    assert outs[0]["data"] == [-10, 2, 4, 6]


@pytest.mark.parametrize("code,http_status,grpc_status", [
    (0, 400, "UNKNOWN"), (1, 500, "INTERNAL"), (2, 404, "NOT_FOUND"),
    (3, 400, "INVALID_ARGUMENT"), (4, 503, "UNAVAILABLE"), (5, 501, "UNIMPLEMENTED"),
    (6, 400, "ALREADY_EXISTS"), (7, 400, "CANCELLED"),
])
def test_response_error_codes(server, code, http_status, grpc_status):
    """InferenceResponse(error=TritonError(msg, code)): the message verbatim, the code mapped to
    HTTP and gRPC as Triton maps it."""
    r = infer_json(server.port, "errcode", {"inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [code, 0, 0, 0]}]})
    assert r.status == http_status
    assert json.loads(r.body) == {"error": "error with code %d" % code}
    with pytest.raises(InferenceServerException) as e:
        grpc_infer(grpcclient.InferenceServerClient(server.grpc_url), "errcode",
                   fp32([code, 0, 0, 0]))
    assert e.value.status() == "StatusCode." + grpc_status
    assert e.value.message() == "error with code %d" % code


def test_stub_killed_while_idle_is_replaced_unseen(server):
    """A stub killed while idle is started again before the next request runs: the client sees
    a normal answer from a new process. Other models keep serving."""
    hc = httpclient.InferenceServerClient(server.url)
    first = int(http_infer(hc, "flaky", fp32([1, 1, 1, 1])).as_numpy("OUTPUT1")[0])
    assert stub_pids(server, "flaky_0") == [first]
    os.kill(first, signal.SIGKILL)

    def dead():  # a zombie has closed its socket; a dying process may still hold it (its
        try:     # command line goes first, so stub_pids stops listing it too early)
            return Path(f"/proc/{first}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    wait_for(dead, 10, "the stub to die")
    np.testing.assert_array_equal(http_infer(hc, "echo", fp32([3])).as_numpy("OUTPUT0"),
                                  fp32([3]))
    second = int(http_infer(hc, "flaky", fp32([1, 1, 1, 1])).as_numpy("OUTPUT1")[0])
    assert second != first and stub_pids(server, "flaky_0") == [second]


# initialize waits while <model dir>/slow_init exists (after writing <model dir>/initializing);
# execute of a positive INPUT0[0] writes <model dir>/executing and sleeps that many seconds.
SLEEPY = HEADER + '''
class TritonPythonModel:
    def initialize(self, args):
        self.dir = args["model_repository"]
        open(os.path.join(self.dir, "initializing"), "w").close()
        while os.path.exists(os.path.join(self.dir, "slow_init")):
            time.sleep(0.05)

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            if x[0] > 0:
                open(os.path.join(self.dir, "executing"), "w").close()
                time.sleep(float(x[0]))
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x),
                                                   pb_utils.Tensor("OUTPUT1", x)]))
        return out
'''


def sleepy_request(port, seconds):
    return infer_json(port, "sleepy", {"inputs": [
        {"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [seconds, 0, 0, 0]}]})


def test_stub_killed_during_execute_and_initialize(server_factory, tmp_path):
    """A stub killed in the middle of execute: that request gets 503 "Stub process 'sleepy_0' is
    not healthy.", the next one runs on a new stub. A stub killed during initialize: the load
    fails with the same text, and a later load brings the model back."""
    repo = tmp_path / "repo"
    d = write_model(repo, "sleepy", SLEEPY)
    write_model(repo, "echo", ECHO, ECHO_IO)
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=*"])
    (pid,) = stub_pids(srv, "sleepy_0")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", sleepy_request(srv.port, 60)))
    t.start()
    wait_for(lambda: (d / "executing").exists(), 30, "the request to reach execute")
    os.kill(pid, signal.SIGKILL)
    t.join(60)
    assert not t.is_alive()
    assert result["r"].status == 503, result["r"].body
    assert json.loads(result["r"].body) == {"error": "Stub process 'sleepy_0' is not healthy."}
    assert sleepy_request(srv.port, 0).status == 200
    assert stub_pids(srv, "sleepy_0") and stub_pids(srv, "sleepy_0")[0] != pid
    assert get(srv.port, "/v2/models/echo/ready").status == 200

    # killed during initialize
    assert post(srv.port, "/v2/repository/models/sleepy/unload").status == 200
    wait_for(lambda: not stub_pids(srv, "sleepy_0"), 30, "the old stub to end")
    (d / "initializing").unlink()
    (d / "slow_init").write_text("")
    res = {}
    t = threading.Thread(target=lambda: res.setdefault(
        "r", post(srv.port, "/v2/repository/models/sleepy/load")))
    t.start()
    wait_for(lambda: (d / "initializing").exists(), 30, "initialize to start")
    (pid,) = stub_pids(srv, "sleepy_0")
    os.kill(pid, signal.SIGKILL)
    t.join(60)
    assert res["r"].status == 400, res["r"].body
    assert "Stub process 'sleepy_0' is not healthy." in json.loads(res["r"].body)["error"]
    (d / "slow_init").unlink()
    r = post(srv.port, "/v2/repository/models/sleepy/load")
    assert r.status == 200, r.body
    assert sleepy_request(srv.port, 0).status == 200


def test_64_concurrent_clients_on_two_instances(server):
    """64 clients at once on a two-instance model, each checking its own answers: every answer
    is right, and both instances (two stub processes) served."""
    errors, pids = [], set()
    lock = threading.Lock()

    def client(k):
        try:
            c = httpclient.InferenceServerClient(server.url)
            for i in range(15):
                x = fp32([k, i, k * i, 1])
                r = http_infer(c, "flaky2", x)
                if not np.array_equal(r.as_numpy("OUTPUT0"), x * 2):
                    raise AssertionError(f"client {k} request {i}: {r.as_numpy('OUTPUT0')}")
                with lock:
                    pids.add(int(r.as_numpy("OUTPUT1")[0]))
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(repr(e))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    assert pids == set(stub_pids(server, "flaky2_0_0") + stub_pids(server, "flaky2_0_1"))
    assert len(pids) == 2


# ---------------------------------------------------------------------------- load failures

BROKEN = {
    "init_raises": (HEADER + "class TritonPythonModel:\n    def initialize(self, args):\n"
                    "        raise RuntimeError('no weights here')\n"
                    "    def execute(self, requests):\n        return []\n",
                    "RuntimeError: no weights here\n\nAt:\n"),
    "syntax_error": ("def broken(:\n", "SyntaxError: "),
    "no_class": (HEADER + "X = 1\n", "AttributeError: module '1.model' has no attribute "
                 "'TritonPythonModel'"),
    "no_execute": (HEADER + "class TritonPythonModel:\n    pass\n",
                   "does not implement `execute` method."),
}


def test_load_failures_in_tritons_words(server_factory, tmp_path):
    """A model whose initialize raises, one with a syntax error, one without TritonPythonModel or
    execute, one without model.py and one whose environment has no numpy: each fails to load
    with the reason Triton gives (the traceback's text), nothing hangs, the good model serves."""
    repo = tmp_path / "repo"
    for name, (src, _) in BROKEN.items():
        write_model(repo, name, src)
    write_model(repo, "no_file", "")
    (repo / "no_file" / "1" / "model.py").unlink()
    env = tmp_path / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv",
                    "--without-pip", str(env)], check=True)
    write_model(repo, "no_numpy", ECHO, ECHO_IO, extra='parameters: { key: "EXECUTION_ENV_PATH" '
                'value: { string_value: "%s" } }' % env)
    write_model(repo, "echo", ECHO, ECHO_IO)
    srv = server_factory([repo], ["--exit-on-error=false"])
    index = {m["name"]: m for m in json.loads(post(srv.port, "/v2/repository/index").body)}
    assert index["echo"]["state"] == "READY"
    for name, (_, text) in BROKEN.items():
        assert index[name]["state"] == "UNAVAILABLE", index[name]
        assert index[name]["reason"].startswith("Internal: "), index[name]
        assert text in index[name]["reason"], index[name]
    assert "unable to find the Python model file" in index["no_file"]["reason"]
    assert "ModuleNotFoundError: No module named 'numpy'" in index["no_numpy"]["reason"]
    assert get(srv.port, "/v2/models/echo/ready").status == 200


# ---------------------------------------------------------------------------- BLS

def bls_inputs(mod, model_name, a, b):
    ins = [mod.InferInput("MODEL_NAME", [1], "BYTES"), mod.InferInput("INPUT0", [4], "FP32"),
           mod.InferInput("INPUT1", [4], "FP32")]
    ins[0].set_data_from_numpy(np.array([model_name.encode()], dtype=np.object_))
    ins[1].set_data_from_numpy(a)
    ins[2].set_data_from_numpy(b)
    return ins


def test_bls_examples_over_http_and_grpc(examples_server):
    """bls_sync forwards to add_sub and returns its answer; bls_async has two requests to add_sub
    in flight at once; a call to a model that does not exist comes back as the response's error,
    which bls_sync raises: the client sees Triton's unknown-model text behind the stub's."""
    a, b = fp32([1, 2, 3, 4]), fp32([0.5, 0.5, 0.5, 0.5])
    for mod, url in ((httpclient, examples_server.url), (grpcclient, examples_server.grpc_url)):
        client = mod.InferenceServerClient(url)
        r = client.infer("bls_sync", bls_inputs(mod, "add_sub", a, b))
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
        ins = [mod.InferInput("INPUT0", [4], "FP32"), mod.InferInput("INPUT1", [4], "FP32")]
        ins[0].set_data_from_numpy(a)
        ins[1].set_data_from_numpy(b)
        r = client.infer("bls_async", ins)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), b - a)
        with pytest.raises(InferenceServerException) as e:
            client.infer("bls_sync", bls_inputs(mod, "nope", a, b))
        assert e.value.message().startswith(
            "Failed to process the request(s) for model 'bls_sync_0_0', message: "
            "TritonModelException: Request for unknown model: 'nope' is not found"), \
            e.value.message()


# Calls the model named by MODEL with INPUT0 (as [1, n] to the batching ones) and returns what it
# answered as OUTPUT0, or its error verbatim as the response's error; with BLS_OUTPUT set, asks
# for that output only.
BLS_ANY = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            model = pb_utils.get_input_tensor_by_name(r, "MODEL").as_numpy()[0].decode()
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            name, want = model.split(":") if ":" in model else (model, "OUTPUT0")
            call = pb_utils.InferenceRequest(
                model_name=name, requested_output_names=[want], request_id="bls-" + r.request_id(),
                inputs=[pb_utils.Tensor("INPUT0" if name != "ensemble_chain" else "IN",
                                        x if name == "echo" else x.reshape(1, -1))])
            answer = call.exec()
            if answer.has_error():
                out.append(pb_utils.InferenceResponse(error=answer.error()))
                continue
            got = answer.output_tensors()
            out.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", got[0].as_numpy().reshape(-1))]))
        return out
'''
BLS_ANY_IO = """
input [ { name: "MODEL" data_type: TYPE_STRING dims: [ 1 ] },
        { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

CALLS_IN_INITIALIZE = HEADER + '''
class TritonPythonModel:
    def initialize(self, args):
        pb_utils.InferenceRequest(model_name="echo", requested_output_names=["OUTPUT0"],
                                  inputs=[]).exec()

    def execute(self, requests):
        return []
'''


# Calls introspect with parameters and returns its INFO (what introspect saw).
BLS_PARAMS = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.InferenceRequest(
                model_name="introspect", requested_output_names=["INFO"],
                inputs=[pb_utils.get_input_tensor_by_name(r, "INPUT0")],
                parameters={"via": "bls", "n": 3, "flag": False}).exec()
            if a.has_error():
                raise pb_utils.TritonModelException(a.error().message())
            out.append(pb_utils.InferenceResponse([a.output_tensors()[0]]))
        return out
'''


def test_bls_to_onnx_ensemble_and_python_models(server_factory, tmp_path):
    """A Python model's requests reach an ONNX model, an ensemble and another Python model
    through their own schedulers (each callee counts them in its statistics), with their
    parameters (InferenceRequest(parameters=...)); the callee's
    error (an unknown output) comes back with its code; a call from initialize is refused in
    Triton's words."""
    import models
    repo = tmp_path / "repo"
    models.write_model(repo, "identity_fp32")
    models.write_model(repo, "dyn_batch")
    models.write_ensemble(repo, "ensemble_chain", models.ensemble_chain_config())
    write_model(repo, "echo", ECHO, ECHO_IO)
    write_model(repo, "bls_any", BLS_ANY, BLS_ANY_IO)
    write_model(repo, "calls_in_init", CALLS_IN_INITIALIZE)
    write_model(repo, "introspect", INTROSPECT, INTROSPECT_IO)
    write_model(repo, "bls_params", BLS_PARAMS, INTROSPECT_IO)
    srv = server_factory([repo], ["--exit-on-error=false"])
    info = json.loads(http_infer(httpclient.InferenceServerClient(srv.url), "bls_params",
                                 fp32([1, 2, 3, 4])).as_numpy("INFO")[0])
    assert json.loads(info["params"]) == {"via": "bls", "n": 3, "flag": False}
    x = fp32([1.5, -2, 3.25, 8])
    for mod, url in ((httpclient, srv.url), (grpcclient, srv.grpc_url)):
        client = mod.InferenceServerClient(url)
        for callee in ("identity_fp32", "ensemble_chain:OUT", "echo"):
            ins = [mod.InferInput("MODEL", [1], "BYTES"), mod.InferInput("INPUT0", [4], "FP32")]
            ins[0].set_data_from_numpy(np.array([callee.encode()], dtype=np.object_))
            ins[1].set_data_from_numpy(x)
            np.testing.assert_array_equal(client.infer("bls_any", ins).as_numpy("OUTPUT0"), x)
        ins = [mod.InferInput("MODEL", [1], "BYTES"), mod.InferInput("INPUT0", [4], "FP32")]
        ins[0].set_data_from_numpy(np.array([b"identity_fp32:NOPE"], dtype=np.object_))
        ins[1].set_data_from_numpy(x)
        with pytest.raises(InferenceServerException) as e:
            client.infer("bls_any", ins)
        assert "unexpected inference output 'NOPE' for model 'identity_fp32'" in \
            e.value.message()
        assert e.value.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    stats = httpclient.InferenceServerClient(srv.url).get_inference_statistics("echo")
    assert int(stats["model_stats"][0]["inference_stats"]["success"]["count"]) == 2
    index = {m["name"]: m for m in json.loads(post(srv.port, "/v2/repository/index").body)}
    assert index["calls_in_init"]["state"] == "UNAVAILABLE"
    assert "BLS is only supported during the 'execute' function." in \
        index["calls_in_init"]["reason"]


# ---------------------------------------------------------------------------- decoupled models

def stream_collect(client, model, requests, count, timeout=30, **kw):
    """Sends `requests` (lists of InferInput, ids "0", "1", ...) on one stream and returns the
    first `count` (result, error) pairs the stream delivers."""
    import queue
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        for i, ins in enumerate(requests):
            client.async_stream_infer(model, ins, request_id=str(i), **kw)
        return [got.get(timeout=timeout) for _ in range(count)]
    finally:
        client.stop_stream()


def int32_input(name, values, dtype="INT32"):
    inp = grpcclient.InferInput(name, [len(values)], dtype)
    inp.set_data_from_numpy(np.array(values, dtype=np.int32 if dtype == "INT32" else np.uint32))
    return inp


def final_flag(result):
    return result.get_response().parameters["triton_final_response"].bool_param


def test_decoupled_examples_over_grpc_streaming(examples_server):
    """The documentation's decoupled clients: square_int32 answers IN = 4, 2, 0, 1 with 7
    responses (none for 0), each OUT = [IN], triton_final_response false on each; with
    enable_empty_final_response every request also ends with an empty final response.
    repeat_int32 sends IN's elements in order with their IDX, from a thread of the model's own
    after execute returned. HTTP and unary gRPC refuse decoupled models in Triton's words."""
    client = grpcclient.InferenceServerClient(examples_server.grpc_url)
    reqs = [[int32_input("IN", [n])] for n in (4, 2, 0, 1)]
    got = stream_collect(client, "square_int32", reqs, 7)
    assert all(e is None for _, e in got), got
    by_id = {}
    for r, _ in got:
        by_id.setdefault(r.get_response().id, []).append(int(r.as_numpy("OUT")[0]))
        assert not final_flag(r)
    assert by_id == {"0": [4] * 4, "1": [2] * 2, "3": [1]}
    got = stream_collect(client, "square_int32", reqs, 11, enable_empty_final_response=True)
    finals = [r.get_response() for r, e in got if e is None and final_flag(r)]
    assert sorted(f.id for f in finals) == ["0", "1", "2", "3"]
    assert all(not f.outputs and f.model_name == "square_int32" for f in finals)
    assert sum(1 for r, _ in got if not final_flag(r)) == 7

    ins = [int32_input("IN", [4, 2, 0, 1]), int32_input("DELAY", [1, 2, 3, 4], "UINT32"),
           int32_input("WAIT", [5], "UINT32")]
    got = stream_collect(client, "repeat_int32", [ins], 5, enable_empty_final_response=True)
    assert all(e is None for _, e in got), got
    assert [int(r.as_numpy("OUT")[0]) for r, _ in got[:4]] == [4, 2, 0, 1]
    assert [int(r.as_numpy("IDX")[0]) for r, _ in got[:4]] == [0, 1, 2, 3]
    assert [final_flag(r) for r, _ in got] == [False] * 4 + [True]

    # response statistics by response index (the IN = 4 requests' fifth is their empty final)
    for stats in (httpclient.InferenceServerClient(examples_server.url)
                  .get_inference_statistics("square_int32")["model_stats"][0],
                  client.get_inference_statistics("square_int32", as_json=True)
                  ["model_stats"][0]):
        rs = stats["response_stats"]
        assert {"0", "1", "2", "3", "4"} <= set(rs), rs
        assert int(rs["0"]["success"]["count"]) >= 6
        assert int(rs["4"]["empty_response"]["count"]) >= 2
        assert set(rs["0"]) == {"compute_infer", "compute_output", "success", "fail",
                                "empty_response", "cancel"}
    with pytest.raises(InferenceServerException) as e:
        client.infer("square_int32", [int32_input("IN", [2])])
    assert e.value.status() == "StatusCode.UNIMPLEMENTED"
    assert e.value.message() == \
        "ModelInfer RPC doesn't support models with decoupled transaction policy"
    r = post(examples_server.port, "/v2/models/square_int32/infer", json.dumps(
        {"inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [2]}]}).encode())
    assert r.status == 501
    assert json.loads(r.body) == \
        {"error": "HTTP end point doesn't support models with decoupled transaction policy"}


def test_bls_with_a_decoupled_callee(examples_server):
    """bls_decoupled_sync and bls_decoupled_async read every response square_int32 streams
    back (exec / async_exec with decoupled=True): SUM = n * n over COUNT = n responses, none for
    n = 0; over HTTP and gRPC, and several at once."""
    for mod, url in ((httpclient, examples_server.url), (grpcclient, examples_server.grpc_url)):
        client = mod.InferenceServerClient(url)
        for model in ("bls_decoupled_sync", "bls_decoupled_async"):
            for n in (4, 0, 1):
                inp = mod.InferInput("IN", [1], "INT32")
                inp.set_data_from_numpy(np.array([n], dtype=np.int32))
                r = client.infer(model, [inp])
                assert (int(r.as_numpy("SUM")[0]), int(r.as_numpy("COUNT")[0])) == (n * n, n)
    errors = []

    def worker(n):
        try:
            client = httpclient.InferenceServerClient(examples_server.url)
            inp = httpclient.InferInput("IN", [1], "INT32")
            inp.set_data_from_numpy(np.array([n], dtype=np.int32))
            r = client.infer("bls_decoupled_async", [inp])
            assert int(r.as_numpy("SUM")[0]) == n * n
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


# Decoupled; MODE picks what execute does (TEXT: one BYTES element per response).
DECOUPLED_PROBE = HEADER + '''
import threading


def text(s):
    return pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", np.array([s.encode()],
                                                                        dtype=np.object_))])


class TritonPythonModel:
    def execute(self, requests):
        r = requests[0]
        mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
        sender = r.get_response_sender()
        if mode == 0:  # misuse, each refusal's text sent back
            for kw in ({"flags": 2}, {}):
                try:
                    sender.send(**kw)
                except pb_utils.TritonModelException as e:
                    sender.send(text(str(e)))
            sender.send(text("last"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            try:
                sender.send(text("too late"))
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_info("after the final flag: " + str(e))
            return None
        if mode == 1:  # one response, then execute raises
            sender.send(text("before"))
            raise ValueError("boom in decoupled execute")
        if mode == 2:
            return []
        if mode == 3:  # BLS to a decoupled model without decoupled=True
            a = pb_utils.InferenceRequest(model_name="square_int32", requested_output_names=[
                "OUT"], inputs=[pb_utils.Tensor("IN", np.array([2], dtype=np.int32))]).exec()
            sender.send(text(a.error().message() if a.has_error() else "no error"),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            return None
        if mode == 4:  # a long stream of 256 KiB responses, from another thread
            big = np.array([b"x" * (256 << 10)], dtype=np.object_)

            def run():
                for _ in range(400):
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", big)]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            threading.Thread(target=run).start()
            return None
        if mode == 6:  # 256 KiB responses until the client is seen gone (2000 at most)
            big = np.array([b"y" * (256 << 10)], dtype=np.object_)

            def run():
                n = 0
                while n < 2000 and not r.is_cancelled():
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", big)]))
                    n += 1
                pb_utils.Logger.log_info("dec_probe: stopped after %d responses, cancelled=%s"
                                         % (n, r.is_cancelled()))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            threading.Thread(target=run).start()
            return None
        if mode == 5:  # responses every 10 ms until the client cancels (30 s at most)
            def run():
                n = 0
                while n < 3000 and not r.is_cancelled():
                    sender.send(text("tick %d" % n))
                    n += 1
                    time.sleep(0.01)
                pb_utils.Logger.log_info("dec_probe: cancelled=%s after %d responses, "
                                         "sender says %s" % (r.is_cancelled(), n,
                                                             sender.is_cancelled()))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            threading.Thread(target=run).start()
            return None
'''
# default mode: execute waits (30 s at most) until its client has gone, then says what it saw
CANCEL_WAIT = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        r = requests[0]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and not r.is_cancelled():
            time.sleep(0.01)
        pb_utils.Logger.log_info("cancel_wait: cancelled=%s" % r.is_cancelled())
        x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x),
                                            pb_utils.Tensor("OUTPUT1", x)])]
'''
DECOUPLED_PROBE_IO = """
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

# Not decoupled, answered through the sender (Triton 2.51's default-mode sender); its misuse
# is logged.
DEFAULT_SENDER = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            sender = r.get_response_sender()
            try:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_info("default sender: " + str(e))
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2),
                                                    pb_utils.Tensor("OUTPUT1", x * 3)]))
            try:
                sender.send(pb_utils.InferenceResponse([]))
            except pb_utils.TritonModelException as e:
                pb_utils.Logger.log_info("default sender: " + str(e))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


def test_decoupled_errors_senders_and_long_streams(server_factory, tmp_path):
    """The response sender's refusals in Triton's words; an exception in a decoupled execute
    ends the request with Triton's error (after what it sent) and the stream goes on; a list
    returned by a decoupled model is refused; a BLS call without decoupled=True to a decoupled
    model gets Triton's error; 400 responses of 256 KiB reuse the stub's shared memory (it
    stays far below their 100 MiB); a client cancelling its stream is seen by is_cancelled();
    a default-mode model answers through its sender over HTTP;
    an ONNX model marked decoupled streams one final response per request."""
    import models
    repo = tmp_path / "repo"
    write_model(repo, "dec_probe", DECOUPLED_PROBE, DECOUPLED_PROBE_IO)
    write_model(repo, "default_sender", DEFAULT_SENDER)
    write_model(repo, "cancel_wait", CANCEL_WAIT)
    (repo / "square_int32").mkdir(parents=True)
    for f in ("config.pbtxt", "1/model.py"):
        (repo / "square_int32" / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / "square_int32" / f).write_text((EXAMPLES / "square_int32" / f).read_text())
    models.write_model(repo, "identity_fp32")
    cfg = repo / "identity_fp32" / "config.pbtxt"
    cfg.write_text(cfg.read_text() + "\nmodel_transaction_policy { decoupled: true }\n")
    srv = server_factory([repo], [])
    client = grpcclient.InferenceServerClient(srv.grpc_url)

    def texts(mode, count):
        got = stream_collect(client, "dec_probe", [[int32_input("MODE", [mode])]], count)
        return [(e.message() if e is not None else
                 r.as_numpy("TEXT")[0].decode(), e is None and final_flag(r))
                for r, e in got]

    assert texts(0, 3) == [("Unable to send response. Unsupported flag provided.", False),
                           ("Inference Response object must be provided when the response "
                            "flags is set to zero.", False), ("last", True)]
    wait_for(lambda: "after the final flag: Unable to send response. Response sender has "
                     "been closed." in srv.log, 10, "the refusal after the final flag")
    got = texts(1, 2)
    assert got[0] == ("before", False)
    assert got[1][0].startswith("Failed to process the request(s) for model 'dec_probe_0', "
                                "message: ValueError: boom in decoupled execute")
    assert texts(2, 1) == [("Failed to process the request(s) for model 'dec_probe_0', "
                            "message: Python model 'dec_probe_0' is using the decoupled mode "
                            "and the execute function must return None.", False)]
    got = stream_collect(client, "dec_probe", [[int32_input("MODE", [3])]], 1)
    assert got[0][1] is None
    assert got[0][0].as_numpy("TEXT")[0].decode() == (
        "Model square_int32 - Error when running inference: Model square_int32 is using the "
        "decoupled. The current BLS request call doesn't support models using the decoupled "
        "transaction policy. Please use 'decoupled=True' argument to the 'exec' or "
        "'async_exec' calls for decoupled models.'")
    got = stream_collect(client, "dec_probe", [[int32_input("MODE", [4])]], 401, timeout=60,
                         enable_empty_final_response=True)
    assert all(e is None for _, e in got)
    assert sum(len(r.as_numpy("TEXT")[0]) for r, _ in got[:400]) == 400 * (256 << 10)
    assert final_flag(got[400][0]) and not got[400][0].get_response().outputs
    pid = stub_pids(srv, "dec_probe_0")[0]
    assert os.stat(f"/proc/{pid}/fd/6").st_size <= 16 << 20
    # the count of messages read goes on across requests (an empty final has no body)
    got = stream_collect(client, "dec_probe", [[int32_input("MODE", [4])]], 401, timeout=60,
                         enable_empty_final_response=True)
    assert all(e is None for _, e in got) and final_flag(got[400][0])
    assert os.stat(f"/proc/{pid}/fd/6").st_size <= 16 << 20
    # the stream goes on after each error: mode 0 again
    assert texts(0, 3)[2] == ("last", True)

    # a client that cancels its stream: the model sees is_cancelled() and stops
    import queue
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    client.async_stream_infer("dec_probe", [int32_input("MODE", [5])])
    for _ in range(3):
        assert got.get(timeout=30)[1] is None
    client.stop_stream(cancel_requests=True)
    wait_for(lambda: "dec_probe: cancelled=True after" in srv.log, 30, "the model to see the "
             "cancellation")
    assert "sender says True" in srv.log
    assert texts(0, 3)[2] == ("last", True)  # and the instance serves on

    # a unary gRPC client whose deadline passes: the model sees is_cancelled(), as on Triton
    with pytest.raises(InferenceServerException) as e:
        grpc_infer(client, "cancel_wait", fp32([1, 2, 3, 4]), client_timeout=0.5)
    assert e.value.status() == "StatusCode.DEADLINE_EXCEEDED"
    wait_for(lambda: "cancel_wait: cancelled=True" in srv.log, 30, "the model to see the "
             "unary call's cancellation")

    hc = httpclient.InferenceServerClient(srv.url)
    x = fp32([1, 2, 3, 4])
    r = http_infer(hc, "default_sender", x)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x * 2)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), x * 3)
    wait_for(lambda: "default sender: Unable to send response. Non-decoupled model cannot send "
                     "complete final before sending a response." in srv.log and
             "default sender: Unable to send response. Non-decoupled model cannot send more "
             "than one response." in srv.log, 10, "the default-mode sender's refusals")

    ident = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    ident.set_data_from_numpy(x.reshape(1, 4))
    got = stream_collect(client, "identity_fp32", [[ident], [ident]], 2)
    assert [e for _, e in got] == [None, None]
    assert [final_flag(r) for r, _ in got] == [True, True]
    np.testing.assert_array_equal(got[1][0].as_numpy("OUTPUT0"), x.reshape(1, 4))


def test_a_client_that_stops_reading_is_bounded(server_factory, tmp_path):
    """Past 64 MiB of responses waiting for a client, the model waits for it (the 100 MiB
    streams of the test above, read by a Python client slower than they come, arrive whole); a
    client that takes nothing for 10 s ends its stream (gRPC RESOURCE_EXHAUSTED; the
    generate_stream connection is closed), the model sees its request cancelled, and the
    server's memory stays far below what the model would send (500 MiB). One gRPC stream and
    one generate_stream reply at once, on two instances (a waiting model holds its instance)."""
    import queue
    repo = tmp_path / "repo"
    write_model(repo, "dec_probe", DECOUPLED_PROBE, DECOUPLED_PROBE_IO,
                "instance_group [ { count: 2 kind: KIND_CPU } ]")
    srv = server_factory([repo], [])

    def stopped():
        return [int(line.split("stopped after ")[1].split()[0])
                for line in srv.log.splitlines() if "dec_probe: stopped after" in line]

    def rss_mb():
        return int([x for x in open(f"/proc/{srv.proc.pid}/status").read().splitlines()
                    if x.startswith("VmRSS:")][0].split()[1]) // 1024

    import socket
    release = threading.Event()
    slow_got = queue.Queue()

    def slow(result, error):
        release.wait(120)
        slow_got.put((result, error))

    slow_client = grpcclient.InferenceServerClient(srv.grpc_url)
    slow_client.start_stream(callback=slow)
    slow_client.async_stream_infer("dec_probe", [int32_input("MODE", [6])])
    body = b'{"MODE": 6}'
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", srv.port))
    sock.sendall(b"POST /v2/models/dec_probe/generate_stream HTTP/1.1\r\nHost: x\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))
    wait_for(lambda: len(stopped()) == 2, 120, "the model to stop for both slow readers")
    assert max(stopped()) < 2000
    assert all("cancelled=True" in line for line in srv.log.splitlines()
               if "dec_probe: stopped after" in line)
    assert rss_mb() < 400
    release.set()
    while True:
        r, e = slow_got.get(timeout=60)
        if e is not None:
            break
    assert e.status() == "StatusCode.RESOURCE_EXHAUSTED", e
    slow_client.stop_stream()
    sock.settimeout(60)
    tail = b""
    while True:  # the server closes the connection, without the stream's last chunk
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        tail = (tail + chunk)[-16:]
    sock.close()
    assert not tail.endswith(b"0\r\n\r\n")


def test_decoupled_instance_takes_the_next_request_while_answering(server_factory, tmp_path):
    """As on Triton, a decoupled model's instance is free once execute returns: with one
    instance of repeat_int32, a second client's request is answered while the first one's
    thread is still streaming, and the first one's responses that come during the second's
    execute arrive whole and in order. A stub killed while a request is still open ends that
    request with Triton's error; the next request gets a new stub."""
    import queue
    repo = tmp_path / "repo"
    for f in ("config.pbtxt", "1/model.py"):
        (repo / "repeat_int32" / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / "repeat_int32" / f).write_text((EXAMPLES / "repeat_int32" / f).read_text())
    srv = server_factory([repo], [])

    def repeat(values, delays, wait):
        return [int32_input("IN", values), int32_input("DELAY", delays, "UINT32"),
                int32_input("WAIT", [wait], "UINT32")]

    def open_stream():
        client = grpcclient.InferenceServerClient(srv.grpc_url)
        got = queue.Queue()
        client.start_stream(callback=lambda result, error: got.put((result, error)))
        return client, got

    a, a_got = open_stream()
    b, b_got = open_stream()
    try:
        a.async_stream_infer("repeat_int32", repeat([1, 2, 3, 4, 5], [300] * 5, 0),
                             enable_empty_final_response=True)
        first = [a_got.get(timeout=30)]
        # the second request's execute sleeps while the first one's responses keep coming
        b.async_stream_infer("repeat_int32", repeat([9], [0], 400),
                             enable_empty_final_response=True)
        b_res = [b_got.get(timeout=30) for _ in range(2)]
        assert all(e is None for _, e in b_res), b_res
        assert int(b_res[0][0].as_numpy("OUT")[0]) == 9 and final_flag(b_res[1][0])
        # the first request was still being answered when the second one ended
        seen = first + [a_got.get_nowait() for _ in range(a_got.qsize())]
        assert not any(e is None and final_flag(r) for r, e in seen), seen
        rest = [a_got.get(timeout=30) for _ in range(6 - len(seen))]
        got = seen + rest
        assert all(e is None for _, e in got), got
        assert [int(r.as_numpy("OUT")[0]) for r, _ in got[:5]] == [1, 2, 3, 4, 5]
        assert [int(r.as_numpy("IDX")[0]) for r, _ in got[:5]] == [0, 1, 2, 3, 4]
        assert [final_flag(r) for r, _ in got] == [False] * 5 + [True]

        # the stub dies while a request is open: it ends with Triton's error
        (pid,) = stub_pids(srv)
        a.async_stream_infer("repeat_int32", repeat([1, 2, 3], [0, 60000, 60000], 0))
        r, e = a_got.get(timeout=30)
        assert e is None and int(r.as_numpy("OUT")[0]) == 1
        os.kill(pid, signal.SIGKILL)
        r, e = a_got.get(timeout=30)
        assert e is not None and e.message() == "Stub process 'repeat_int32_0_0' is not healthy."
        b.async_stream_infer("repeat_int32", repeat([7], [0], 0))
        r, e = b_got.get(timeout=30)
        assert e is None and int(r.as_numpy("OUT")[0]) == 7
        assert stub_pids(srv) not in ([], [pid])
    finally:
        a.stop_stream()
        b.stop_stream()


# decoupled, `async def execute`: MODE < 0 raises; else it waits MODE ms, then asks
# square_int32 (BLS, decoupled) to square 3 and answers with the sum of what came back
ASYNC_DECOUPLED = HEADER + '''
def text(s):
    return pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", np.array([s.encode()],
                                                                        dtype=np.object_))])


class TritonPythonModel:
    async def execute(self, requests):
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
            if mode < 0:
                raise ValueError("boom in async execute")
            await asyncio.sleep(mode / 1000)
            call = pb_utils.InferenceRequest(
                model_name="square_int32", requested_output_names=["OUT"],
                inputs=[pb_utils.Tensor("IN", np.array([3], dtype=np.int32))])
            got = [int(pb_utils.get_output_tensor_by_name(x, "OUT").as_numpy()[0])
                   for x in call.exec(decoupled=True) if x.output_tensors()]
            sender = r.get_response_sender()
            sender.send(text("%d: %s" % (mode, got)))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''


def test_a_request_that_never_ends_does_not_hold_the_exit(server_factory, tmp_path):
    """As Triton's, the server waits --exit-timeout-secs for requests in flight and then exits
    at once (status 1, Triton's "Exit timeout expired. Exiting immediately.") instead of
    waiting for a decoupled request whose model answers for another minute; its stub ends
    with it."""
    import queue
    repo = tmp_path / "repo"
    for f in ("config.pbtxt", "1/model.py"):
        (repo / "repeat_int32" / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / "repeat_int32" / f).write_text((EXAMPLES / "repeat_int32" / f).read_text())
    srv = server_factory([repo], ["--exit-timeout-secs=1"], expect_rc=1)
    (stub,) = stub_pids(srv)
    client = grpcclient.InferenceServerClient(srv.grpc_url)
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        client.async_stream_infer("repeat_int32", [
            int32_input("IN", [1, 2]), int32_input("DELAY", [0, 60000], "UINT32"),
            int32_input("WAIT", [0], "UINT32")])
        assert got.get(timeout=30)[1] is None  # the first response: the request is running
        assert srv.stop(timeout=30) == 1
    finally:
        client.stop_stream()
    assert "Exit timeout expired. Exiting immediately." in srv.log
    wait_for(lambda: not os.path.exists(f"/proc/{stub}") or
             open(f"/proc/{stub}/stat").read().rsplit(")", 1)[1].split()[0] == "Z", 30,
             "the stub to end")


def test_async_decoupled_execute_runs_in_the_background(server_factory, tmp_path):
    """As on Triton since 24.04, a decoupled model's `async def execute` runs on an event loop
    of its own and the instance takes its next request meanwhile: with one instance, a request
    that waits 1.5 s is answered after one sent later that does not wait; both call another
    model (BLS) after their execute has returned. A coroutine that raises ends its request
    with Triton's error text (and logs it); the instance serves on."""
    import queue
    repo = tmp_path / "repo"
    write_model(repo, "async_dec", ASYNC_DECOUPLED, DECOUPLED_PROBE_IO)
    for f in ("config.pbtxt", "1/model.py"):
        (repo / "square_int32" / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / "square_int32" / f).write_text((EXAMPLES / "square_int32" / f).read_text())
    srv = server_factory([repo], [])
    order = queue.Queue()  # (id, text or error) as the two streams get them
    clients = []
    for _ in range(2):  # one stream each: a stream answers its requests in order
        c = grpcclient.InferenceServerClient(srv.grpc_url)
        c.start_stream(callback=lambda result, error: order.put(
            (error.message(), None) if error is not None else
            (result.get_response().id, result.as_numpy("TEXT")[0].decode())))
        clients.append(c)
    try:
        clients[0].async_stream_infer("async_dec", [int32_input("MODE", [1500])],
                                      request_id="slow")
        clients[1].async_stream_infer("async_dec", [int32_input("MODE", [0])],
                                      request_id="fast")
        assert [order.get(timeout=30) for _ in range(2)] == \
            [("fast", "0: [3, 3, 3]"), ("slow", "1500: [3, 3, 3]")]
        clients[0].async_stream_infer("async_dec", [int32_input("MODE", [-1])])
        text, none = order.get(timeout=30)
        assert none is None and text.startswith(
            "Failed to process the request(s) for model 'async_dec_0', message: "
            "ValueError: boom in async execute")
        clients[0].async_stream_infer("async_dec", [int32_input("MODE", [1])], request_id="x")
        assert order.get(timeout=30) == ("x", "1: [3, 3, 3]")
    finally:
        for c in clients:
            c.stop_stream()
    assert "ValueError: boom in async execute" in srv.log


# an ensemble around a decoupled step, as Triton's TensorRT-LLM ensembles are built:
# pre (X = IN + 1) -> square_int32 (X responses of X) -> post (RESULT = 10 * X; X == 5 fails)
INT_IO = """
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""
PRE = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(
            r, "IN").as_numpy() + 1)]) for r in requests]
'''
POST = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if int(x[0]) == 5:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("five")))
            else:
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 10)]))
        return out
'''


def write_pipeline(repo, name, post_input="squared"):
    d = repo / name
    (d / "1").mkdir(parents=True, exist_ok=True)
    (d / "config.pbtxt").write_text(f"""
name: "{name}"
platform: "ensemble"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "RESULT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
ensemble_scheduling {{ step [
  {{ model_name: "pre" model_version: -1 input_map {{ key: "IN" value: "IN" }}
     output_map {{ key: "OUT" value: "plus_one" }} }},
  {{ model_name: "square_int32" model_version: -1 input_map {{ key: "IN" value: "plus_one" }}
     output_map {{ key: "OUT" value: "squared" }} }},
  {{ model_name: "post" model_version: -1 input_map {{ key: "IN" value: "{post_input}" }}
     output_map {{ key: "OUT" value: "RESULT" }} }}
] }}
""")


def test_an_ensemble_with_a_decoupled_step(server_factory, tmp_path):
    """As on Triton, an ensemble with a decoupled step is decoupled itself (its config says so
    whatever the file says): each response of the decoupled step runs the steps after it, and
    each of those runs is one response of the ensemble, over a gRPC stream; the end is the final
    flag alone (an empty final response when asked for), also when the step sent nothing. A
    step failing after it ends the request with its text behind Triton's "in ensemble ...".
    HTTP and unary gRPC refuse it in Triton's words. A step that reads tensors from both sides
    of a decoupled step is refused at load in Triton's words."""
    repo = tmp_path / "repo"
    write_model(repo, "pre", PRE, INT_IO)
    write_model(repo, "post", POST, INT_IO)
    for f in ("config.pbtxt", "1/model.py"):
        (repo / "square_int32" / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / "square_int32" / f).write_text((EXAMPLES / "square_int32" / f).read_text())
    write_pipeline(repo, "pipeline")
    write_model(repo, "join", POST, INT_IO.replace(
        "input [", 'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] },'))
    write_pipeline(repo, "mixed", post_input="plus_one\" } input_map { key: \"X\" value: \"squared")
    (repo / "mixed" / "config.pbtxt").write_text((repo / "mixed" / "config.pbtxt").read_text()
                                                 .replace('model_name: "post"', 'model_name: "join"'))
    srv = server_factory([repo], ["--exit-on-error=false"])
    hc = httpclient.InferenceServerClient(srv.url)
    assert hc.get_model_config("pipeline")["model_transaction_policy"] == {"decoupled": True}
    client = grpcclient.InferenceServerClient(srv.grpc_url)

    import queue
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))

    def run(value):
        """The request's responses up to its final one: (RESULT or None, final) or an error's
        text. The last data response carries the final flag when the step after the decoupled
        one ends last, else an empty final response follows (Triton's rule, timing decides)."""
        client.async_stream_infer("pipeline", [int32_input("IN", [value])],
                                  enable_empty_final_response=True)
        out = []
        while not out or (isinstance(out[-1], tuple) and not out[-1][1]):
            r, e = got.get(timeout=30)
            out.append(e.message() if e is not None else (
                [int(x) for x in r.as_numpy("RESULT")] if r.get_response().outputs else None,
                final_flag(r)))
        if out[-1] == (None, True) and len(out) > 1:
            out[-2:] = [(out[-2][0], True)]  # the same as a final flag on the last response
        return out

    try:
        assert run(2) == [([30], False)] * 2 + [([30], True)]
        assert run(-1) == [(None, True)]  # the decoupled step sent nothing
        got_error = run(4)
        assert len(got_error) == 1 and got_error[0].startswith("in ensemble 'pipeline', ") \
            and got_error[0].endswith("five"), got_error
        assert run(0) == [([10], True)]  # and the stream goes on
    finally:
        client.stop_stream()
    stats = hc.get_inference_statistics("pipeline")["model_stats"][0]
    assert int(stats["inference_stats"]["success"]["count"]) == 3
    assert int(stats["inference_stats"]["fail"]["count"]) == 1

    with pytest.raises(InferenceServerException) as e:
        client.infer("pipeline", [int32_input("IN", [2])])
    assert e.value.status() == "StatusCode.UNIMPLEMENTED"
    r = post(srv.port, "/v2/models/pipeline/infer", json.dumps(
        {"inputs": [{"name": "IN", "shape": [1], "datatype": "INT32", "data": [2]}]}).encode())
    assert r.status == 501
    index = {m["name"]: m for m in json.loads(post(srv.port, "/v2/repository/index").body)}
    assert index["mixed"]["state"] == "UNAVAILABLE"
    assert "in ensemble mixed, step of model 'join' receives inputs originated from different " \
           "decoupled models" in index["mixed"]["reason"], index["mixed"]


# ---------------------------------------------------------------------------- custom metrics

def metrics_text(srv):
    return get(srv.metrics_port, "/metrics").body.decode()


def test_custom_metrics_example(examples_server):
    """The documentation's custom_metrics client: the sums are right and the model's counter
    shows on the metrics endpoint with its HELP and TYPE lines and its labels, growing with
    each request; the model reads its value back (logged)."""
    client = httpclient.InferenceServerClient(examples_server.url)
    a, b = fp32([1, 2, 3, 4]), fp32([0.5, 0.5, 0.5, 0.5])
    ins = [httpclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
    ins[0].set_data_from_numpy(a)
    ins[1].set_data_from_numpy(b)
    r = client.infer("custom_metrics", ins, request_id="1")
    np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(r.as_numpy("OUTPUT1"), a - b)
    text = metrics_text(examples_server)
    assert "# HELP requests_process_latency_ns Cumulative time spent processing requests\n" in text
    assert "# TYPE requests_process_latency_ns counter\n" in text
    series = 'requests_process_latency_ns{model="custom_metrics",version="1"} '
    first = float(text.split(series)[1].split("\n")[0])
    assert first > 0
    client.infer("custom_metrics", ins)
    assert float(metrics_text(examples_server).split(series)[1].split("\n")[0]) > first
    # counters come before nereid's gauges, as prometheus-cpp groups families by type
    assert text.index(series) < text.index("# TYPE nv_inference_pending_request_count gauge")
    wait_for(lambda: "Cumulative requests processing latency: " in examples_server.log, 10,
             "the model's log line with the value it read back")


# Each instance counts itself in probe_shared at initialize; MODE picks what execute does
# (TEXT: a JSON report).
METRICS_PROBE = HEADER + '''
import threading


def report(obj):
    return [pb_utils.InferenceResponse([pb_utils.Tensor(
        "TEXT", np.array([json.dumps(obj).encode()], dtype=np.object_))])]


def refusal(fn):
    try:
        fn()
    except pb_utils.TritonModelException as e:
        return str(e)
    return "no error"


class TritonPythonModel:
    def initialize(self, args):
        self.shared = pb_utils.MetricFamily("probe_shared", "instances started",
                                            pb_utils.MetricFamily.COUNTER)
        self.shared_metric = self.shared.Metric(labels={"who": "both"})
        self.shared_metric.increment(1)

    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        MF = pb_utils.MetricFamily
        if mode == 0:
            self.gauge = MF("probe_gauge", "a gauge", MF.GAUGE)
            self.g = self.gauge.Metric(labels={"b": "2", "a": "1 \\\\ \\"q\\""})
            self.g.set(2.5)
            self.g.increment(-1)
            self.hist = MF("probe_hist", "", MF.HISTOGRAM)
            self.h = self.hist.Metric(labels={"k": "v"}, buckets=[0.1, 1.0, 2.5])
            for v in (0.05, 1.5, 6.0):
                self.h.observe(v)
            c = self.shared_metric
            return report({
                "gauge": self.g.value(), "shared": c.value(),
                "counter_set": refusal(lambda: c.set(3)),
                "counter_negative": refusal(lambda: c.increment(-1)),
                "hist_increment": refusal(lambda: self.h.increment(1)),
                "hist_value": refusal(lambda: self.h.value()),
                "gauge_observe": refusal(lambda: self.g.observe(1)),
                "hist_no_buckets": refusal(lambda: self.hist.Metric(labels={"x": "y"})),
                "counter_buckets": refusal(lambda: self.shared.Metric(buckets=[1.0])),
                "other_kind": refusal(lambda: MF("probe_gauge", "x", MF.COUNTER)),
                "unsorted": refusal(lambda: self.hist.Metric(labels={"z": "1"},
                                                             buckets=[2.0, 1.0])),
                "bad_name": refusal(lambda: MF("9 bad", "", MF.GAUGE)),
            })
        if mode == 1:  # the gauge's metric goes, and with it its series
            del self.g
            return report({})
        if mode == 2:  # a thread of the model's own counts and logs between requests
            def run():
                fam = MF("probe_bg", "counted by a thread", MF.COUNTER)
                m = fam.Metric()
                for i in range(3000):
                    m.increment(1)
                    pb_utils.Logger.log_info("probe background line %d %s" % (i, "x" * 80))
                pb_utils.Logger.log_info("probe bg done value=%s" % m.value())
                self.bg = (fam, m)
            threading.Thread(target=run).start()
            return report({})
'''
METRICS_PROBE_IO = """
input [ { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

# auto_complete_config may not make metrics: refused, the load goes on without it.
METRICS_IN_AUTOCOMPLETE = HEADER + '''
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        try:
            pb_utils.MetricFamily("probe_ac", "", pb_utils.MetricFamily.COUNTER)
        except pb_utils.TritonModelException as e:
            pb_utils.Logger.log_info("autocomplete metrics: " + str(e))
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
'''


def test_custom_metrics_kinds_errors_sharing_and_lifetime(server_factory, tmp_path):
    """Counters, gauges and histograms render as prometheus-cpp does (labels sorted and
    escaped, _count/_sum/cumulative _bucket with +Inf, no HELP for an empty description);
    two instances' families and metrics of one name and labels are one series; each misuse is
    refused in Triton's words; a deleted metric leaves the endpoint; a model's own thread counts
    and logs 3000 lines between requests without blocking (the server reads its stub while
    idle); auto_complete_config is refused metrics; unloading the model removes its series."""
    repo = tmp_path / "repo"
    write_model(repo, "metrics_probe", METRICS_PROBE, METRICS_PROBE_IO)
    write_model(repo, "metrics_shared", METRICS_PROBE, METRICS_PROBE_IO,  # counts itself twice
                extra="instance_group [ { count: 2 kind: KIND_CPU } ]")
    write_model(repo, "ac_metrics", METRICS_IN_AUTOCOMPLETE)
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=*"])
    client = httpclient.InferenceServerClient(srv.url)

    def probe(mode):
        return mode_text(client, "metrics_probe", mode)

    rep = probe(0)
    assert rep["gauge"] == 1.5 and rep["shared"] == 3.0  # three instances, one series
    pre = "Failed to process the request for model 'metrics_probe_0', message: "
    assert rep["counter_set"] == "Failed to set metric value: " + pre + \
        "TRITONSERVER_METRIC_KIND_COUNTER does not support Set"
    assert rep["counter_negative"] == "Failed to increment metric value: " + pre + \
        "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by " \
        "non-negative values."
    assert rep["hist_increment"] == "Failed to increment metric value: " + pre + \
        "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Increment"
    assert rep["hist_value"] == "Failed to get metric value: " + pre + \
        "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value"
    assert rep["gauge_observe"] == "Failed to observe metric value: " + pre + \
        "TRITONSERVER_METRIC_KIND_GAUGE does not support Observe"
    assert rep["hist_no_buckets"] == "Failed to create metric. Missing required buckets."
    assert rep["counter_buckets"] == "Failed to create metric. Unexpected buckets found."
    assert rep["other_kind"] == "Error when creating MetricFamily: " + pre + \
        "Family name already exists with different type"
    assert rep["unsorted"] == "Error when creating Metric: " + pre + \
        "Bucket Boundaries must be strictly sorted"
    assert rep["bad_name"] == "Error when creating MetricFamily: " + pre + \
        "Invalid metric name"

    text = metrics_text(srv)
    assert '# HELP probe_shared instances started\n# TYPE probe_shared counter\n' \
           'probe_shared{who="both"} 3\n' in text
    assert '# TYPE probe_gauge gauge\nprobe_gauge{a="1 \\\\ \\"q\\"",b="2"} 1.5\n' in text
    assert "# HELP probe_hist" not in text
    assert '# TYPE probe_hist histogram\nprobe_hist_count{k="v"} 3\nprobe_hist_sum{k="v"} 7.55\n' \
           'probe_hist_bucket{k="v",le="0.1"} 1\nprobe_hist_bucket{k="v",le="1"} 1\n' \
           'probe_hist_bucket{k="v",le="2.5"} 2\nprobe_hist_bucket{k="v",le="+Inf"} 3\n' in text
    assert text.index("probe_shared{") < text.index("# TYPE nv_inference_pending_request_count") \
        < text.index("probe_gauge{") < text.index("probe_hist_count")

    probe(1)
    assert "probe_gauge" not in metrics_text(srv)

    probe(2)
    wait_for(lambda: "probe bg done value=3000.0" in srv.log, 60,
             "the model's thread to finish counting and logging")
    assert "probe_bg 3000\n" in metrics_text(srv)
    probe(0)  # the instances serve on

    assert "autocomplete metrics: Error when creating MetricFamily: Failed to process the " \
           "request for model 'ac_metrics', message: custom metrics and model control are not " \
           "available in auto_complete_config" in srv.log
    client.unload_model("metrics_probe")
    wait_for(lambda: "probe_hist" not in metrics_text(srv) and "probe_bg" not in metrics_text(srv),
             30, "the model's series to go")
    assert 'probe_shared{who="both"} 3\n' in metrics_text(srv)  # metrics_shared holds it
    client.unload_model("metrics_shared")
    wait_for(lambda: "probe_" not in metrics_text(srv), 30, "the last series to go")


# ---------------------------------------------------------------------------- model control

# MODE 0: readiness of identity_fp32 before and after loading it; 1: loads py_loaded from a
# config and a model.py sent as files; 2: unloads it; 3: loads a model that does not exist.
LOADER = HEADER + '''
ECHO_PY = b"""import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 10)]) for r in requests]
"""
CONFIG = json.dumps({"backend": "python", "max_batch_size": 0,
                     "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [2]}],
                     "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}]})


def report(obj):
    return [pb_utils.InferenceResponse([pb_utils.Tensor(
        "TEXT", np.array([json.dumps(obj).encode()], dtype=np.object_))])]


class TritonPythonModel:
    def initialize(self, args):
        try:
            pb_utils.load_model("identity_fp32")
        except pb_utils.TritonModelException as e:
            pb_utils.Logger.log_info("load in initialize: " + str(e))

    def execute(self, requests):
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        try:
            if mode == 0:
                before = pb_utils.is_model_ready("identity_fp32")
                pb_utils.load_model("identity_fp32")
                return report([before, pb_utils.is_model_ready("identity_fp32"),
                               pb_utils.is_model_ready("identity_fp32", "1"),
                               pb_utils.is_model_ready("identity_fp32", "7")])
            if mode == 1:
                pb_utils.load_model("py_loaded", config=CONFIG,
                                    files={"file:1/model.py": ECHO_PY})
            elif mode == 2:
                pb_utils.unload_model("py_loaded")
            elif mode == 3:
                pb_utils.load_model("no_such_model")
            return report(pb_utils.is_model_ready("py_loaded"))
        except pb_utils.TritonModelException as e:
            return report(str(e))
'''
LOADER_IO = """
input [ { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


def test_model_control_from_python(server_factory, tmp_path):
    """pb_utils.load_model (from the repository, and from a config and files it sends),
    is_model_ready, unload_model, in explicit mode; a load of an unknown model fails in the
    repository's words; initialize may not load (the load it is part of is running); outside
    explicit mode every load is refused as the repository endpoints refuse it."""
    import models
    repo = tmp_path / "repo"
    models.write_model(repo, "identity_fp32")
    write_model(repo, "loader", LOADER, LOADER_IO)
    srv = server_factory([repo], ["--model-control-mode=explicit", "--load-model=loader"])
    client = httpclient.InferenceServerClient(srv.url)

    def loader(mode):
        return mode_text(client, "loader", mode)

    assert loader(0) == [False, True, True, False]
    assert client.is_model_ready("identity_fp32")
    assert loader(1) is True
    inp = httpclient.InferInput("IN", [2], "FP32")
    inp.set_data_from_numpy(fp32([1, 2]))
    np.testing.assert_array_equal(client.infer("py_loaded", [inp]).as_numpy("OUT"), [10, 20])
    assert loader(2) is False
    wait_for(lambda: not client.is_model_ready("py_loaded"), 30, "py_loaded to unload")
    assert loader(3) == "Failed to process the request for model 'loader_0', message: " \
                        "failed to load 'no_such_model', failed to poll from model repository"
    assert "load in initialize: Failed to process the request for model 'loader_0', message: " \
           "a model cannot be loaded or unloaded while another one loads" in srv.log

    other = server_factory([repo], [])  # MODE_NONE
    oc = httpclient.InferenceServerClient(other.url)
    assert mode_text(oc, "loader", 3) == \
        "Failed to process the request for model 'loader_0', message: explicit model load / " \
        "unload is not allowed if polling is enabled"


# ---------------------------------------------------------------------------- environments

WHERE = HEADER + '''
class TritonPythonModel:
    def execute(self, requests):
        t = pb_utils.Tensor("TEXT", np.array([json.dumps([sys.executable, sys.prefix]).encode()],
                                              dtype=np.object_))
        return [pb_utils.InferenceResponse([t]) for _ in requests]
'''
WHERE_IO = """
input [ { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


def test_packed_execution_environment(server_factory, tmp_path):
    """EXECUTION_ENV_PATH naming a packed environment ($$TRITON_MODEL_DIRECTORY/env.tar.gz, a
    conda-pack-style archive of an environment's directory) is unpacked once and its python3
    runs the model, for both models that name it; an archive that is not one fails that model's
    load with libarchive's reason, and the others serve."""
    import tarfile
    env = tmp_path / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip",
                    str(env)], check=True)
    repo = tmp_path / "repo"
    extra = 'parameters: { key: "EXECUTION_ENV_PATH" value: { string_value: ' \
            '"$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }'
    for name in ("packed_a", "packed_b", "packed_bad"):
        d = write_model(repo, name, WHERE, WHERE_IO, extra=extra)
        if name == "packed_bad":
            (d / "env.tar.gz").write_bytes(b"this is not an archive\n" * 10)
            continue
        with tarfile.open(d / "env.tar.gz", "w:gz") as tar:
            for p in sorted(env.iterdir()):
                tar.add(p, arcname=p.name)
    srv = server_factory([repo], ["--exit-on-error=false"])
    client = httpclient.InferenceServerClient(srv.url)
    seen = []
    for name in ("packed_a", "packed_b"):
        exe, prefix = mode_text(client, name, 0)
        assert Path(prefix).name.startswith("python_env_"), prefix
        assert exe == str(Path(prefix) / "bin" / "python3")
        seen.append(prefix)
    assert seen[0] != seen[1]  # two archives: each its own directory
    assert "Using Python execution env " + str(repo / "packed_a" / "env.tar.gz") in srv.log
    index = {m["name"]: m for m in json.loads(post(srv.port, "/v2/repository/index").body)}
    assert index["packed_bad"]["state"] == "UNAVAILABLE"
    assert "failed to unpack the Python execution environment" in index["packed_bad"]["reason"]


SLOW_INIT = HEADER + '''
class TritonPythonModel:
    def initialize(self, args):
        time.sleep(5)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
'''


def test_backend_config_for_python(server_factory, tmp_path):
    """--backend-config=python,... as Triton reads it: shm-default-byte-size sizes each stub's
    shared memory, stub-timeout-seconds bounds initialize (a slower one fails its load and is
    ended), an out-of-range value fails the loads in Triton's words, a malformed option stops
    the server with Triton's text."""
    repo = tmp_path / "repo"
    write_model(repo, "echo", ECHO, ECHO_IO)
    write_model(repo, "slow_init", SLOW_INIT)
    srv = server_factory([repo], ["--exit-on-error=false",
                                  "--backend-config=python,shm-default-byte-size=4194304",
                                  "--backend-config=python,stub-timeout-seconds=1"])
    assert get(srv.port, "/v2/models/echo/ready").status == 200
    pid = stub_pids(srv, "echo_0")[0]
    assert os.stat(f"/proc/{pid}/fd/6").st_size == 4 << 20
    index = {m["name"]: m for m in json.loads(post(srv.port, "/v2/repository/index").body)}
    assert index["slow_init"]["state"] == "UNAVAILABLE"
    assert "did not answer initialize within 1 s" in index["slow_init"]["reason"]
    assert stub_pids(srv, "slow_init_0") == []

    bad = server_factory([repo], ["--exit-on-error=false",
                                  "--backend-config=python,shm-growth-byte-size=0"])
    index = {m["name"]: m for m in json.loads(post(bad.port, "/v2/repository/index").body)}
    assert "shm-growth-byte-size can't be smaller than or equal to zero." in \
        index["echo"]["reason"]

    out = subprocess.run([str(srv.binary), f"--model-repository={repo}", "--backend-config=oops"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0
    assert "--backend-config option format is '<backend name>,<setting>=<value>'. Got oops" in \
        out.stdout + out.stderr
