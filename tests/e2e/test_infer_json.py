"""JSON inference on every test model. Results are compared with onnxruntime's Python API run on
the same model file and inputs; recorded exchanges (data/triton_http.jsonl) are compared byte for
byte: number formatting, key order, output order (sorted by name), id echo, output selection."""

import json
import math
import re
import zlib

import numpy as np
import pytest

import grisu
from e2e_util import (_recordings, assert_error, assert_json_ok, assert_matches_recorded,
                      binary_request, infer_json, ort_run, post, recorded, replay)
from models import DTYPE_MODELS

RNG_SEED = 20261202


@pytest.fixture(scope="module")
def model_file(repos):
    def path(name, version=1):
        repo = "repo_dtypes" if name in DTYPE_MODELS and name != "identity_fp32" else "repo"
        return repos[repo] / name / str(version) / "model.onnx"
    return path


def _tensor(name, arr, datatype):
    return {"name": name, "shape": list(arr.shape), "datatype": datatype,
            "data": arr.ravel().tolist()}


def _outputs(resp):
    assert resp.status == 200, resp
    assert resp.header("Content-Type") == "application/json", resp.headers
    body = resp.json()
    return body, {o["name"]: o for o in body["outputs"]}


# ----------------------------------------------------------------------------- recorded texts

@pytest.mark.parametrize("what", [
    "simple JSON in/out (INT32 [1,16])",
    "simple JSON, no Content-Type header",
    "simple JSON, Content-Type text/plain",
    "simple JSON, batch 2 with nested data arrays",
    "simple JSON, data nested wrongly (shape [2,16], data as [[..32..]])",
    "simple JSON, batch 8 (== max_batch_size)",
    "simple with request id",
    "simple with empty request id",
    "simple selecting one output (OUTPUT1)",
    "simple outputs in reverse order",
    "simple with empty outputs array",
    "simple with parameters priority/timeout",
    "simple with custom request parameters (string/bool/int/double)",
    "simple with timeout 1 microsecond",
    "simple with sequence_id on a non-sequence model",
    "simple with per-input parameters (unknown)",
    "simple binary_data_output:true but OUTPUT1 binary_data:false",
    "simple binary_data_output:false explicitly",
    "simple infer version 1 path",
    "error probe: duplicate output names",
    "error probe: triton_-prefixed per-input parameter",
    "identity_fp32 JSON FP32 formatting of assorted values",
    "identity_fp32 JSON integers given for FP32",
    "identity_fp32 JSON value beyond FP32 range (1e39)",
    "identity_fp32 JSON NaN literal (invalid JSON)",
    "identity_fp32 JSON batch 2 shape [2,3]",
    "zero dim [1,0] on identity_fp32",
    "zero dim [1,0] on identity_fp32, binary out",
    "identity_fp32 classification:2 on OUTPUT0 (batch 1)",
    "identity_fp32 classification:2 (batch 2)",
    "identity_fp32 classification:10 (more than elements)",
    "identity_fp32 classification:0",
    "identity_fp32 classification:2 with ties",
    "simple (INT32) classification:3 on OUTPUT0",
    "identity_bytes JSON in/out",
    "identity_bytes JSON nested batch 2",
    "two_versions infer without version (v2 doubles input)",
    "two_versions infer version 1 (identity)",
    "two_versions infer version 2 (doubles)",
    "dyn_batch infer (dynamic batcher, 2 instances)",
    "simple_noconfig infer (autocompleted)",
    "order_test infer, no outputs requested",
    "order_test infer, outputs requested as [ZZZ, MMM, AAA]",
])
def test_recorded_exchange(main_server, what):
    assert_matches_recorded(replay(main_server.port, what), what)


def test_fp32_formatting_exact_text(main_server):
    """FP32 is widened to double and printed shortest-round-trip (rapidjson style)."""
    req = {"inputs": [{"name": "INPUT0", "shape": [1, 16], "datatype": "FP32", "data": [
        0.1, 1.5, -2.25, 1e-07, 3.4028234663852886e+38, 16777217, 0.3333333333333333, -0.0,
        1e-45, 100, 10000000000.0, 123456789, 0.0025, 65504, 1.0, 0.0]}]}
    expected = (
        '{"model_name":"identity_fp32","model_version":"1","outputs":[{"name":"OUTPUT0",'
        '"datatype":"FP32","shape":[1,16],"data":[0.10000000149011612,1.5,-2.25,'
        '1.0000000116860974e-7,3.4028234663852887e38,16777216.0,0.3333333432674408,-0.0,'
        '1.401298464324817e-45,100.0,10000000000.0,123456792.0,0.0024999999441206457,65504.0,'
        '1.0,0.0]}]}')
    assert expected == recorded("identity_fp32 JSON FP32 formatting of assorted values")["body"]
    assert_json_ok(infer_json(main_server.port, "identity_fp32", req), expected)


def test_grisu_reference_matches_recordings():
    """The formatting reference (grisu.py, RapidJSON's Grisu2 as Triton vendors it) reproduces
    every FP32 number Triton wrote in the recorded answers, digit for digit."""
    tokens = []
    for e in _recordings().values():
        for m in re.finditer(r'"datatype":"FP32","shape":\[[\d,]*\],"data":\[([^\]]*)\]',
                             e.get("body") or ""):
            tokens += [t for t in m.group(1).split(",") if t]
    assert len(tokens) > 40
    assert "0.30000001192092898" in tokens  # Grisu2, not the closest 17-digit string (...896)
    for t in tokens:
        v = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(t)
        assert grisu.dumps_double(float(t) if v is None else v) == t


def _fp_text_case(main_server, model, kserve, np_t, values):
    x = np.asarray(values, dtype=np_t).reshape(1, -1)
    head = {"inputs": [{"name": "INPUT0", "shape": list(x.shape), "datatype": kserve,
                        "parameters": {"binary_data_size": x.nbytes}}]}
    body, hdrs = binary_request(head, [x.tobytes()])
    r = post(main_server.port, f"/v2/models/{model}/infer", body, hdrs)
    data = ",".join(grisu.dumps_double(float(v)) for v in x.ravel())
    expected = (f'{{"model_name":"{model}","model_version":"1","outputs":[{{"name":"OUTPUT0",'
                f'"datatype":"{kserve}","shape":[1,{x.size}],"data":[{data}]}}]}}')
    assert_json_ok(r, expected)


def _random_floats(rng, bits, n):
    raw = rng.integers(0, 2**bits, size=n, dtype=np.uint64)
    f = raw.astype(np.uint32).view(np.float32) if bits == 32 else raw.view(np.float64)
    return f[np.isfinite(f)]


def test_fp32_json_text_random(main_server):
    """FP32 outputs written as RapidJSON writes the widened double (raw text compared)."""
    rng = np.random.default_rng(RNG_SEED + 32)
    human = [k / 10 ** j for k in range(1, 40, 3) for j in range(0, 9)]
    specials = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-45, 1.17549435e-38, 3.4028235e38,
                16777217, 0.3, 1e21, 1e22, 1e-6, 1e-7, 123456.789]
    for chunk in (human, specials, list(_random_floats(rng, 32, 400))):
        _fp_text_case(main_server, "identity_fp32", "FP32", np.float32, chunk)


def test_fp64_json_text_random(main_server):
    rng = np.random.default_rng(RNG_SEED + 64)
    specials = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 2.2250738585072014e-308,
                1.7976931348623157e308, 0.1, 0.3, 1 / 3, 1e21, 1e22, 1e-6, 1e-7, 2.0 ** 53 + 2]
    for chunk in (specials, list(_random_floats(rng, 64, 400))):
        _fp_text_case(main_server, "identity_fp64", "FP64", np.float64, chunk)


def test_output_order_sorted_by_name(main_server):
    """Response outputs are sorted by name whatever the graph, config or request order."""
    for requested in (None, ["ZZZ", "MMM", "AAA"], ["AAA", "ZZZ", "MMM"], ["MMM", "AAA"]):
        req = {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32",
                           "data": [1.5, -2.0]}]}
        if requested:
            req["outputs"] = [{"name": n} for n in requested]
        body, _ = _outputs(infer_json(main_server.port, "order_test", req))
        names = [o["name"] for o in body["outputs"]]
        assert names == sorted(requested or ["AAA", "MMM", "ZZZ"]), names


def test_response_key_order(main_server):
    r = replay(main_server.port, "simple with request id")
    assert r.text.startswith('{"id":"my-request-42","model_name":"simple","model_version":"1",'
                             '"outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],'
                             '"data":[')


# ----------------------------------------------------------------------------- vs onnxruntime

@pytest.mark.parametrize("batch", range(1, 9))
def test_simple_random_batches(main_server, model_file, batch):
    rng = np.random.default_rng(RNG_SEED + batch)
    a = rng.integers(-2**20, 2**20, size=(batch, 16), dtype=np.int32)
    b = rng.integers(-2**20, 2**20, size=(batch, 16), dtype=np.int32)
    req = {"id": f"b{batch}", "inputs": [_tensor("INPUT0", a, "INT32"),
                                         _tensor("INPUT1", b, "INT32")]}
    body, outs = _outputs(infer_json(main_server.port, "simple", req))
    ref = ort_run(model_file("simple"), {"INPUT0": a, "INPUT1": b})
    assert body["id"] == f"b{batch}" and body["model_name"] == "simple"
    assert body["model_version"] == "1"
    for name in ("OUTPUT0", "OUTPUT1"):
        assert outs[name]["datatype"] == "INT32" and outs[name]["shape"] == [batch, 16]
        np.testing.assert_array_equal(np.array(outs[name]["data"], np.int32).reshape(batch, 16),
                                      ref[name])


@pytest.mark.parametrize("model,limit", [("simple_noconfig", 4), ("simple", 8)])
def test_simple_output_selection(main_server, model_file, model, limit):
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-1000, 1000, size=(limit, 16), dtype=np.int32)
    b = rng.integers(-1000, 1000, size=(limit, 16), dtype=np.int32)
    ref = ort_run(model_file(model), {"INPUT0": a, "INPUT1": b})
    for sel in (["OUTPUT0"], ["OUTPUT1"], ["OUTPUT1", "OUTPUT0"]):
        req = {"inputs": [_tensor("INPUT1", b, "INT32"), _tensor("INPUT0", a, "INT32")],
               "outputs": [{"name": n} for n in sel]}
        body, outs = _outputs(infer_json(main_server.port, model, req))
        assert [o["name"] for o in body["outputs"]] == sorted(sel)
        for n in sel:
            np.testing.assert_array_equal(np.array(outs[n]["data"], np.int32).reshape(limit, 16),
                                          ref[n])


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_identity_fp32_random(main_server, model_file, batch):
    rng = np.random.default_rng(RNG_SEED + 100 + batch)
    x = (rng.standard_normal((batch, 7)) * 10.0 ** rng.integers(-30, 30, (batch, 7))).astype(
        np.float32)
    body, outs = _outputs(infer_json(main_server.port, "identity_fp32",
                                     {"inputs": [_tensor("INPUT0", x, "FP32")]}))
    ref = ort_run(model_file("identity_fp32"), {"INPUT0": x})["OUTPUT0"]
    got = np.array(outs["OUTPUT0"]["data"], np.float64)
    # each value is the float32 widened to double exactly, not a shortened float repr
    np.testing.assert_array_equal(got, ref.astype(np.float64).ravel())


def test_dyn_batch_random(main_server, model_file):
    rng = np.random.default_rng(RNG_SEED + 7)
    for batch in (1, 4, 8):
        x = rng.standard_normal((batch, 5)).astype(np.float32)
        _, outs = _outputs(infer_json(main_server.port, "dyn_batch",
                                      {"inputs": [_tensor("INPUT0", x, "FP32")]}))
        ref = ort_run(model_file("dyn_batch"), {"INPUT0": x})["OUTPUT0"]
        np.testing.assert_array_equal(np.array(outs["OUTPUT0"]["data"], np.float32), ref.ravel())


def test_two_versions_random(main_server, model_file):
    x = np.random.default_rng(RNG_SEED + 2).standard_normal((2, 3)).astype(np.float32)
    req = {"inputs": [_tensor("INPUT0", x, "FP32")]}
    for version, path_version in (("2", None), ("1", 1), ("2", 2)):
        body, outs = _outputs(infer_json(main_server.port, "two_versions", req, path_version))
        assert body["model_version"] == version
        ref = ort_run(model_file("two_versions", int(version)), {"INPUT0": x})["OUTPUT0"]
        np.testing.assert_array_equal(np.array(outs["OUTPUT0"]["data"], np.float32), ref.ravel())


def test_order_test_random(main_server, model_file):
    x = np.random.default_rng(RNG_SEED + 3).standard_normal((3, 4)).astype(np.float32)
    _, outs = _outputs(infer_json(main_server.port, "order_test",
                                  {"inputs": [_tensor("INPUT0", x, "FP32")]}))
    ref = ort_run(model_file("order_test"), {"INPUT0": x})
    for n in ("AAA", "MMM", "ZZZ"):
        np.testing.assert_array_equal(np.array(outs[n]["data"], np.float32), ref[n].ravel())


def test_identity_bytes_random(main_server, model_file):
    rng = np.random.default_rng(RNG_SEED + 4)
    alphabet = list("abcdefghijklmnopqrstuvwxyz0123456789 \"\\/\n\t") + ["ü", "中", "😀"]
    strings = ["".join(rng.choice(alphabet, size=rng.integers(0, 40))) for _ in range(12)]
    x = np.array(strings, dtype=object).reshape(3, 4)
    req = {"inputs": [{"name": "INPUT0", "shape": [3, 4], "datatype": "BYTES", "data": strings}]}
    _, outs = _outputs(infer_json(main_server.port, "identity_bytes", req))
    ref = ort_run(model_file("identity_bytes"), {"INPUT0": x})["OUTPUT0"]
    assert outs["OUTPUT0"]["datatype"] == "BYTES" and outs["OUTPUT0"]["shape"] == [3, 4]
    assert outs["OUTPUT0"]["data"] == [str(s) for s in ref.ravel()]


def _dtype_sample(kserve, np_t, rng, shape):
    if kserve == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(np_t, np.integer):
        info = np.iinfo(np_t)
        x = rng.integers(info.min, info.max, size=shape, dtype=np_t, endpoint=True)
        x.flat[0], x.flat[1] = info.min, info.max
        return x
    x = (rng.standard_normal(shape) * 1e3).astype(np_t)
    x.flat[0], x.flat[1] = np.finfo(np_t).max, np.finfo(np_t).tiny
    x.flat[2] = -0.0
    return x


JSON_DTYPES = [m for m, (k, *_rest) in sorted(DTYPE_MODELS.items()) if k not in ("FP16", "BF16")]


@pytest.mark.parametrize("model", JSON_DTYPES)
def test_every_datatype_json(main_server, model_file, model):
    kserve, _, _, np_t = DTYPE_MODELS[model]
    rng = np.random.default_rng(zlib.crc32(model.encode()))
    for shape in ((1, 5), (8, 3)):
        x = _dtype_sample(kserve, np_t, rng, shape)
        body, outs = _outputs(infer_json(main_server.port, model,
                                         {"inputs": [_tensor("INPUT0", x, kserve)]}))
        ref = ort_run(model_file(model), {"INPUT0": x})["OUTPUT0"]
        out = outs["OUTPUT0"]
        assert out["datatype"] == kserve and out["shape"] == list(shape)
        if kserve == "BOOL":
            assert out["data"] == ref.ravel().tolist()
            assert all(isinstance(v, bool) for v in out["data"])
        elif np.issubdtype(np_t, np.integer):
            assert out["data"] == [int(v) for v in ref.ravel()]
            assert all(type(v) is int for v in out["data"])
        else:
            got = np.array(out["data"], np.float64)
            np.testing.assert_array_equal(got, ref.astype(np.float64).ravel())
            assert np.signbit(got[2])  # -0.0 stays negative


@pytest.mark.parametrize("model,kserve", [("identity_fp16", "FP16"), ("identity_bf16", "BF16")])
def test_half_types_refused_in_json(main_server, model, kserve):
    req = {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": kserve, "data": [1, 2]}]}
    assert_error(infer_json(main_server.port, model, req), 400,
                 f"receiving {kserve} data via JSON is not supported. "
                 "Please use the binary data format for input INPUT0")


def test_add_fp16_json_input_refused(main_server):
    what = "add_fp16 JSON input (FP16 over JSON)"
    assert_matches_recorded(replay(main_server.port, what), what)


def test_request_id_echoed(main_server):
    req = json.loads(recorded("simple JSON in/out (INT32 [1,16])")["request"]["body"])
    for rid in ("x", "my-request-42", "ünï \"q\"", "a" * 300):
        body, _ = _outputs(infer_json(main_server.port, "simple", dict(req, id=rid)))
        assert body["id"] == rid
        assert list(body)[0] == "id"
    body, _ = _outputs(infer_json(main_server.port, "simple", dict(req, id="")))
    assert "id" not in body
