"""nereid-analyzer (issue #21): profiles a model through a nereid it starts itself (model
control, explicit mode), measuring with the nereid-perf engine in-process. The windows are short
(time windows of 150 ms, three of them) and the bounds small, so each profile takes
seconds; what is checked is behaviour: the variants are valid configs that load, the CSV has
Model Analyzer's columns and one row per measurement, constraints exclude, a checkpoint resumes,
bad arguments get clear errors. The one comparison of figures is made where the gap is several
times any noise: a 2048x2048 MatMul at 16 requests in flight, one request at a time against
batches of up to 8 (ONNX Runtime here: ~150 us for one row, ~350 us for eight)."""
import csv
import json
import os
import re
import shutil
import struct
import subprocess
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("NEREID_BIN") or ROOT / "build" / "bin" / "nereid")
ANALYZER = BIN.parent / "nereid-analyzer"
EXAMPLES = ROOT / "examples" / "model_repository"
UNDER_ASAN = "ASAN_OPTIONS" in os.environ
SHORT = ["--measurement-interval", "150", "--max-trials", "3", "--stability-percentage", "1000"]

# Model Analyzer's columns (its metrics-model-inference.csv), then nereid's own
MA_COLUMNS = ["Model", "Batch", "Concurrency", "Model Config Path", "Instance Group",
              "Max Batch Size", "Satisfies Constraints", "Throughput (infer/sec)",
              "p99 Latency (ms)"]

MLP_CONFIG = """name: "mlp"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 2048 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 2048 ] } ]
"""


def write_mlp(repo):
    """INPUT0 [batch, 2048] -> MatMul(2048x2048) -> Relu -> OUTPUT0."""
    w = numpy_helper.from_array(
        (np.random.default_rng(1).random((2048, 2048), dtype=np.float32) * 0.01), "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["INPUT0", "W"], ["h"]),
         helper.make_node("Relu", ["h"], ["OUTPUT0"])], "mlp",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", 2048])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", 2048])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    (repo / "mlp" / "1").mkdir(parents=True)
    onnx.save(m, str(repo / "mlp" / "1" / "model.onnx"))
    (repo / "mlp" / "config.pbtxt").write_text(MLP_CONFIG)


def analyzer(args, timeout=600):
    return subprocess.run([str(ANALYZER), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def profile_args(repo, model, out, export, *extra):
    return ["profile", "--model-repository", repo, "--profile-models", model,
            "--output-model-repository-path", out, "-e", export, "-s", export / "checkpoints",
            *SHORT, *extra]


def read_csv(export):
    with open(export / "results" / "metrics-model-inference.csv", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """One brute profile of mlp at 16 in flight: default (1 instance, no batching), then
    max_batch_size 8 with dynamic batching at 1 and 2 instances."""
    d = tmp_path_factory.mktemp("analyzer_mlp")
    write_mlp(d / "repo")
    args = profile_args(d / "repo", "mlp", d / "out", d / "export",
                        "--run-config-search-min-concurrency", "16",
                        "--run-config-search-max-concurrency", "16",
                        "--run-config-search-min-model-batch-size", "8",
                        "--run-config-search-max-model-batch-size", "8",
                        "--run-config-search-max-instance-count", "2",
                        "--run-config-search-refine", "none")
    r = analyzer(args)
    assert r.returncode == 0, r.stdout + r.stderr
    return d, args, r


def test_the_known_better_config_wins(mlp):
    d, _, r = mlp
    assert re.search(r"^mlp: 3 runs \(3 measured now\), \d+ measurements in \d+ s$", r.stdout,
                     re.M), r.stdout
    best = re.search(r"^mlp: best: (.*)$", r.stdout, re.M).group(1)
    assert "dynamic batching" in best and "default" in best, best
    _, rows = read_csv(d / "export")
    thr = {row["Model Config Path"]: float(row["Throughput (infer/sec)"]) for row in rows}
    assert set(thr) == {"mlp_config_default", "mlp_config_0", "mlp_config_1"}
    assert thr["mlp_config_0"] > 1.3 * thr["mlp_config_default"], thr
    written = (d / "out" / "mlp" / "config.pbtxt").read_text()
    assert 'name: "mlp"' in written and "dynamic_batching {" in written, written
    assert "max_batch_size: 8" in written


def test_every_variant_is_a_folder_that_loads(mlp, server_factory):
    d, _, _ = mlp
    out = d / "out"
    names = sorted(p.name for p in out.iterdir())
    assert names == ["mlp", "mlp_config_0", "mlp_config_1", "mlp_config_default"]
    for n in names:
        cfg = (out / n / "config.pbtxt").read_text()
        assert f'name: "{n}"' in cfg, cfg
        assert (out / n / "1" / "model.onnx").stat().st_size > 16 << 20
    assert "count: 2" in (out / "mlp_config_1" / "config.pbtxt").read_text()
    srv = server_factory([out])
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/v2/repository/index",
                                data=b"{}") as f:
        index = json.load(f)
    assert sorted((m["name"], m["state"]) for m in index) == [(n, "READY") for n in names]


def test_the_csv_has_model_analyzers_columns_and_a_row_per_run(mlp):
    d, _, _ = mlp
    header, rows = read_csv(d / "export")
    assert header[:len(MA_COLUMNS)] == MA_COLUMNS
    for col in ("p95 Latency (ms)", "p50 Latency (ms)", "Server Queue (ms)",
                "Server Compute Infer (ms)", "Max CPU Memory Usage (MB)",
                "Model Load Memory (MB)", "Server CPU (cores)"):
        assert col in header
    assert len(rows) == 3
    for row in rows:
        assert row["Model"] == "mlp" and row["Concurrency"] == "16" and row["Batch"] == "1"
        assert row["Satisfies Constraints"] == "Yes"
        assert float(row["Throughput (infer/sec)"]) > 0
        assert float(row["p99 Latency (ms)"]) >= float(row["p50 Latency (ms)"]) > 0
        # the 16 MiB weight is in the server's memory (what its unload gives back; not under
        # ASan, whose quarantine keeps freed memory)
        if not UNDER_ASAN:
            assert float(row["Model Load Memory (MB)"]) > 10, row
        assert float(row["Max CPU Memory Usage (MB)"]) > float(row["Model Load Memory (MB)"])
    inst = {row["Model Config Path"]: row["Instance Group"] for row in rows}
    assert inst["mlp_config_1"] == "2:CPU" and inst["mlp_config_0"] == "1:CPU"


def test_a_checkpoint_resumes_without_measuring_again(mlp):
    d, args, first = mlp
    r = analyzer(args)
    assert r.returncode == 1
    assert "already exists" in r.stderr and "--override-output-model-repository" in r.stderr
    r = analyzer(args + ["--override-output-model-repository"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resuming from" in r.stderr and "(3 runs measured)" in r.stderr, r.stderr
    assert "mlp: 3 runs (0 measured now)" in r.stdout, r.stdout
    assert len(read_csv(d / "export")[1]) == 3  # the file anew, not appended to
    best = lambda out: re.search(r"^mlp: best: (.*)$", out, re.M).group(1)
    assert best(r.stdout) == best(first.stdout)


@pytest.fixture(scope="module")
def simple_repo(tmp_path_factory):
    d = tmp_path_factory.mktemp("analyzer_simple")
    shutil.copytree(EXAMPLES / "simple", d / "repo" / "simple")
    return d


def test_constraints_exclude(simple_repo, tmp_path):
    r = analyzer(profile_args(simple_repo / "repo", "simple", tmp_path / "out",
                              tmp_path / "export", "--run-config-search-disable",
                              "--run-config-search-max-concurrency", "2",
                              "--latency-budget", "0.0001"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "No configuration met the constraints" in r.stdout + r.stderr
    _, rows = read_csv(tmp_path / "export")
    assert rows and all(row["Satisfies Constraints"] == "No" for row in rows)
    assert not (tmp_path / "out" / "simple").exists()


def test_quick_search_measures_fewer_variants(simple_repo, tmp_path):
    r = analyzer(profile_args(simple_repo / "repo", "simple", tmp_path / "out",
                              tmp_path / "export", "--run-config-search-mode", "quick",
                              "--run-config-search-max-concurrency", "4",
                              "--run-config-search-max-instance-count", "2",
                              "--run-config-search-max-model-batch-size", "4",
                              "--run-config-search-refine", "none"))
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"^simple: (\d+) runs \(\d+ measured now\), (\d+) measurements", r.stdout,
                  re.M)
    # brute over the same bounds: default + 2 instance counts x 3 batch sizes, each swept
    # over concurrency 1, 2, 4: 21 measurements
    assert m and 2 <= int(m.group(1)) and int(m.group(2)) < 21, r.stdout
    assert (tmp_path / "out" / "simple" / "config.pbtxt").exists()
    assert (tmp_path / "out" / "simple_config_default" / "config.pbtxt").exists()
    assert "[1/" in r.stderr  # progress
    html = (tmp_path / "export" / "reports" / "summaries" / "simple" /
            "result_summary.html").read_text()
    assert 'class="run"' in html  # the swept runs as lines over their levels


def test_refinement_tries_each_setting_on_the_best_variant(simple_repo, tmp_path,
                                                          server_factory):
    """After the search, OpenVINO, a queue delay (when the best batches dynamically) and
    intra_op_worker_nice are each tried on the best variant found; every one is a config that
    nereid loads, the OpenVINO one through the ONNX Runtime library make setup installs."""
    # OpenVINO's TBB dlopens with RTLD_DEEPBIND, which ASan's runtime refuses by ending the
    # process (google/sanitizers#611; tests/e2e/test_accelerators.py): not under ASan
    refine = "queue-delay,worker-nice" if UNDER_ASAN else "openvino,queue-delay,worker-nice"
    r = analyzer(profile_args(simple_repo / "repo", "simple", tmp_path / "out",
                              tmp_path / "export", "--run-config-search-max-concurrency", "2",
                              "--run-config-search-max-instance-count", "1",
                              "--run-config-search-max-model-batch-size", "2",
                              "--run-config-search-refine", refine))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((tmp_path / "export" / "results" / "simple.json").read_text())
    runs = {run["name"]: run for run in res["runs"]}
    plain = [run for run in res["runs"] if "OpenVINO" not in run["description"] and
             "queue delay" not in run["description"] and "worker_nice" not in run["description"]]
    assert len(plain) == 3, [run["description"] for run in res["runs"]]  # default, mbs 1, 2
    tuned = [run for run in res["runs"] if run not in plain]
    assert all(run["error"] is None for run in res["runs"]), res["runs"]
    base = max(plain, key=lambda run: max(p[1] for p in run["points"]))["description"]
    wanted = ([] if UNDER_ASAN else [", OpenVINO"]) + (
        [", max queue delay 500 us"] if "dynamic batching" in base else []) + [
        ", intra_op_worker_nice 19"]
    assert [run["description"] for run in tuned] == [base + w for w in wanted]
    out = tmp_path / "out"
    for run in tuned:
        cfg = (out / run["name"] / "config.pbtxt").read_text()
        if "OpenVINO" in run["description"]:
            assert 'name: "openvino"' in cfg, cfg
        elif "queue delay" in run["description"]:
            assert "max_queue_delay_microseconds: 500" in cfg, cfg
        else:
            assert 'key: "intra_op_worker_nice"' in cfg and 'string_value: "19"' in cfg, cfg
    srv = server_factory([out])
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/v2/repository/index",
                                data=b"{}") as f:
        index = json.load(f)
    assert {m["name"]: m["state"] for m in index} == {
        n: "READY" for n in list(runs) + ["simple"]}, index


def test_a_server_that_dies_fails_one_run_and_a_new_one_measures_on(simple_repo, tmp_path):
    """The server killed (as the OOM killer would) while the second variant is measured: that
    run fails with the reason, a new server takes over, the profile ends normally."""
    p = subprocess.Popen([str(ANALYZER), *map(str, profile_args(
        simple_repo / "repo", "simple", tmp_path / "out", tmp_path / "export",
        "--run-config-search-max-concurrency", "4", "--run-config-search-max-instance-count", "1",
        "--run-config-search-max-model-batch-size", "4", "--run-config-search-refine", "none",
        "--measurement-interval", "300"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = ""
    try:
        for line in p.stderr:
            err += line
            if line.startswith("nereid-analyzer: [2/"):
                break
        children = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        assert len(children) == 1, children
        os.kill(int(children[0]), 9)
        out, rest = p.communicate(timeout=300)
    finally:
        p.kill()
    err += rest
    assert p.returncode == 0, out + err
    assert "the server ended (killed by signal 9 (Killed)) while simple_config_" in err, err
    res = json.loads((tmp_path / "export" / "results" / "simple.json").read_text())
    failed = [run for run in res["runs"] if run["error"]]
    assert len(failed) == 1 and "the server ended during this run (killed by signal 9" in \
        failed[0]["error"], res["runs"]
    assert res["runs"][-1]["error"] is None and res["runs"][-1]["points"]  # measured on
    assert failed[0]["name"] not in {p.name for p in (tmp_path / "out").iterdir()}
    _, rows = read_csv(tmp_path / "export")
    assert [row["Error"] for row in rows if row["Error"]] == [failed[0]["error"]]


def test_a_yaml_config_file_with_model_analyzers_keys(simple_repo, tmp_path):
    """-f: Model Analyzer's snake_case keys, profile_models as a mapping, weighted objectives,
    a constraints mapping; a flag on the command line wins over the file."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"""# Model Analyzer's YAML
model_repository: {simple_repo / "repo"}
profile_models:
  simple: {{}}
output_model_repository_path: {tmp_path / "out"}
export_path: {tmp_path / "export"}
checkpoint_directory: {tmp_path / "ck"}
override_output_model_repository: true
run_config_search_max_instance_count: 1
run_config_search_max_model_batch_size: 2
run_config_search_max_concurrency: 2
run_config_search_refine: none
measurement_interval: 150
max_trials: 3
stability_percentage: 1000
objectives:
  perf_throughput: 10
  perf_latency_p99: 5
constraints:
  perf_latency_p99:
    max: 50
""")
    (tmp_path / "out").mkdir()  # override_output_model_repository: true allows it
    r = analyzer(["profile", "-f", cfg, "--run-config-search-max-concurrency", "4"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "p99 under the 50 ms budget" in r.stdout, r.stdout
    _, rows = read_csv(tmp_path / "export")
    assert sorted({int(row["Concurrency"]) for row in rows}) == [1, 2, 4]  # the command line's
    assert {row["Model Config Path"] for row in rows} == {
        "simple_config_default", "simple_config_0", "simple_config_1"}


@pytest.mark.parametrize("text,message", [
    ("profile_models: simple\ncpu_only: true\n", ":2: unknown key 'cpu_only'"),
    ("profile_models:\n  simple:\n    parameters: {concurrency: [1]}\n",
     ":3: profile_models: per-model settings (for 'simple') are not supported yet"),
    ("profile_models: simple\nconstraints:\n  gpu_used_memory: {max: 100}\n",
     ":3: constraints: 'gpu_used_memory' is not supported"),
    ("profile_models: simple\nconstraints:\n  perf_throughput: {max: 100}\n",
     ":3: constraints: perf_throughput takes {min: ...}"),
    ("profile_models: [simple\n", ":2: "),
    ("override_output_model_repository: maybe\n", ":1: override_output_model_repository: "
                                                  "expected true or false"),
])
def test_a_bad_config_file_gets_file_and_line(simple_repo, tmp_path, text, message):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    r = analyzer(["profile", "-m", simple_repo / "repo", "-f", cfg, "-e", tmp_path / "e"],
                 timeout=30)
    assert r.returncode == 1 and f"{cfg}{message}" in r.stderr, r.stderr


@pytest.mark.parametrize("extra,message", [
    (["--run-config-search-mode", "fast"], "--run-config-search-mode must be brute or quick"),
    (["--client-protocol", "tcp"], "--client-protocol must be http or grpc"),
    (["--triton-launch-mode", "docker"], "--triton-launch-mode must be local or remote"),
    (["--objectives", "speed"], "unknown objective 'speed'"),
    (["--run-config-search-min-instance-count", "3",
      "--run-config-search-max-instance-count", "2"], "below its min"),
    (["--bogus"], "unknown option"),
    (["--run-config-search-refine", "gpu"], "unknown setting 'gpu'"),
])
def test_bad_arguments_get_clear_errors(simple_repo, tmp_path, extra, message):
    r = analyzer(profile_args(simple_repo / "repo", "simple", tmp_path / "out",
                              tmp_path / "export", *extra), timeout=30)
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_missing_inputs_get_clear_errors(simple_repo, tmp_path):
    r = analyzer(["profile", "--model-repository", simple_repo / "repo"], timeout=30)
    assert r.returncode == 1 and "--profile-models is required" in r.stderr
    r = analyzer(["profile", "--model-repository", tmp_path / "nope", "--profile-models", "x"],
                 timeout=30)
    assert r.returncode == 1 and "not a directory" in r.stderr
    r = analyzer(profile_args(simple_repo / "repo", "no_such_model", tmp_path / "out",
                              tmp_path / "export"), timeout=120)
    assert r.returncode == 1 and "no_such_model" in r.stderr, r.stderr
    r = analyzer(["report", "-e", tmp_path / "nothing"], timeout=30)
    assert r.returncode == 1 and "no results in" in r.stderr, r.stderr


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, as Chromium writes
    its screenshots (no Pillow in the test environment: zlib and the five row filters)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def test_the_report_shows_the_plots_and_is_rebuilt_from_the_export_path(mlp, tmp_path):
    d, _, r = mlp
    html_path = d / "export" / "reports" / "summaries" / "mlp" / "result_summary.html"
    assert f"mlp: report: {html_path}" in r.stdout, r.stdout
    html = html_path.read_text()
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")  # opens offline
    for part in ('<svg id="latency"', 'id="pareto"', 'id="recommended"', '<svg id="memory"',
                 '<tr class="recommended">', "mlp_config_default", "mlp_config_1"):
        assert part in html, part
    # one level per run here (concurrency 16): a dot each, no line; two bars per variant
    assert html.count(", concurrency 16: ") == 3 and html.count('class="bar"') == 6
    # `report` rebuilds it from results/mlp.json alone
    html_path.unlink()
    rr = analyzer(["report", "-e", d / "export"], timeout=30)
    assert rr.returncode == 0 and html_path.read_text() == html, rr.stderr
    # rendered by a browser: the plots are drawn, not a blank page; the recommended line's
    # red, and the memory bars' blue, are on the page
    near = rendered(html_path, tmp_path, 1000, 1100)
    assert near((0xd6, 0x27, 0x28)) > 50 and near((0x31, 0x82, 0xbd)) > 200


def rendered(html_path, tmp_path, width, height):
    """The page as headless Chromium draws it, checked not blank; returns near(rgb): how many
    of the sampled pixels are within 24 of that colour."""
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing (make setup installs it)"
    shot = tmp_path / "report.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={shot}",
                    html_path.as_uri()], capture_output=True, timeout=120, cwd=tmp_path)
    w, h, rows = png_pixels(shot)
    assert (w, h) == (width, height)
    colours = {}
    for row in rows[::2]:
        for px in row[::2]:
            colours[px] = colours.get(px, 0) + 1
    ink = sum(n for px, n in colours.items() if px != (255, 255, 255))
    assert ink > 0.02 * sum(colours.values()), "a blank page"
    return lambda want: sum(n for px, n in colours.items()
                            if all(abs(a - b) <= 24 for a, b in zip(px, want)))


# ---- several models served together (--run-config-profile-models-concurrently-enable) ----

@pytest.fixture(scope="module")
def two_mlps(tmp_path_factory):
    """mlp and mlp2 (the same MatMul under two names), each profiled alone at 16 in flight
    (default, then max_batch_size 8 with the batcher at 1 and 2 instances), then together:
    each model's best variant alone and its default (--num-configs-per-model 1), the four
    combinations measured with both models loaded and under load at once."""
    d = tmp_path_factory.mktemp("analyzer_together")
    write_mlp(d / "repo")
    shutil.copytree(d / "repo" / "mlp", d / "repo" / "mlp2")
    cfg = d / "repo" / "mlp2" / "config.pbtxt"
    cfg.write_text(cfg.read_text().replace('name: "mlp"', 'name: "mlp2"'))
    args = profile_args(d / "repo", "mlp,mlp2", d / "out", d / "export",
                        "--run-config-search-min-concurrency", "16",
                        "--run-config-search-max-concurrency", "16",
                        "--run-config-search-min-model-batch-size", "8",
                        "--run-config-search-max-model-batch-size", "8",
                        "--run-config-search-max-instance-count", "2",
                        "--run-config-search-refine", "none",
                        "--run-config-profile-models-concurrently-enable",
                        "--num-configs-per-model", "1")
    r = analyzer(args)
    assert r.returncode == 0, r.stdout + r.stderr
    return d, args, r


def read_together(export):
    with open(export / "results" / "metrics-models-together.csv", newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


def test_models_together_are_measured_loaded_and_under_load_at_once(two_mlps):
    d, _, r = two_mlps
    assert re.search(r"^together: 4 combinations \(4 measured now\), 8 measurements in \d+ s$",
                     r.stdout, re.M), r.stdout
    header, rows = read_together(d / "export")
    assert header[0] == "Combination" and header[1:1 + len(MA_COLUMNS)] == MA_COLUMNS
    combos = {}
    for row in rows:
        combos.setdefault(row["Combination"], {})[row["Model"]] = row
    assert sorted(combos) == ["0", "1", "2", "3"]
    # the defaults together first, the baseline; every pairing of the candidates once
    assert {m: row["Model Config Path"] for m, row in combos["0"].items()} == {
        "mlp": "mlp_config_default", "mlp2": "mlp2_config_default"}
    pairs = {(c["mlp"]["Model Config Path"], c["mlp2"]["Model Config Path"])
             for c in combos.values()}
    assert len(pairs) == 4
    # both models under load at the same time: they share the two cores, so the fractions of
    # their alone figures (same variant, same concurrency) add up to about 1 (measured 0.8 to
    # 1.0); run one after the other they would add up to about 2. One model alone can come
    # close to its alone figure when its partner is slow, so only the sum is checked.
    _, alone = read_csv(d / "export")
    alone = {row["Model Config Path"]: float(row["Throughput (infer/sec)"]) for row in alone}
    for c in combos.values():
        fractions = []
        for m, row in c.items():
            together = float(row["Throughput (infer/sec)"])
            assert together > 0 and row["Concurrency"] == "16", row
            fractions.append(together / alone[row["Model Config Path"]])
        assert sum(fractions) < 1.6, (c, alone)
        # one server with both models: the same memory figures on both rows
        assert c["mlp"]["Max CPU Memory Usage (MB)"] == c["mlp2"]["Max CPU Memory Usage (MB)"]
        assert c["mlp"]["Model Load Memory (MB)"] == c["mlp2"]["Model Load Memory (MB)"]
        if not UNDER_ASAN:  # both 16 MiB weights (ASan's quarantine keeps freed memory)
            assert float(c["mlp"]["Model Load Memory (MB)"]) > 25, c


def test_the_best_combination_is_written_and_explained(two_mlps):
    d, _, r = two_mlps
    best = re.search(r"^together: best: (.*)$", r.stdout, re.M).group(1)
    assert "served together" in best and "mlp_config_" in best and "mlp2_config_" in best, best
    for m in ("mlp", "mlp2"):
        chosen = re.search(rf"^together: {m} written as (.*)/config.pbtxt \(({m}_config_\w+)\)$",
                           r.stdout, re.M)
        assert chosen and Path(chosen.group(1)) == d / "out" / m, r.stdout
        written = (d / "out" / m / "config.pbtxt").read_text()
        variant = (d / "out" / chosen.group(2) / "config.pbtxt").read_text()
        assert written == variant.replace(f'name: "{chosen.group(2)}"', f'name: "{m}"')
        assert chosen.group(2) in best


def test_models_together_resume_from_their_checkpoint(two_mlps):
    d, args, first = two_mlps
    r = analyzer(args + ["--override-output-model-repository"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "models-together.ckpt (4 combinations measured)" in r.stderr, r.stderr
    assert "together: 4 combinations (0 measured now)" in r.stdout, r.stdout
    best = lambda out: re.search(r"^together: best: (.*)$", out, re.M).group(1)
    assert best(r.stdout) == best(first.stdout)
    assert len(read_together(d / "export")[1]) == 8  # the file anew, not appended to


def test_the_models_together_report(two_mlps, tmp_path):
    d, _, r = two_mlps
    html_path = d / "export" / "reports" / "summaries" / "models-together" / "result_summary.html"
    assert f"together: report: {html_path}" in r.stdout, r.stdout
    html = html_path.read_text()
    for part in ('<svg id="latency0"', '<svg id="latency1"', 'id="recommended0"',
                 'id="recommended1"', '<svg id="memory"', '<tr class="recommended">',
                 "0: mlp_config_default + mlp2_config_default"):
        assert part in html, part
    assert html.count('class="bar"') == 8  # two bars per combination
    html_path.unlink()
    rr = analyzer(["report", "-e", d / "export"], timeout=30)
    assert rr.returncode == 0 and html_path.read_text() == html, rr.stderr
    near = rendered(html_path, tmp_path, 1100, 1000)
    assert near((0xd6, 0x27, 0x28)) > 50  # the recommended combination's red


def test_models_together_with_quick_search(two_mlps, tmp_path):
    """Quick climbs from each model's best alone; here with two candidates besides each
    default, the alone runs resumed from the brute profile's checkpoints."""
    d, args, _ = two_mlps
    ckpt = tmp_path / "checkpoints"
    shutil.copytree(d / "export" / "checkpoints", ckpt)
    (ckpt / "models-together.ckpt").unlink()
    args = [a for a in args] + ["--run-config-search-mode", "quick", "-s", ckpt,
                                "--num-configs-per-model", "2",
                                "--override-output-model-repository"]
    r = analyzer(args)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"^together: (\d+) combinations \((\d+) measured now\)", r.stdout, re.M)
    # candidates: 3 per model (two best alone and the default), 9 pairings at most; quick
    # measures the defaults, the best-alone pair and its neighbours at least
    assert m and 4 <= int(m.group(1)) <= 9 and m.group(1) == m.group(2), r.stdout
    _, rows = read_together(d / "export")
    assert len(rows) == 2 * int(m.group(1))
    assert re.search(r"^together: mlp2 written as", r.stdout, re.M)


def test_models_together_need_every_model(simple_repo, tmp_path):
    r = analyzer(profile_args(simple_repo / "repo", "simple,no_such_model", tmp_path / "out",
                              tmp_path / "export", "--run-config-search-disable",
                              "--run-config-search-max-concurrency", "1",
                              "--run-config-profile-models-concurrently-enable"), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "together: not measured: 1 of the 2 models have no variant that served" in r.stderr
    assert "simple: best:" in r.stdout  # the model that served is still profiled alone
    r = analyzer(profile_args(simple_repo / "repo", "simple,models-together", tmp_path / "o2",
                              tmp_path / "e2", "--run-config-profile-models-concurrently-enable"),
                 timeout=30)
    assert r.returncode == 1 and "a model named 'models-together' cannot be profiled" in r.stderr


def test_refinement_prefers_half_batches_and_pins_instances(simple_repo, tmp_path,
                                                           server_factory):
    """preferred-batch (a best that batches dynamically with max_batch_size >= 4: a batch
    leaves once half full or after 500 us) and pin (host policies: on one NUMA node, the cores
    split in as many sets as instances, a policy each) tried on the best variant; the pinned
    config loads in a server given the flags the analyzer names, its instances on their
    cores."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two cores")
    if Path("/sys/devices/system/node/node1").exists():
        pytest.skip("several NUMA nodes: one policy per node (not this machine class)")
    r = analyzer(profile_args(simple_repo / "repo", "simple", tmp_path / "out",
                              tmp_path / "export", "--run-config-search-max-concurrency", "2",
                              "--run-config-search-min-instance-count", "2",
                              "--run-config-search-max-instance-count", "2",
                              "--run-config-search-min-model-batch-size", "4",
                              "--run-config-search-max-model-batch-size", "4",
                              "--run-config-search-refine", "preferred-batch,pin"))
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((tmp_path / "export" / "results" / "simple.json").read_text())
    assert all(run["error"] is None for run in res["runs"]), res["runs"]
    plain = [run for run in res["runs"] if "preferred" not in run["description"] and
             "pinned" not in run["description"]]
    assert len(plain) == 2  # the default (2 instances here), 2 instances with max_batch_size 4
    base = max(plain, key=lambda run: max(p[1] for p in run["points"]))["description"]
    sets = [cpus[len(cpus) * i // 2:len(cpus) * (i + 1) // 2] for i in range(2)]
    names = [f"cpus{s[0]}-{s[-1]}" for s in sets]
    wanted = ([", preferred batch size half of max_batch_size, max queue delay 500 us"]
              if "dynamic batching" in base else []) + [
        ", pinned to host policies " + ", ".join(names)]
    tuned = [run for run in res["runs"] if run not in plain]
    assert [run["description"] for run in tuned] == [base + w for w in wanted]
    out = tmp_path / "out"
    pinned = tuned[-1]["name"]
    cfg = (out / pinned / "config.pbtxt").read_text()
    for n in names:
        assert f'host_policy: "{n}"' in cfg, cfg
    if len(tuned) == 2:
        cfg = (out / tuned[0]["name"] / "config.pbtxt").read_text()
        assert "preferred_batch_size: 2" in cfg and "max_queue_delay_microseconds: 500" in cfg
    flags = [f"--host-policy={n},cpu-cores={s[0]}-{s[-1]}" for n, s in zip(names, sets)]
    served = [d for d in out.iterdir() if d.name != pinned]
    for d in served:
        shutil.rmtree(d)
    srv = server_factory([out], flags)
    allowed = set()
    for tid in os.listdir(f"/proc/{srv.proc.pid}/task"):
        with open(f"/proc/{srv.proc.pid}/task/{tid}/status") as f:
            allowed |= {ln.split(":\t", 1)[1].strip() for ln in f
                        if ln.startswith("Cpus_allowed_list")}
    for s in sets:  # each instance's threads on its own set
        assert (f"{s[0]}-{s[-1]}" if len(s) > 1 else str(s[0])) in allowed, allowed
