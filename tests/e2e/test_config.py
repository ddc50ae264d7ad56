"""GET /v2/models/<m>[/versions/<v>]/config: the ModelConfig JSON, byte for byte as Triton 2.51
printed it (recorded bodies in data/triton_http.jsonl), and auto-complete of simple_noconfig."""

import re

import pytest

from e2e_util import (assert_error, assert_json_ok, assert_matches_recorded, get, infer_json,
                      recorded, replay)
from models import DTYPE_MODELS


@pytest.mark.parametrize("what", [
    "model config simple", "model config simple version 1", "model config identity_fp32",
    "model config identity_bytes", "model config add_fp16", "model config two_versions",
    "model config dyn_batch",
])
def test_config_recorded(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


def test_config_simple_exact_text(main_server):
    # spelled out once so the expectation is visible here, not only in the data file
    expected = (
        '{"name":"simple","platform":"onnxruntime_onnx","backend":"onnxruntime","runtime":"",'
        '"version_policy":{"latest":{"num_versions":1}},"max_batch_size":8,'
        '"input":[{"name":"INPUT0","data_type":"TYPE_INT32","format":"FORMAT_NONE","dims":[16],'
        '"is_shape_tensor":false,"allow_ragged_batch":false,"optional":false,'
        '"is_non_linear_format_io":false},{"name":"INPUT1","data_type":"TYPE_INT32",'
        '"format":"FORMAT_NONE","dims":[16],"is_shape_tensor":false,"allow_ragged_batch":false,'
        '"optional":false,"is_non_linear_format_io":false}],'
        '"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16],"label_filename":"",'
        '"is_shape_tensor":false,"is_non_linear_format_io":false},{"name":"OUTPUT1",'
        '"data_type":"TYPE_INT32","dims":[16],"label_filename":"","is_shape_tensor":false,'
        '"is_non_linear_format_io":false}],"batch_input":[],"batch_output":[],'
        '"optimization":{"priority":"PRIORITY_DEFAULT","input_pinned_memory":{"enable":true},'
        '"output_pinned_memory":{"enable":true},"gather_kernel_buffer_threshold":0,'
        '"eager_batching":false},"instance_group":[{"name":"simple_0","kind":"KIND_CPU",'
        '"count":1,"gpus":[],"secondary_devices":[],"profile":[],"passive":false,'
        '"host_policy":""}],"default_model_filename":"model.onnx","cc_model_filenames":{},'
        '"metric_tags":{},"parameters":{},"model_warmup":[]}')
    assert expected == recorded("model config simple")["body"]
    assert_json_ok(get(main_server.port, "/v2/models/simple/config"), expected)


def test_config_autocomplete_simple_noconfig(main_server):
    """No config.pbtxt: max_batch_size 4, dynamic_batching {preferred_batch_size [4]}, 2 CPU
    instances (group named after the model), inputs/outputs in the order INPUT1, INPUT0 /
    OUTPUT1, OUTPUT0 (README, 'simple_noconfig')."""
    what = "model config simple_noconfig"
    assert_matches_recorded(replay(main_server.port, what), what)
    cfg = get(main_server.port, "/v2/models/simple_noconfig/config").json()
    assert cfg["max_batch_size"] == 4
    assert [i["name"] for i in cfg["input"]] == ["INPUT1", "INPUT0"]
    assert [o["name"] for o in cfg["output"]] == ["OUTPUT1", "OUTPUT0"]
    assert cfg["dynamic_batching"]["preferred_batch_size"] == [4]
    assert cfg["instance_group"][0]["count"] == 2


def test_autocomplete_logs_max_batch_size_warning(main_server):
    assert re.search(r"^W\d{4} .*autofilled max_batch_size to 4 for model 'simple_noconfig'",
                     main_server.log, re.M), main_server.log_tail()


def test_autocompleted_batch_limit_enforced(main_server):
    what = "simple_noconfig batch 5 > autofilled max_batch_size 4"
    assert_matches_recorded(replay(main_server.port, what), what)
    ok = {"inputs": [{"name": n, "shape": [4, 16], "datatype": "INT32", "data": [1] * 64}
                     for n in ("INPUT0", "INPUT1")]}
    r = infer_json(main_server.port, "simple_noconfig", ok)
    assert r.status == 200, r


def _identity_fp32_config():
    return recorded("model config identity_fp32")["body"]


def test_config_order_test(main_server):
    """Outputs in config order (MMM, ZZZ, AAA); derived from identity_fp32's recorded body."""
    out = ('{"name":"%s","data_type":"TYPE_FP32","dims":[-1],"label_filename":"",'
           '"is_shape_tensor":false,"is_non_linear_format_io":false}')
    base = _identity_fp32_config().replace("identity_fp32", "order_test")
    expected = base.replace(out % "OUTPUT0", ",".join(out % n for n in ("MMM", "ZZZ", "AAA")))
    assert expected != base
    assert_json_ok(get(main_server.port, "/v2/models/order_test/config"), expected)


@pytest.mark.parametrize("model", sorted(m for m in DTYPE_MODELS if m != "identity_fp32"))
def test_config_datatypes(main_server, model):
    enum = DTYPE_MODELS[model][1]
    expected = (_identity_fp32_config().replace("identity_fp32", model)
                .replace('"TYPE_FP32"', f'"{enum}"'))
    assert_json_ok(get(main_server.port, f"/v2/models/{model}/config"), expected)


@pytest.mark.parametrize("what", [
    "model config nosuchmodel", "model config broken", "model config simple unknown version 7",
])
def test_config_errors(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


def test_config_two_versions_by_version(main_server):
    body = recorded("model config two_versions")["body"]
    for v in ("1", "2"):
        assert_json_ok(get(main_server.port, f"/v2/models/two_versions/versions/{v}/config"), body)
    assert_error(get(main_server.port, "/v2/models/two_versions/versions/3/config"), 404,
                 "Request for unknown model: 'two_versions' version 3 is not found")
