"""Triton's generate extension (issue #37): POST .../generate takes a flat JSON object (members
named after inputs are their data, the rest request parameters) and answers a flat one
(model_name, model_version, id, each output as a bare value or a flat array, keys sorted),
for ONNX, Python and decoupled models, through the same path as infer; Triton's recorded
answer for a model without the inputs, and its texts for each error.

No test asserts on wall-clock time."""
import json
import shutil
from pathlib import Path

import pytest

import models
from e2e_util import assert_matches_recorded, post, replay

ROOT = Path(__file__).resolve().parents[2]

# text_input (BYTES [1]) -> text_output: upper-cased, with the request's parameters appended.
GEN_ECHO = """import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            text = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy()[0].decode()
            reply = text.upper() + " " + r.parameters()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor(
                "text_output", np.array([reply.encode()], dtype=np.object_)),
                pb_utils.Tensor("length", np.array([len(text)], dtype=np.int32))]))
        return out
"""
GEN_ECHO_CONFIG = """name: "gen_echo"
backend: "python"
max_batch_size: 0
input [ { name: "text_input" data_type: TYPE_STRING dims: [ 1 ] } ]
output [
  { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] },
  { name: "length" data_type: TYPE_INT32 dims: [ 1 ] }
]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from conftest import running_server
    repo = tmp_path_factory.mktemp("gen") / "repo"
    models.write_model(repo, "simple")
    models.write_model(repo, "identity_fp32")
    (repo / "gen_echo" / "1").mkdir(parents=True)
    (repo / "gen_echo" / "config.pbtxt").write_text(GEN_ECHO_CONFIG)
    (repo / "gen_echo" / "1" / "model.py").write_text(GEN_ECHO)
    shutil.copytree(ROOT / "examples" / "python" / "square_int32", repo / "square_int32")
    with running_server([repo], [], log_dir=tmp_path_factory.mktemp("gen_log"),
                        name="gen") as srv:
        yield srv


def generate(srv, model, body, path="generate"):
    r = post(srv.port, f"/v2/models/{model}/{path}",
             body if isinstance(body, bytes) else json.dumps(body).encode(),
             {"Content-Type": "application/json"})
    return r.status, r.body.decode()


def test_recorded_answer_for_missing_inputs(server):
    """Triton 2.51's answer to a generate request that names none of the model's inputs."""
    assert_matches_recorded(replay(server.port, "POST generate (not an LLM model)"),
                            "POST generate (not an LLM model)")


def test_onnx_model_lists_scalars_and_id(server):
    """simple's two INT32 [16] inputs as lists: its sums and differences as flat arrays, the
    id back, the keys sorted; identity_fp32 (batching, dims [-1]) takes a list and a scalar."""
    a, b = list(range(16)), [2] * 16
    status, body = generate(server, "simple", {"INPUT0": a, "INPUT1": b, "id": "g-1"})
    assert status == 200, body
    assert body == json.dumps({
        "OUTPUT0": [x + 2 for x in a], "OUTPUT1": [x - 2 for x in a], "id": "g-1",
        "model_name": "simple", "model_version": "1"}, separators=(",", ":"))
    status, body = generate(server, "identity_fp32", {"INPUT0": [1.5, -2, 3.25]})
    assert status == 200 and json.loads(body)["OUTPUT0"] == [1.5, -2.0, 3.25]
    status, body = generate(server, "identity_fp32", {"INPUT0": 7.5})
    assert status == 200 and json.loads(body)["OUTPUT0"] == 7.5  # one element: a bare value


def test_python_model_text_and_parameters(server):
    """A BYTES input given as a string and a BYTES output back as one; every member that is not
    an input, and those of "parameters", reach the model as request parameters."""
    status, body = generate(server, "gen_echo", {
        "text_input": "hello", "temperature": 0.5, "stream": False,
        "parameters": {"max_tokens": 12, "mode": "greedy"}})
    assert status == 200, body
    out = json.loads(body)
    assert out["length"] == 5 and out["model_name"] == "gen_echo"
    text, params = out["text_output"].split(" ", 1)
    assert text == "HELLO"
    assert json.loads(params) == {"temperature": 0.5, "stream": False, "max_tokens": 12,
                                  "mode": "greedy"}


def test_decoupled_model_needs_exactly_one_response(server):
    """square_int32 answers IN = 1 with one response: that is the answer; 2 responses or none
    get Triton's error."""
    status, body = generate(server, "square_int32", {"IN": 1})
    assert status == 200 and json.loads(body) == {"OUT": 1, "model_name": "square_int32",
                                                  "model_version": "1"}
    for n in (2, 0):
        status, body = generate(server, "square_int32", {"IN": n})
        assert status == 400
        assert json.loads(body) == {"error": "generate expects model to produce exactly 1 "
                                    "response, use generate stream for model that generates "
                                    "various number of responses"}


def test_errors(server):
    """A count the model's shape cannot hold, a value of the wrong type, a body that is not an
    object or not JSON, a parameter of no supported type, an unknown model."""
    assert generate(server, "gen_echo", {"text_input": ["a", "b"]}) == \
        (400, '{"error":"The schema can not convert input \'text_input\' to tensor with proper '
              'shape"}')
    status, body = generate(server, "gen_echo", {"text_input": 5})
    assert status == 400 and "attempt to access JSON non-string as string" in body
    assert generate(server, "simple", [1])[0] == 400
    status, body = generate(server, "simple", b"{nope")
    assert status == 500 and "failed to parse the request JSON buffer" in body
    status, body = generate(server, "gen_echo", {"text_input": "x", "odd": [1, 2]})
    assert status == 400 and json.loads(body) == {
        "error": "parameter 'odd' has invalid type. It should be either 'int', 'bool', or "
                 "'string'."}
    assert generate(server, "no_such_model", {})[0] == 404


# ---------------------------------------------------------------------------- generate_stream

# Decoupled: "first", then waits for the file GATE names, then "second" and the end; MODE 1
# raises after "first"; MODE 2 sends ticks until the client has left.
GATED = """import json, os, threading, time
import numpy as np
import triton_python_backend_utils as pb_utils


def text(s):
    return pb_utils.InferenceResponse([pb_utils.Tensor("text_output",
                                                       np.array([s.encode()], dtype=np.object_))])


class TritonPythonModel:
    def execute(self, requests):
        r = requests[0]
        gate = pb_utils.get_input_tensor_by_name(r, "GATE").as_numpy()[0].decode()
        mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
        sender = r.get_response_sender()
        sender.send(text("first"))
        if mode == 1:
            raise ValueError("broken after the first")
        if mode == 2:  # ticks until the client leaves (a write after it left tells the server)
            def ticks():
                for _ in range(3000):
                    if r.is_cancelled():
                        pb_utils.Logger.log_info("gated: the client left")
                        break
                    sender.send(text("tick"))
                    time.sleep(0.01)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            threading.Thread(target=ticks).start()
            return None

        def rest():
            for _ in range(3000):
                if os.path.exists(gate):
                    break
                time.sleep(0.01)
            sender.send(text("second"), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        threading.Thread(target=rest).start()
        return None
"""
GATED_CONFIG = """name: "gated"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "GATE" data_type: TYPE_STRING dims: [ 1 ] },
        { name: "MODE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "text_output" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def stream_server(tmp_path_factory):
    from conftest import running_server
    repo = tmp_path_factory.mktemp("gens") / "repo"
    (repo / "gated" / "1").mkdir(parents=True)
    (repo / "gated" / "config.pbtxt").write_text(GATED_CONFIG)
    (repo / "gated" / "1" / "model.py").write_text(GATED)
    models.write_model(repo, "simple")
    shutil.copytree(ROOT / "examples" / "python" / "square_int32", repo / "square_int32")
    with running_server([repo], [], log_dir=tmp_path_factory.mktemp("gens_log"),
                        name="gens") as srv:
        yield srv


def open_stream(srv, model, body):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("POST", f"/v2/models/{model}/generate_stream", json.dumps(body).encode(),
              {"Content-Type": "application/json"})
    return c, c.getresponse()


def next_event(resp):
    """The next server-sent event's JSON, or None at the end of the stream."""
    line = resp.readline()
    if not line:
        return None
    assert line.startswith(b"data: "), line
    assert resp.readline() == b"\n"
    return json.loads(line[6:])


def test_stream_events_as_they_come(stream_server, tmp_path):
    """Each response is an event the client reads while the model still works: the second
    comes only after the client, having read the first, opens the model's gate; then the
    stream ends. square_int32 gives n events; a non-decoupled model one."""
    gate = tmp_path / "gate"
    c, resp = open_stream(stream_server, "gated", {"GATE": str(gate), "MODE": 0})
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream; charset=utf-8"
    assert next_event(resp)["text_output"] == "first"
    gate.write_text("open")
    assert next_event(resp) == {"model_name": "gated", "model_version": "1",
                                "text_output": "second"}
    assert next_event(resp) is None
    c.close()
    c, resp = open_stream(stream_server, "square_int32", {"IN": 3})
    assert [next_event(resp) for _ in range(4)] == [
        {"OUT": 3, "model_name": "square_int32", "model_version": "1"}] * 3 + [None]
    c.close()
    c, resp = open_stream(stream_server, "simple", {"INPUT0": [1] * 16, "INPUT1": [1] * 16})
    assert next_event(resp)["OUTPUT0"] == [2] * 16 and next_event(resp) is None
    c.close()


def test_stream_errors_and_a_client_that_leaves(stream_server, tmp_path):
    """An error before the stream starts is an ordinary JSON answer; one after it an error
    event, then the end; a client that closes mid-stream is seen by the model's
    is_cancelled() (the server learns it when it writes the next events)."""
    c, resp = open_stream(stream_server, "simple", {"INPUT0": [1] * 3, "INPUT1": [1] * 16})
    assert resp.status == 400 and resp.getheader("Content-Type") == "application/json"
    assert "The schema can not convert input 'INPUT0'" in resp.read().decode()
    c.close()
    c, resp = open_stream(stream_server, "gated", {"GATE": str(tmp_path / "never"), "MODE": 1})
    assert next_event(resp)["text_output"] == "first"
    err = next_event(resp)
    assert err["error"].startswith("Failed to process the request(s) for model 'gated_0', "
                                   "message: ValueError: broken after the first")
    assert next_event(resp) is None
    c.close()
    c, resp = open_stream(stream_server, "gated", {"GATE": str(tmp_path / "never"), "MODE": 2})
    assert next_event(resp)["text_output"] == "first"
    assert next_event(resp)["text_output"] == "tick"
    c.close()  # gone while the ticks go on
    from e2e_util import wait_for
    wait_for(lambda: "gated: the client left" in stream_server.log, 30,
             "the model to see the client leave")
