"""gRPC, replayed from Triton 2.51's recorded answers (tests/e2e/data/triton_grpc.jsonl): every
recorded call is sent unchanged through the generated stub of tritonclient.grpc (as the recording
was made) and the answer is compared with Triton's: the status code and details for errors, the
response in protobuf text format otherwise.

Where the answers cannot be the same bytes, the test says why and compares what can be compared:
statistics (durations and counts depend on what ran before), the server version and extension list
(nereid lists what it serves), the repository index (this repository also holds order_test and the
per-datatype models; the broken model's reason names this machine's path).
"""

import json
import re
from functools import lru_cache
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from tritonclient.grpc import service_pb2, service_pb2_grpc

DATA = Path(__file__).resolve().parent / "data" / "triton_grpc.jsonl"


@lru_cache(maxsize=1)
def entries():
    return [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]


def entry(what):
    for e in entries():
        if e["what"] == what:
            return e
    raise KeyError(what)


def rpc_name(e):
    return e["rpc"].rsplit("/", 1)[1]


def request_of(e):
    name = rpc_name(e)
    msg = getattr(service_pb2, f"{name}Request")()
    text_format.Parse(e["request_text"], msg)
    return msg


@pytest.fixture(scope="module")
def stub(main_server):
    ch = grpc.insecure_channel(main_server.grpc_url)
    yield service_pb2_grpc.GRPCInferenceServiceStub(ch)
    ch.close()


def call(stub, e):
    """(ok, status code name, details, response) for the recorded request of e."""
    try:
        resp = getattr(stub, rpc_name(e))(request_of(e), timeout=60)
        return True, "OK", "", resp
    except grpc.RpcError as err:
        return False, err.code().name, err.details(), None


SERVER_SPECIFIC = {"ServerMetadata", "ModelStatistics simple (before gRPC inferences)",
                   "ModelStatistics simple (after gRPC inferences)", "ModelStatistics all models",
                   "RepositoryIndex", "RepositoryIndex ready=true"}
SECOND_SERVER = {"order_test ModelInfer (gRPC), no outputs requested",
                 "order_test ModelInfer (gRPC), outputs requested as [ZZZ, MMM, AAA]"}
EXACT = [e["what"] for e in entries() if e["what"] not in SERVER_SPECIFIC]
# nereid's deliberate departures (spec/triton-answers/README.md): BYTES elements are kept whole,
# where Triton's ONNX Runtime backend cuts them at the first NUL.
DEPARTURES = {
    "ModelInfer identity_bytes bytes_contents":
        [("\\001\\000\\000\\000\\377\"", "\\003\\000\\000\\000\\377\\000z\"")],
}


@pytest.mark.parametrize("what", EXACT)
def test_recorded_call(stub, main_server, what):
    """Same status, same details; for answers, the same protobuf text."""
    e = entry(what)
    ok, code, details, resp = call(stub, e)
    assert code == e["status_code"], (what, details)
    if not e["ok"]:
        assert details == e["message"], what
        return
    expected = e["response_text"]
    for old, new in DEPARTURES.get(what, []):
        assert old in expected
        expected = expected.replace(old, new)
    assert str(resp) == expected, what


def test_server_metadata(stub):
    resp = stub.ServerMetadata(service_pb2.ServerMetadataRequest())
    rec = service_pb2.ServerMetadataResponse()
    text_format.Parse(entry("ServerMetadata")["response_text"], rec)
    assert resp.name == rec.name == "triton"
    assert re.fullmatch(r"\d+\.\d+\.\d+", resp.version)
    # nereid lists what it serves, in Triton's order: a subsequence of Triton's list
    triton = list(rec.extensions)
    positions = [triton.index(x) for x in resp.extensions]
    assert positions == sorted(positions)
    assert "statistics" in resp.extensions  # what perf_analyzer looks for


def test_statistics_layout(stub):
    """Every field Triton sends is there (perf_analyzer reads them all); empty durations are
    present as empty messages, as recorded (`fail {}`, `cache_hit {}`)."""
    rec = service_pb2.ModelStatisticsResponse()
    text_format.Parse(entry("ModelStatistics simple (after gRPC inferences)")["response_text"], rec)
    resp = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name="simple"))
    assert len(resp.model_stats) == 1
    got, want = resp.model_stats[0], rec.model_stats[0]
    assert (got.name, got.version) == (want.name, want.version)
    for f in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output",
              "cache_hit", "cache_miss"):
        assert got.inference_stats.HasField(f), f
    assert got.inference_stats.queue.count == got.inference_stats.success.count
    every = stub.ModelStatistics(service_pb2.ModelStatisticsRequest())
    names = [(m.name, m.version) for m in every.model_stats]
    assert names == sorted(names) and ("simple", "1") in names and ("broken", "1") not in names


def test_repository_index(stub, repos):
    resp = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest())
    rec = service_pb2.RepositoryIndexResponse()
    text_format.Parse(entry("RepositoryIndex")["response_text"], rec)
    recorded_names = {m.name for m in rec.models}
    got = [m for m in resp.models if m.name in recorded_names]
    for g, w in zip(got, rec.models, strict=True):
        assert (g.name, g.version, g.state) == (w.name, w.version, w.state)
        assert g.reason == w.reason.replace("<repos>/repo", str(repos["repo"]))
    ready = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=True))
    assert all(m.state == "READY" for m in ready.models)
    assert "broken" not in {m.name for m in ready.models}
