"""Model warmup (issue #18): model_warmup samples run on every instance before the model is
READY, as Triton runs them: zero, random and file data (TYPE_STRING files hold serialized
strings), count iterations, batch_size requests a run, the executions counted in the statistics
(Triton 2.51: 3 warmups x 2 instances gave inference_count 6), each run logged at
--log-verbose=1, and a failing warmup makes that model UNAVAILABLE with the reason while the
others load."""
import json
import struct

import tritonclient.http as httpclient

import models
from e2e_util import get, post


def warm_model(repo, name, samples, instances=2, type_enum="TYPE_FP32", files=None):
    """identity model `name` (its own graph) with the given model_warmup samples."""
    d = models.write_model(repo, "identity_bytes" if type_enum == "TYPE_STRING"
                           else "identity_fp32")
    d = d.rename(d.parent / name)
    cfg = models.config_identity(name, type_enum).replace("count: 1", f"count: {instances}")
    (d / "config.pbtxt").write_text(cfg + "model_warmup [\n" + ",\n".join(samples) + "\n]\n")
    for fname, data in (files or {}).items():
        (d / "warmup").mkdir(exist_ok=True)
        (d / "warmup" / fname).write_bytes(data)
    return d


def sample(name, data, batch_size=1, count=None, dims="[ 16 ]", type_enum="TYPE_FP32"):
    c = f" count: {count}" if count is not None else ""
    return (f'{{ name: "{name}" batch_size: {batch_size}{c} inputs {{ key: "INPUT0" value: '
            f'{{ data_type: {type_enum} dims: {dims} {data} }} }} }}')


def stats(port, model):
    r = get(port, f"/v2/models/{model}/stats")
    assert r.status == 200, r
    return r.json()["model_stats"][0]


def test_warmup_runs_and_counts_as_triton(server_factory, tmp_path):
    repo = tmp_path / "repo"
    warm_model(repo, "warm", [sample("zeros", "zero_data: true", count=3)])
    srv = server_factory([repo], ["--log-verbose=1"])
    st = stats(srv.port, "warm")
    assert st["inference_count"] == 6 and st["execution_count"] == 6, st
    assert st["inference_stats"]["success"]["count"] == 6, st
    for inst in ("warm_0_0", "warm_0_1"):
        for it in (1, 2, 3):
            assert (f"model 'warm' instance {inst} is running warmup sample 'zeros' for "
                    f"iteration {it}") in srv.log
    # warmup ends before the model is READY and before the endpoints start
    log = srv.log
    assert log.index("for iteration 3") < log.index("successfully loaded 'warm'") < \
        log.index("Started HTTPService")


def test_warmup_data_kinds_and_batch_size(server_factory, tmp_path):
    repo = tmp_path / "repo"
    fp32 = struct.pack("<16f", *range(16))
    warm_model(repo, "kinds", [
        sample("zeros", "zero_data: true"),
        sample("random", "random_data: true", batch_size=4),
        sample("file", 'input_data_file: "in.bin"', count=2),
        sample("skipped", "zero_data: true", batch_size=0),
        sample("big", "zero_data: true", batch_size=12),  # above max_batch_size 8: 8 + 4
    ], instances=1, files={"in.bin": fp32 + b"extra bytes are not used"})
    strings = b"".join(struct.pack("<I", len(s)) + s for s in [b"a", b"bc"] * 8)
    warm_model(repo, "strings", [
        sample("file", 'input_data_file: "s.bin"', type_enum="TYPE_STRING"),
        sample("random", "random_data: true", type_enum="TYPE_STRING"),
    ], instances=1, type_enum="TYPE_STRING", files={"s.bin": strings})
    srv = server_factory([repo], ["--log-verbose=1"])
    st = stats(srv.port, "kinds")
    # zeros 1 + random one batch of 4 + file twice + 12 in batches of 8 and 4; batch 0 skipped
    assert st["inference_count"] == 1 + 4 + 2 + 12, st
    assert st["execution_count"] == 1 + 1 + 2 + 2, st
    assert "Skipping batch 0 warmup sample 'skipped'" in srv.log
    assert stats(srv.port, "strings")["inference_count"] == 2
    c = httpclient.InferenceServerClient(srv.url)
    assert c.is_model_ready("kinds") and c.is_model_ready("strings")


def test_failed_warmup_makes_the_model_unavailable(server_factory, tmp_path):
    repo = tmp_path / "repo"
    warm_model(repo, "nofile", [sample("f", 'input_data_file: "missing.bin"')])
    warm_model(repo, "short", [sample("f", 'input_data_file: "short.bin"')],
               files={"short.bin": b"\0" * 10})
    warm_model(repo, "badshape", [sample("s", "zero_data: true", dims="[ 2, 8 ]")])
    models.write_model(repo, "simple")
    srv = server_factory([repo], ["--exit-on-error=false"])
    index = {e["name"]: e for e in json.loads(post(srv.port, "/v2/repository/index").body)}
    assert index["simple"]["state"] == "READY"
    for name in ("nofile", "short", "badshape"):
        assert index[name]["state"] == "UNAVAILABLE", index[name]
        assert get(srv.port, f"/v2/models/{name}/ready").status == 400
    assert index["nofile"]["reason"].startswith(
        "Invalid argument: failed to run warmup sample 'f': failed to open text file for read "), \
        index["nofile"]
    assert index["short"]["reason"] == (
        "Invalid argument: failed to run warmup sample 'f': warmup setting expects 64 bytes, "
        "but the data provided from short.binonly has 10 bytes"), index["short"]
    assert "failed to run warmup sample 's'" in index["badshape"]["reason"], index["badshape"]
