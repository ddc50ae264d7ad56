"""Model repository: POST /v2/repository/index, load/unload in MODE_NONE, a broken model and an
invalid config.pbtxt next to good ones, --exit-on-error=true, the startup log and its
Model | Version | Status table."""

import json
import re

import pytest

import models
from e2e_util import (assert_empty, assert_error, assert_matches_recorded, compact, get,
                      infer_json, post, recorded, replay)
from models import DTYPE_MODELS

MAIN_READY = [("add_fp16", "1"), ("dyn_batch", "1"), ("identity_bytes", "1"),
              ("identity_fp32", "1"), ("order_test", "1"), ("simple", "1"),
              ("simple_noconfig", "1"), ("two_versions", "1"), ("two_versions", "2")] + \
    [(m, "1") for m in DTYPE_MODELS if m != "identity_fp32"]

GOOD_SIMPLE = recorded("simple JSON in/out (INT32 [1,16])")


def broken_reason(repo):
    """ORT's text for the garbage model.onnx, prefixed as Triton's ORT backend does."""
    return (f"Internal: onnx runtime error 7: Load model from {repo}/broken/1/model.onnx "
            "failed:Protobuf parsing failed.")


def main_index(repos, ready_only=False):
    rows = [{"name": n, "version": v, "state": "READY"} for n, v in MAIN_READY]
    if not ready_only:
        rows.append({"name": "broken", "version": "1", "state": "UNAVAILABLE",
                     "reason": broken_reason(repos["repo"])})
    return sorted(rows, key=lambda r: (r["name"], int(r["version"])))


def table(header, rows):
    """Triton's table printer: `+---+` borders, `| cell |` left-aligned, 1-space padding."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join([border, line(header), border] + [line(r) for r in rows] + [border])


def model_table_in(log):
    """The Model | Version | Status table as printed (lines from the border above the header to
    the closing border), or None."""
    lines = log.splitlines()
    for i, ln in enumerate(lines):
        if re.match(r"^\| Model +\| Version +\| Status +\|$", ln):
            end = i + 2
            while end < len(lines) and lines[end].startswith("| "):
                end += 1
            return "\n".join(lines[i - 1:end + 1])
    return None


def log_line(log, pattern):
    """A Triton-style log line `<I|W|E>MMDD hh:mm:ss.uuuuuu <pid> <file>:<line>] <msg>` whose
    message matches `pattern` (message optionally in double quotes, as Triton 2.51 prints it)."""
    rx = re.compile(r'^[IWEV]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.\-]+:\d+\] "?(' + pattern +
                    r')"?$', re.M)
    return rx.search(log)


# ----------------------------------------------------------------------------- index

def test_index_lists_every_model_with_state(main_server, repos):
    expected = compact(main_index(repos))
    for what in ("repository index, empty body", "repository index, empty body with Content-Length: 0",
                 "repository index {\"ready\":false}"):
        r = replay(main_server.port, what)
        assert r.status == 200 and r.header("Content-Type") == "application/json", r
        assert r.text == expected, what


def test_index_ready_only(main_server, repos):
    r = replay(main_server.port, 'repository index {"ready":true}')
    assert r.status == 200 and r.text == compact(main_index(repos, ready_only=True))


def test_index_recorded_subset(main_server, repos):
    """Restricted to the models Triton's main server had, the index is the recorded body."""
    rec = recorded("repository index, empty body")["body"].replace("<repos>/repo",
                                                                    str(repos["repo"]))
    names = {e["name"] for e in json.loads(rec)}
    got = [e for e in replay(main_server.port, "repository index, empty body").json()
           if e["name"] in names]
    assert compact(got) == rec


def test_index_small_server(small_server):
    r = post(small_server.port, "/v2/repository/index")
    assert r.status == 200
    assert r.text == ('[{"name":"identity_bytes","version":"1","state":"READY"},'
                      '{"name":"identity_fp32","version":"1","state":"READY"},'
                      '{"name":"order_test","version":"1","state":"READY"},'
                      '{"name":"simple","version":"1","state":"READY"}]')


def test_index_malformed_json_is_400(main_server):
    assert_matches_recorded(replay(main_server.port, "repository index malformed JSON"),
                            "repository index malformed JSON", status=400)


def test_index_wrong_method(main_server):
    assert_matches_recorded(replay(main_server.port, "repository index GET (wrong method)"),
                            "repository index GET (wrong method)")


@pytest.mark.parametrize("what", [
    "repository load simple (MODE_NONE)", "repository unload simple (MODE_NONE)",
    "repository load simple with JSON body", "repository load unknown model",
    "repository unload unknown model",
])
def test_load_unload_refused_in_mode_none(main_server, what):
    r = replay(main_server.port, what)
    assert_matches_recorded(r, what)
    assert_error(r, 503, "explicit model load / unload is not allowed if polling is enabled")


def test_unload_refused_keeps_model(main_server):
    post(main_server.port, "/v2/repository/models/simple/unload",
         b'{"parameters":{"unload_dependents":false}}', {"Content-Type": "application/json"})
    assert_empty(get(main_server.port, "/v2/models/simple/ready"), 200)


# ----------------------------------------------------------------------------- failures at load

def test_broken_model_leaves_others_serving(main_server):
    p = main_server.port
    r = replay(p, "simple JSON in/out (INT32 [1,16])")
    assert r.status == 200 and r.text == GOOD_SIMPLE["body"]
    assert_error(get(p, "/v2/models/broken"), 404,
                 "Request for unknown model: 'broken' has no available versions")
    assert_error(get(p, "/v2/models/broken/ready"), 400, "Model version not ready")
    assert_empty(get(p, "/v2/health/ready"), 400)
    assert_empty(get(p, "/v2/health/live"), 200)


def test_invalid_config_leaves_others_serving(server_factory, repos):
    srv = server_factory([repos["repo_badcfg"]], ["--exit-on-error=false"], name="badcfg")
    r = replay(srv.port, "simple JSON in/out (INT32 [1,16])")
    assert r.status == 200 and r.text == GOOD_SIMPLE["body"]
    assert_error(get(srv.port, "/v2/models/bad_config/ready"), 400, "Model version not ready")
    md = get(srv.port, "/v2/models/bad_config")
    assert md.status == 404, md
    assert md.json()["error"].startswith("Request for unknown model: 'bad_config'"), md.body
    assert "bad_config" in srv.log and "config.pbtxt" in srv.log, srv.log_tail()
    assert re.search(r"^E\d{4} .*bad_config", srv.log, re.M), srv.log_tail()


SEQ_REASON = ("Unsupported: sequence batching is not supported by nereid (the model "
              "configuration sets 'sequence_batching')")


def test_sequence_batching_refused_at_load(server_factory, tmp_path):
    """nereid has no sequence batcher: a model with sequence_batching fails to load, plainly
    (it used to load READY and fail every request with ONNX Runtime's 'Missing Input: START'),
    in the index, the model table and the log, in Triton's formats."""
    repo = tmp_path / "repo"
    models.write_model(repo, "simple")
    models.write_sequence_identity(repo, "seq")
    srv = server_factory([repo], ["--exit-on-error=false"], name="seq")
    index = post(srv.port, "/v2/repository/index", b"").json()
    assert {"name": "seq", "version": "1", "state": "UNAVAILABLE", "reason": SEQ_REASON} in index
    assert model_table_in(srv.log) == table(["Model", "Version", "Status"],
                                            [["seq", "1", "UNAVAILABLE: " + SEQ_REASON],
                                             ["simple", "1", "READY"]]), srv.log_tail()
    assert log_line(srv.log, re.escape(f"failed to load 'seq' version 1: {SEQ_REASON}")), \
        srv.log_tail()
    r = infer_json(srv.port, "seq", {"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                                 "shape": [1, 1], "data": [1.0]}]})
    assert_error(r, 404, "Request for unknown model: 'seq' has no available versions")


def test_exit_on_error_true_exits_after_table(server_factory, repos):
    srv = server_factory([repos["repo_broken"]], ["--exit-on-error=true"], expect_rc=None,
                         wait=False, name="exit_on_error")
    rc = srv.wait_exit(60)
    assert rc is not None, "server still running with --exit-on-error=true and a broken model\n" \
        + srv.describe()
    assert rc == 1, srv.describe()
    log = srv.log
    tbl = model_table_in(log)
    assert tbl == table(["Model", "Version", "Status"],
                        [["broken", "1", "UNAVAILABLE: " + broken_reason(repos["repo_broken"])],
                         ["simple", "1", "READY"]]), log
    assert "error: creating server: Internal - failed to load all models" in log
    assert log.index(tbl) < log.index("error: creating server:")
    assert "Started HTTPService" not in log


def test_exit_on_error_default_is_true(server_factory, repos):
    srv = server_factory([repos["repo_broken"]], [], expect_rc=None, wait=False, name="default")
    assert srv.wait_exit(60) == 1, srv.describe()


# ----------------------------------------------------------------------------- startup log

def test_startup_model_table(main_server, repos):
    rows = []
    for name, version in sorted(MAIN_READY + [("broken", "1")]):
        status = "READY" if name != "broken" else "UNAVAILABLE: " + broken_reason(repos["repo"])
        rows.append([name, version, status])
    expected = table(["Model", "Version", "Status"], rows)
    assert model_table_in(main_server.log) == expected, main_server.log_tail(200)


def test_startup_log_lines(main_server):
    log = main_server.log
    for pattern in (r"loading: simple:1", r"loading: two_versions:2",
                    r"successfully loaded 'simple'( version 1)?",
                    r"successfully loaded 'two_versions'( version [12])?",
                    r"successfully loaded 'identity_bf16'( version 1)?",
                    r"'simple' version 1 loaded in \d+\.\d ms \(session, instances and warmup\)",
                    r"failed to load 'broken' version 1: Internal: onnx runtime error 7: "
                    r"Load model from .*/broken/1/model\.onnx failed:Protobuf parsing failed\."):
        assert log_line(log, pattern), (pattern, main_server.log_tail(200))
    m = log_line(log, rf"Started HTTPService at [\d.]+:{main_server.port}")
    assert m, main_server.log_tail()
    assert m.start() > log.index("| Model "), "endpoints start after the models are loaded"


def test_startup_small_table(small_server):
    expected = table(["Model", "Version", "Status"],
                     [["identity_bytes", "1", "READY"], ["identity_fp32", "1", "READY"],
                      ["order_test", "1", "READY"], ["simple", "1", "READY"]])
    assert model_table_in(small_server.log) == expected, small_server.log_tail()


def test_two_repositories_serve_together(main_server):
    r = infer_json(main_server.port, "identity_int8",
                   {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "INT8",
                                "data": [-128, 127]}]})
    assert r.status == 200 and r.json()["outputs"][0]["data"] == [-128, 127]
