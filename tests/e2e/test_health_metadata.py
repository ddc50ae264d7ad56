"""Health, readiness, server and model metadata, version routes and the router's 404/405 answers.

Expected texts are Triton 2.51's recorded answers (tests/e2e/data/triton_http.jsonl, a copy of
spec/triton-answers/http.jsonl), looked up by their `what`. Where nereid departs on purpose
(JSON bodies labelled application/json) the helpers in e2e_util say so.
"""

import json
import re

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from e2e_util import (assert_empty, assert_error, assert_matches_recorded, compact, get, post,
                      post_json, replay, request)
from models import DTYPE_MODELS

TRITON_EXTENSIONS = ["classification", "sequence", "model_repository",
                     "model_repository(unload_dependents)", "schedule_policy",
                     "model_configuration", "system_shared_memory", "cuda_shared_memory",
                     "binary_tensor_data", "parameters", "statistics", "trace", "logging"]

READY_MODELS = [("add_fp16", "1"), ("dyn_batch", "1"), ("identity_bytes", "1"),
                ("identity_fp32", "1"), ("order_test", "1"), ("simple", "1"),
                ("simple_noconfig", "1"), ("two_versions", "1"), ("two_versions", "2")]


# ----------------------------------------------------------------------------- health

def test_live(main_server):
    assert_empty(get(main_server.port, "/v2/health/live"), 200)


def test_live_query_string_ignored(main_server):
    assert_matches_recorded(replay(main_server.port, "GET unknown/odd path /v2/health/live?verbose=1"),
                            "GET unknown/odd path /v2/health/live?verbose=1")


def test_ready_is_400_while_a_model_failed(main_server):
    # strict readiness (default) and `broken` failed to load: 400, empty body
    assert_matches_recorded(get(main_server.port, "/v2/health/ready"),
                            "server ready (one model, 'broken', failed to load; strict_readiness=1)")


def test_ready_is_200_when_every_model_loaded(small_server):
    assert_matches_recorded(get(small_server.port, "/v2/health/ready"),
                            "server ready when every model loaded")
    assert_empty(get(small_server.port, "/v2/health/live"), 200)


def test_head_live_is_405(main_server):
    r = request(main_server.port, "HEAD", "/v2/health/live")
    assert r.status == 405 and r.body == b""


@pytest.mark.parametrize("what", [
    "POST health/live", "POST server metadata", "POST model metadata", "POST model config",
    "POST stats", "DELETE model", "DELETE infer", "GET infer", "PUT infer",
    "repository index GET (wrong method)", "repository load, GET (wrong method)",
    "GET unknown/odd path /v2/models/simple/generate",
])
def test_wrong_method_is_405(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)
    assert replay(main_server.port, what).body == b'{"error":"Method Not Allowed"}'


@pytest.mark.parametrize("path", [
    "/", "/v1", "/v2/foo", "/v2/models", "/v2/models/", "/v2/health", "/v2/health/foo",
    "/v2/models/simple/foo", "/v2/models/simple/versions/1/foo", "/metrics", "/V2/health/live",
    "/v2//health/live",
])
def test_unknown_path_is_404(main_server, path):
    what = f"GET unknown/odd path {path}"
    assert_matches_recorded(replay(main_server.port, what), what)


@pytest.mark.parametrize("what", [
    "server metadata, trailing slash", "model metadata simple non-numeric version 'abc'",
    "model metadata simple version -1", "model metadata simple empty version",
    "model metadata with trailing slash",
])
def test_route_mismatch_is_404_not_found(main_server, what):
    r = replay(main_server.port, what)
    assert_matches_recorded(r, what)
    assert r.body == b'{"error":"Not Found"}'


# ----------------------------------------------------------------------------- server metadata

def test_server_metadata(main_server):
    r = get(main_server.port, "/v2")
    assert r.status == 200 and r.header("Content-Type") == "application/json"
    md = r.json()
    assert list(md) == ["name", "version", "extensions"], r.text
    assert md["name"] == "triton"  # --id default
    assert isinstance(md["version"], str) and md["version"]
    ext = md["extensions"]
    for needed in ("binary_tensor_data", "statistics", "model_repository", "model_configuration"):
        assert needed in ext, ext
    unknown = [e for e in ext if e not in TRITON_EXTENSIONS]
    assert not unknown, f"extension names Triton never reports: {unknown}"
    assert len(set(ext)) == len(ext)
    assert r.text == compact(md)  # compact JSON, no spaces


# ----------------------------------------------------------------------------- model ready

@pytest.mark.parametrize("model,version", READY_MODELS)
def test_model_ready(main_server, model, version):
    assert_empty(get(main_server.port, f"/v2/models/{model}/ready"), 200)
    assert_empty(get(main_server.port, f"/v2/models/{model}/versions/{version}/ready"), 200)


@pytest.mark.parametrize("model", sorted(m for m in DTYPE_MODELS if m != "identity_fp32"))
def test_model_ready_second_repository(main_server, model):
    assert_empty(get(main_server.port, f"/v2/models/{model}/ready"), 200)


@pytest.mark.parametrize("what", [
    "model ready broken", "model ready broken version 1", "model ready nosuchmodel",
    "model ready nosuchmodel version 1", "model ready simple unknown version 7",
])
def test_model_not_ready_is_400(main_server, what):
    r = replay(main_server.port, what)
    assert_matches_recorded(r, what)
    assert_error(r, 400, "Model version not ready")


# ----------------------------------------------------------------------------- model metadata

@pytest.mark.parametrize("what", [
    "model metadata simple", "model metadata simple version 1",
    "model metadata identity_fp32", "model metadata identity_fp32 version 1",
    "model metadata simple_noconfig", "model metadata simple_noconfig version 1",
    "model metadata identity_bytes", "model metadata identity_bytes version 1",
    "model metadata add_fp16", "model metadata add_fp16 version 1",
    "model metadata two_versions", "model metadata two_versions version 1",
    "model metadata two_versions version 2",
    "model metadata dyn_batch", "model metadata dyn_batch version 1",
    "model metadata with query string",
    "GET metadata with Accept-Encoding: gzip (not compressed?)",
])
def test_model_metadata_recorded(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


@pytest.mark.parametrize("what", ["GET trace setting (global)", "GET trace setting (simple)"])
def test_trace_settings_recorded(main_server, what):
    """No --trace-config: the settings read as Triton's with tracing off (test_trace.py has
    the rest)."""
    assert_matches_recorded(replay(main_server.port, what), what)


def test_model_metadata_order_test_lists_config_order(main_server):
    what = "order_test metadata (graph outputs ZZZ,AAA,MMM; config outputs MMM,ZZZ,AAA)"
    assert_matches_recorded(replay(main_server.port, what), what)


def test_model_metadata_batching_and_versions(main_server):
    md = get(main_server.port, "/v2/models/two_versions").json()
    assert md["versions"] == ["1", "2"]          # strings, every READY version
    assert md["inputs"][0]["shape"] == [-1, -1]  # leading -1 for max_batch_size > 0
    md = get(main_server.port, "/v2/models/add_fp16").json()
    assert md["inputs"][0]["shape"] == [4]       # max_batch_size 0: no batch dim
    assert md["platform"] == "onnxruntime_onnx"


@pytest.mark.parametrize("model", sorted(m for m in DTYPE_MODELS if m != "identity_fp32"))
def test_model_metadata_datatypes(main_server, model):
    kserve = DTYPE_MODELS[model][0]
    t = f'{{"name":"INPUT0","datatype":"{kserve}","shape":[-1,-1]}}'
    expected = (f'{{"name":"{model}","versions":["1"],"platform":"onnxruntime_onnx",'
                f'"inputs":[{t}],"outputs":[{t.replace("INPUT0", "OUTPUT0")}]}}')
    r = get(main_server.port, f"/v2/models/{model}")
    assert r.status == 200 and r.text == expected


@pytest.mark.parametrize("what", [
    "model metadata nosuchmodel", "model metadata nosuchmodel version 1",
    "model metadata simple unknown version 7", "model metadata simple version 0",
    "model metadata broken", "model metadata broken version 1",
])
def test_model_metadata_errors(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


def test_unknown_model_text(main_server):
    assert_error(get(main_server.port, "/v2/models/nosuchmodel"), 404,
                 "Request for unknown model: 'nosuchmodel' is not found")
    assert_error(get(main_server.port, "/v2/models/broken"), 404,
                 "Request for unknown model: 'broken' has no available versions")
    assert_error(get(main_server.port, "/v2/models/broken/versions/1"), 503,
                 "Request for unknown model: 'broken' version 1 is not at ready state")


# ----------------------------------------------------------------------------- logging

def test_logging_get_as_recorded(small_server):
    assert_matches_recorded(get(small_server.port, "/v2/logging"), "GET logging")


def test_logging_update_shared_with_grpc(server_factory, repos):
    """tritonclient.http updates the settings; the answer is the settings after the update,
    gRPC's LogSettings reads the same ones, and the log's lines change format."""
    srv = server_factory([repos["repo_small"]])
    client = httpclient.InferenceServerClient(srv.url)
    assert client.get_log_settings() == {
        "log_file": "", "log_info": True, "log_warning": True, "log_error": True,
        "log_verbose_level": 0, "log_format": "default"}
    after = client.update_log_settings({"log_verbose_level": 1, "log_warning": False,
                                        "log_format": "ISO8601", "custom": 5})
    assert after == {"log_file": "", "log_info": True, "log_warning": False, "log_error": True,
                     "log_verbose_level": 1, "log_format": "ISO8601"}
    if srv.grpc_port is not None:
        s = grpcclient.InferenceServerClient(srv.grpc_url).get_log_settings().settings
        assert (s["log_verbose_level"].uint32_param, s["log_warning"].bool_param,
                s["log_format"].string_param) == (1, False, "ISO8601")
    # null changes nothing
    assert client.update_log_settings({"log_verbose_level": None})["log_verbose_level"] == 1
    # the lines written from now on are in ISO 8601 format
    assert srv.stop() == 0
    line = next(x for x in srv.log.splitlines() if "Signal (15) received." in x)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ main\.c:\d+\] ", line), line


@pytest.mark.parametrize("body,status,msg", [
    ({"log_file": "/tmp/x.log"}, 501,
     "log file location can not be updated through network protocol"),
    ({"log_info": "yes"}, 500, "attempt to access JSON non-boolean as boolean"),
    ({"log_verbose_level": -1}, 500,
     "attempt to access JSON non-unsigned-integer as unsigned-integer"),
    ({"log_format": 7}, 500, "attempt to access JSON non-string as string"),
    ({"log_format": "json"}, 503, "invalid argument for --log_format, got: json"),
])
def test_logging_update_errors(server_factory, repos, body, status, msg):
    srv = server_factory([repos["repo_small"]])
    assert_error(post_json(srv.port, "/v2/logging", body), status, msg)
    assert get(srv.port, "/v2/health/ready").status == 200


def test_logging_update_in_tritons_order(server_factory, repos):
    """Triton looks the keys up in its own order and applies each before the next: log_info
    (before log_format) is applied although the format is refused."""
    srv = server_factory([repos["repo_small"]])
    r = post(srv.port, "/v2/logging", b'{"log_format":"xml","log_info":false}')
    assert_error(r, 503, "invalid argument for --log_format, got: xml")
    assert json.loads(get(srv.port, "/v2/logging").text)["log_info"] is False


def test_logging_bad_requests(small_server):
    assert_error(post(small_server.port, "/v2/logging", b"{"), 400,
                 "failed to parse the request JSON buffer: Missing a name for object member. "
                 "at 1")
    assert_error(request(small_server.port, "PUT", "/v2/logging", b"{}"), 405,
                 "Method Not Allowed")
    r = post(small_server.port, "/v2/logging", b"[1,2]")  # not an object: nothing to apply
    assert r.status == 200 and json.loads(r.text)["log_verbose_level"] == 0
