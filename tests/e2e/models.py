"""Test model repositories for the end-to-end suite.

Every ONNX model is IR 8 / opset 13 with a symbolic batch dimension `batch` (and `n` where the
config says -1), exactly as the models behind the recorded Triton 2.51 answers
(spec/triton-answers/README.md, "Servers and model repositories").

    python tests/e2e/models.py OUTDIR      # writes every repository below OUTDIR

Repositories (see REPOS):
  repo          the recorded "main server" repository: simple, identity_fp32, simple_noconfig,
                identity_bytes, add_fp16, two_versions, dyn_batch, broken, order_test
  repo_dtypes   one identity model per datatype: identity_<bool|uint8|...|bf16>
  repo_small    the recorded "second server": simple, identity_fp32, identity_bytes, order_test
  repo_strict   simple + simple_noconfig (no config.pbtxt)
  repo_broken   simple + broken
  repo_badcfg   simple + bad_config (config.pbtxt that does not parse)
  repo_examples the models Triton's client examples (src/python/examples) name, beside
                examples/model_repository (simple, densenet_onnx, ...): simple_string,
                simple_int8, simple_identity, inception_graphdef (tests/e2e/test_triton_examples.py)
"""

import os
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

IR_VERSION = 8
OPSET = 13

# (KServe name, config enum, ONNX element type, numpy dtype used on the client side).
# BF16 has no numpy dtype; the client sends float32 values and the wire carries their top half.
DTYPES = [
    ("BOOL", "TYPE_BOOL", TensorProto.BOOL, np.bool_),
    ("UINT8", "TYPE_UINT8", TensorProto.UINT8, np.uint8),
    ("UINT16", "TYPE_UINT16", TensorProto.UINT16, np.uint16),
    ("UINT32", "TYPE_UINT32", TensorProto.UINT32, np.uint32),
    ("UINT64", "TYPE_UINT64", TensorProto.UINT64, np.uint64),
    ("INT8", "TYPE_INT8", TensorProto.INT8, np.int8),
    ("INT16", "TYPE_INT16", TensorProto.INT16, np.int16),
    ("INT32", "TYPE_INT32", TensorProto.INT32, np.int32),
    ("INT64", "TYPE_INT64", TensorProto.INT64, np.int64),
    ("FP16", "TYPE_FP16", TensorProto.FLOAT16, np.float16),
    ("FP32", "TYPE_FP32", TensorProto.FLOAT, np.float32),
    ("FP64", "TYPE_FP64", TensorProto.DOUBLE, np.float64),
    ("BF16", "TYPE_BF16", TensorProto.BFLOAT16, np.float32),
]


def dtype_model_name(kserve):
    """identity_fp32 is the recorded model; every other datatype gets identity_<lower>."""
    return "identity_" + kserve.lower()


DTYPE_MODELS = {dtype_model_name(k): (k, enum, onnx_t, np_t) for k, enum, onnx_t, np_t in DTYPES}

BROKEN_BYTES = b"this is not an onnx model \x00\x01\x02\xff garbage bytes\n" * 4
assert len(BROKEN_BYTES) == 180


# ----------------------------------------------------------------------------- graphs

def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _save(graph, path):
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="nereid-e2e")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def graph_simple():
    """INT32 INPUT0, INPUT1 [batch,16] -> OUTPUT0 = sum, OUTPUT1 = difference."""
    shape = ["batch", 16]
    return helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
        "simple",
        [_vi("INPUT0", TensorProto.INT32, shape), _vi("INPUT1", TensorProto.INT32, shape)],
        [_vi("OUTPUT0", TensorProto.INT32, shape), _vi("OUTPUT1", TensorProto.INT32, shape)])


def graph_identity(elem, double=False):
    """INPUT0 [batch,n] -> OUTPUT0 = INPUT0 (or INPUT0 + INPUT0 when double=True)."""
    shape = ["batch", "n"]
    node = (helper.make_node("Add", ["INPUT0", "INPUT0"], ["OUTPUT0"]) if double
            else helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"]))
    return helper.make_graph([node], "identity", [_vi("INPUT0", elem, shape)],
                             [_vi("OUTPUT0", elem, shape)])


def graph_sum():
    """FP32 INPUT0 [batch,n] -> OUTPUT0 [batch,1], the sum of each row: a large input, a small
    output (tests/e2e/test_memory.py measures what a request's input costs)."""
    ax1 = helper.make_tensor("ax1", TensorProto.INT64, [1], [1])
    return helper.make_graph(
        [helper.make_node("ReduceSum", ["INPUT0", "ax1"], ["OUTPUT0"], keepdims=1)],
        "sum", [_vi("INPUT0", TensorProto.FLOAT, ["batch", "n"])],
        [_vi("OUTPUT0", TensorProto.FLOAT, ["batch", 1])], initializer=[ax1])


def graph_add_fp16():
    """FP16 INPUT0 + INPUT1, shape [4], no batch dimension."""
    return helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"])],
        "add_fp16",
        [_vi("INPUT0", TensorProto.FLOAT16, [4]), _vi("INPUT1", TensorProto.FLOAT16, [4])],
        [_vi("OUTPUT0", TensorProto.FLOAT16, [4])])


def graph_order_test():
    """One FP32 input; graph outputs ZZZ = Identity, AAA = Neg, MMM = Abs, in that order."""
    shape = ["batch", "n"]
    return helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["ZZZ"]),
         helper.make_node("Neg", ["INPUT0"], ["AAA"]),
         helper.make_node("Abs", ["INPUT0"], ["MMM"])],
        "order_test",
        [_vi("INPUT0", TensorProto.FLOAT, shape)],
        [_vi("ZZZ", TensorProto.FLOAT, shape), _vi("AAA", TensorProto.FLOAT, shape),
         _vi("MMM", TensorProto.FLOAT, shape)])


def graph_batch_sum():
    """FP32 INPUT0 [batch,n] -> OUTPUT0 = INPUT0, BATCH_SUM [batch,1] = the sum of every value
    of the whole executed batch on each row. With request i sending 2**i, a response's
    BATCH_SUM names exactly the requests that executed with it (tests of the batcher)."""
    shape = ["batch", "n"]
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    ax1 = helper.make_tensor("ax1", TensorProto.INT64, [1], [1])
    ax01 = helper.make_tensor("ax01", TensorProto.INT64, [2], [0, 1])
    return helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"]),
         helper.make_node("ReduceSum", ["INPUT0", "ax1"], ["rows"], keepdims=1),
         helper.make_node("Mul", ["rows", "zero"], ["zeros"]),
         helper.make_node("ReduceSum", ["INPUT0", "ax01"], ["total"], keepdims=1),
         helper.make_node("Add", ["zeros", "total"], ["BATCH_SUM"])],
        "batch_sum",
        [_vi("INPUT0", TensorProto.FLOAT, shape)],
        [_vi("OUTPUT0", TensorProto.FLOAT, shape), _vi("BATCH_SUM", TensorProto.FLOAT, ["batch", 1])],
        initializer=[zero, ax1, ax01])


def write_batch_sum(repo, name, extra, max_batch_size=8):
    """Writes model `name` (graph_batch_sum) with `extra` appended to its config."""
    d = Path(repo) / name
    _write(d / "config.pbtxt",
           f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: {max_batch_size}\n'
           'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
           'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] },'
           ' { name: "BATCH_SUM" data_type: TYPE_FP32 dims: [ 1 ] } ]\n' + extra)
    _save(graph_batch_sum(), d / "1" / "model.onnx")
    return d


def write_identity(repo, name, type_enum, elem, dims, out_dims=None, max_batch_size=0):
    """Writes model `name`: graph_identity of ONNX type `elem` (rank 2, so `dims` has two entries
    without batching, one with) and a config with INPUT0 of `type_enum` and `dims`, OUTPUT0 of
    `out_dims` (default `dims`; ONNX Runtime's variable output dims need -1 in the config)."""
    d = Path(repo) / name
    dl = ", ".join(str(x) for x in dims)
    ol = ", ".join(str(x) for x in (dims if out_dims is None else out_dims))
    _write(d / "config.pbtxt",
           f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: {max_batch_size}\n'
           f'input [ {{ name: "INPUT0" data_type: {type_enum} dims: [ {dl} ] }} ]\n'
           f'output [ {{ name: "OUTPUT0" data_type: {type_enum} dims: [ {ol} ] }} ]\n'
           'instance_group [ { kind: KIND_CPU, count: 1 } ]\n')
    _save(graph_identity(elem), d / "1" / "model.onnx")
    return d


def write_sequence_identity(repo, name):
    """Writes model `name`: FP32 INPUT0 [batch,n] -> OUTPUT0 = INPUT0, plus the sequence START
    control input [batch,1] the graph takes and ignores, with a config that has
    sequence_batching (a model Triton serves with its sequence batcher)."""
    d = Path(repo) / name
    _write(d / "config.pbtxt",
           f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
           'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
           'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
           'sequence_batching { control_input [ { name: "START" control [ { kind: '
           'CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] } ] }\n'
           'instance_group [ { kind: KIND_CPU, count: 1 } ]\n')
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], name,
        [_vi("INPUT0", TensorProto.FLOAT, ["batch", "n"]),
         _vi("START", TensorProto.FLOAT, ["batch", 1])],
        [_vi("OUTPUT0", TensorProto.FLOAT, ["batch", "n"])])
    _save(graph, d / "1" / "model.onnx")
    return d


# ----------------------------------------------------------------------------- configs

CONFIG_SIMPLE = """name: "simple"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""


def config_identity(name, type_enum="TYPE_FP32", extra=""):
    return (f'name: "{name}"\n'
            'backend: "onnxruntime"\n'
            'max_batch_size: 8\n'
            f'input [ {{ name: "INPUT0" data_type: {type_enum} dims: [ -1 ] }} ]\n'
            f'output [ {{ name: "OUTPUT0" data_type: {type_enum} dims: [ -1 ] }} ]\n'
            'instance_group [ { kind: KIND_CPU, count: 1 } ]\n' + extra)


CONFIG_ADD_FP16 = """name: "add_fp16"
backend: "onnxruntime"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP16 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP16 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""

# dyn_batch: identity_fp32's config plus a dynamic batcher and two instances (README).
CONFIG_DYN_BATCH = """name: "dyn_batch"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100 }
instance_group [ { count: 2, kind: KIND_CPU } ]
"""

CONFIG_ORDER_TEST = """name: "order_test"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "MMM" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "ZZZ" data_type: TYPE_FP32 dims: [ -1 ] }, { name: "AAA" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""

# A config.pbtxt that does not parse (unterminated list, unknown enum value).
CONFIG_BAD = """name: "bad_config"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_NOT_A_TYPE dims: [ -1 ] }
"""


# ----------------------------------------------------------------------------- Triton's example models
# The models that Triton's client examples (client repository, src/python/examples) call by name,
# with the IO names, datatypes and shapes those examples send. "simple" and "densenet_onnx" come
# from examples/model_repository; the ones below complete the set nereid can serve.

def graph_simple_string():
    """simple_string: BYTES INPUT0, INPUT1 [batch,16] holding decimal integers -> OUTPUT0 = sum,
    OUTPUT1 = difference, as decimal strings (ONNX Cast between string and int32)."""
    shape = ["batch", 16]
    S, I32 = TensorProto.STRING, TensorProto.INT32
    return helper.make_graph(
        [helper.make_node("Cast", ["INPUT0"], ["a"], to=I32),
         helper.make_node("Cast", ["INPUT1"], ["b"], to=I32),
         helper.make_node("Add", ["a", "b"], ["sum"]),
         helper.make_node("Sub", ["a", "b"], ["diff"]),
         helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=S),
         helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=S)],
        "simple_string",
        [_vi("INPUT0", S, shape), _vi("INPUT1", S, shape)],
        [_vi("OUTPUT0", S, shape), _vi("OUTPUT1", S, shape)])


def graph_simple_int8():
    """simple_int8: INT8 INPUT0, INPUT1 [batch,16] -> OUTPUT0 = sum, OUTPUT1 = difference
    (computed in int32, cast back to int8: opset 13's Add and Sub take no int8)."""
    shape = ["batch", 16]
    I8, I32 = TensorProto.INT8, TensorProto.INT32
    return helper.make_graph(
        [helper.make_node("Cast", ["INPUT0"], ["a"], to=I32),
         helper.make_node("Cast", ["INPUT1"], ["b"], to=I32),
         helper.make_node("Add", ["a", "b"], ["sum"]),
         helper.make_node("Sub", ["a", "b"], ["diff"]),
         helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=I8),
         helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=I8)],
        "simple_int8",
        [_vi("INPUT0", I8, shape), _vi("INPUT1", I8, shape)],
        [_vi("OUTPUT0", I8, shape), _vi("OUTPUT1", I8, shape)])


INCEPTION_OUT = "InceptionV3/Predictions/Softmax"
INCEPTION_CLASSES = 1001


def graph_inception_standin():
    """inception_graphdef's IO (Triton's is a TensorFlow GraphDef, which nereid cannot run):
    FP32 input [batch,299,299,3] (NHWC) -> InceptionV3/Predictions/Softmax [batch,1001], the
    per-channel means through a fixed 3x1001 matrix, then Softmax."""
    w = np.linspace(-1.0, 1.0, 3 * INCEPTION_CLASSES, dtype=np.float32).reshape(3, -1)
    weights = helper.make_tensor("w", TensorProto.FLOAT, list(w.shape), w.flatten().tolist())
    return helper.make_graph(
        [helper.make_node("ReduceMean", ["input"], ["means"], axes=[1, 2], keepdims=0),
         helper.make_node("MatMul", ["means", "w"], ["logits"]),
         helper.make_node("Softmax", ["logits"], [INCEPTION_OUT], axis=1)],
        "inception_standin",
        [_vi("input", TensorProto.FLOAT, ["batch", 299, 299, 3])],
        [_vi(INCEPTION_OUT, TensorProto.FLOAT, ["batch", INCEPTION_CLASSES])],
        initializer=[weights])


def config_two_in_two_out(name, type_enum):
    """simple's config (INPUT0, INPUT1 -> OUTPUT0, OUTPUT1, dims [16]) with another datatype."""
    def io(n):
        return f'{{ name: "{n}" data_type: {type_enum} dims: [ 16 ] }}'
    return (f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
            f'input [ {io("INPUT0")}, {io("INPUT1")} ]\n'
            f'output [ {io("OUTPUT0")}, {io("OUTPUT1")} ]\n'
            'instance_group [ { kind: KIND_CPU, count: 1 } ]\n')


CONFIG_INCEPTION_STANDIN = f"""name: "inception_graphdef"
backend: "onnxruntime"
max_batch_size: 128
input [ {{ name: "input" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 299, 299, 3 ] }} ]
output [ {{ name: "{INCEPTION_OUT}" data_type: TYPE_FP32 dims: [ {INCEPTION_CLASSES} ] label_filename: "inception_labels.txt" }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
"""

TRITON_EXAMPLE_MODELS = ["inception_graphdef", "simple_identity", "simple_int8", "simple_string"]


def write_triton_example_model(repo, name):
    """Writes one of TRITON_EXAMPLE_MODELS (directory, config.pbtxt, version 1) into `repo`."""
    d = Path(repo) / name
    if name == "simple_string":
        _write(d / "config.pbtxt", config_two_in_two_out(name, "TYPE_STRING"))
        _save(graph_simple_string(), d / "1" / "model.onnx")
    elif name == "simple_int8":
        _write(d / "config.pbtxt", config_two_in_two_out(name, "TYPE_INT8"))
        _save(graph_simple_int8(), d / "1" / "model.onnx")
    elif name == "simple_identity":
        _write(d / "config.pbtxt", config_identity(name, "TYPE_STRING"))
        _save(graph_identity(TensorProto.STRING), d / "1" / "model.onnx")
    elif name == "inception_graphdef":
        _write(d / "config.pbtxt", CONFIG_INCEPTION_STANDIN)
        _write(d / "inception_labels.txt",
               "".join(f"class_{i}\n" for i in range(INCEPTION_CLASSES)))
        _save(graph_inception_standin(), d / "1" / "model.onnx")
    else:
        raise KeyError(f"unknown Triton example model {name!r}")
    return d


# ----------------------------------------------------------------------------- writers

def _write(path, text_or_bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text_or_bytes, bytes):
        path.write_bytes(text_or_bytes)
    else:
        path.write_text(text_or_bytes)


def write_model(repo, name):
    """Writes model `name` (directory, config.pbtxt, version dirs) into `repo`."""
    d = Path(repo) / name
    if name == "simple":
        _write(d / "config.pbtxt", CONFIG_SIMPLE)
        _save(graph_simple(), d / "1" / "model.onnx")
    elif name == "simple_noconfig":
        _save(graph_simple(), d / "1" / "model.onnx")  # no config.pbtxt: auto-complete
    elif name == "identity_fp32":
        _write(d / "config.pbtxt", config_identity("identity_fp32"))
        _save(graph_identity(TensorProto.FLOAT), d / "1" / "model.onnx")
    elif name == "sum_fp32":  # in no repository of REPOS; test_memory.py writes its own
        _write(d / "config.pbtxt",
               'name: "sum_fp32"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
               'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
               'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
               'instance_group [ { kind: KIND_CPU, count: 1 } ]\n')
        _save(graph_sum(), d / "1" / "model.onnx")
    elif name == "identity_bytes":
        _write(d / "config.pbtxt", config_identity("identity_bytes", "TYPE_STRING"))
        _save(graph_identity(TensorProto.STRING), d / "1" / "model.onnx")
    elif name == "add_fp16":
        _write(d / "config.pbtxt", CONFIG_ADD_FP16)
        _save(graph_add_fp16(), d / "1" / "model.onnx")
    elif name == "two_versions":
        _write(d / "config.pbtxt",
               config_identity("two_versions", extra="version_policy: { all {} }\n"))
        _save(graph_identity(TensorProto.FLOAT), d / "1" / "model.onnx")
        _save(graph_identity(TensorProto.FLOAT, double=True), d / "2" / "model.onnx")
    elif name == "dyn_batch":
        _write(d / "config.pbtxt", CONFIG_DYN_BATCH)
        _save(graph_identity(TensorProto.FLOAT), d / "1" / "model.onnx")
    elif name == "broken":
        _write(d / "config.pbtxt", config_identity("broken"))
        _write(d / "1" / "model.onnx", BROKEN_BYTES)
    elif name == "order_test":
        _write(d / "config.pbtxt", CONFIG_ORDER_TEST)
        _save(graph_order_test(), d / "1" / "model.onnx")
    elif name == "bad_config":
        _write(d / "config.pbtxt", CONFIG_BAD)
        _save(graph_identity(TensorProto.FLOAT), d / "1" / "model.onnx")
    elif name in DTYPE_MODELS:
        _, enum, onnx_t, _ = DTYPE_MODELS[name]
        _write(d / "config.pbtxt", config_identity(name, enum))
        _save(graph_identity(onnx_t), d / "1" / "model.onnx")
    elif name in TRITON_EXAMPLE_MODELS:
        write_triton_example_model(repo, name)
    else:
        raise KeyError(f"unknown test model {name!r}")
    return d


MAIN_MODELS = ["add_fp16", "broken", "dyn_batch", "identity_bytes", "identity_fp32", "order_test",
               "simple", "simple_noconfig", "two_versions"]
DTYPE_REPO_MODELS = [n for n in DTYPE_MODELS if n != "identity_fp32"]

REPOS = {
    "repo": MAIN_MODELS,
    "repo_dtypes": DTYPE_REPO_MODELS,
    "repo_small": ["identity_bytes", "identity_fp32", "order_test", "simple"],
    "repo_strict": ["simple", "simple_noconfig"],
    "repo_broken": ["broken", "simple"],
    "repo_badcfg": ["bad_config", "simple"],
    # beside examples/model_repository, which has simple and densenet_onnx (no name twice)
    "repo_examples": TRITON_EXAMPLE_MODELS,
}


def build_all(root):
    """Writes every repository in REPOS below `root`; returns {repo name: Path}."""
    root = Path(root)
    out = {}
    for repo, names in REPOS.items():
        for name in names:
            write_model(root / repo, name)
        out[repo] = root / repo
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTDIR")
    for repo, path in build_all(sys.argv[1]).items():
        print(f"{repo}: {path} ({', '.join(sorted(os.listdir(path)))})")


# ---- ensembles (issue #36) -------------------------------------------------------------------

def _ensemble_config(name, max_batch_size, inputs, outputs, steps):
    """An ensemble's config.pbtxt: inputs/outputs as (name, type, dims), steps as
    (model, version, {model input: ensemble tensor}, {model output: ensemble tensor})."""
    def io(kind, ts):
        return f"{kind} [ " + ", ".join(
            f'{{ name: "{n}" data_type: {t} dims: [ {", ".join(str(d) for d in dims)} ] }}'
            for n, t, dims in ts) + " ]\n"

    def kv(key, m):
        return " ".join(f'{key} {{ key: "{k}" value: "{v}" }}' for k, v in m.items())

    text = (f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
            + io("input", inputs) + io("output", outputs) + "ensemble_scheduling { step [ ")
    text += ", ".join(f'{{ model_name: "{m}" model_version: {v} {kv("input_map", i)} '
                      f'{kv("output_map", o)} }}' for m, v, i, o in steps)
    return text + " ] }\n"


INT16 = [16]


def write_ensemble(repo, name, config):
    """An ensemble directory: its config and an empty version directory, as Triton needs."""
    d = Path(repo) / name
    _write(d / "config.pbtxt", config)
    (d / "1").mkdir(parents=True, exist_ok=True)
    return d


def write_simple_two_versions(repo):
    """`simple` with versions 1 and 2 both served, as Triton's qa ensembles use it."""
    d = Path(repo) / "simple"
    _write(d / "config.pbtxt", CONFIG_SIMPLE + "version_policy: { all { } }\n")
    _save(graph_simple(), d / "1" / "model.onnx")
    _save(graph_simple(), d / "2" / "model.onnx")


def ensemble_add_sub_config(name="ensemble_add_sub"):
    """Triton's qa ensemble_add_sub (L0_simple_ensemble): six steps over `simple`, versions -1
    (2) and 1, that come back to OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1."""
    io = [("INPUT0", "TYPE_INT32", INT16), ("INPUT1", "TYPE_INT32", INT16)]
    out = [("OUTPUT0", "TYPE_INT32", INT16), ("OUTPUT1", "TYPE_INT32", INT16)]
    steps = [
        ("simple", -1, {"INPUT0": "INPUT0", "INPUT1": "INPUT0"}, {"OUTPUT0": "double_input0"}),
        ("simple", 1, {"INPUT0": "INPUT1", "INPUT1": "INPUT1"}, {"OUTPUT0": "double_input1"}),
        ("simple", -1, {"INPUT0": "double_input0", "INPUT1": "INPUT0"}, {"OUTPUT1": "input0_val"}),
        ("simple", 1, {"INPUT0": "double_input1", "INPUT1": "INPUT1"}, {"OUTPUT1": "input1_val"}),
        ("simple", -1, {"INPUT0": "input0_val", "INPUT1": "INPUT1"}, {"OUTPUT0": "OUTPUT0"}),
        ("simple", 1, {"INPUT0": "INPUT0", "INPUT1": "input1_val"}, {"OUTPUT1": "OUTPUT1"}),
    ]
    return _ensemble_config(name, 8, io, out, steps)


def ensemble_diamond_config(name="ensemble_diamond"):
    """A diamond over `simple`: one step's two outputs fan out to two steps that run at once,
    whose outputs meet in a fourth. SUM = 2(a+b) + 2(a-b) = 4a, DIFF = 2(a+b) - 2(a-b) = 4b."""
    io = [("IN0", "TYPE_INT32", INT16), ("IN1", "TYPE_INT32", INT16)]
    out = [("SUM", "TYPE_INT32", INT16), ("DIFF", "TYPE_INT32", INT16)]
    steps = [
        ("simple", -1, {"INPUT0": "IN0", "INPUT1": "IN1"}, {"OUTPUT0": "s", "OUTPUT1": "d"}),
        ("simple", -1, {"INPUT0": "s", "INPUT1": "s"}, {"OUTPUT0": "s2"}),
        ("simple", -1, {"INPUT0": "d", "INPUT1": "d"}, {"OUTPUT0": "d2"}),
        ("simple", -1, {"INPUT0": "s2", "INPUT1": "d2"}, {"OUTPUT0": "SUM", "OUTPUT1": "DIFF"}),
    ]
    return _ensemble_config(name, 8, io, out, steps)


def ensemble_chain_config(name="ensemble_chain", first="identity_fp32", second="dyn_batch"):
    """Two FP32 identity steps one after the other (the second, by default, batching)."""
    io = [("IN", "TYPE_FP32", [-1])]
    out = [("OUT", "TYPE_FP32", [-1])]
    steps = [(first, -1, {"INPUT0": "IN"}, {"OUTPUT0": "mid"}),
             (second, -1, {"INPUT0": "mid"}, {"OUTPUT0": "OUT"})]
    return _ensemble_config(name, 8, io, out, steps)


def ensemble_nested_config(name="ensemble_nested", inner="ensemble_add_sub"):
    """An ensemble with an ensemble as a step: `inner` (ensemble_add_sub's tensors), then
    `simple` version 2 on its two outputs. OUT0 = 2 * INPUT0, OUT1 = 2 * INPUT1."""
    io = [("INPUT0", "TYPE_INT32", INT16), ("INPUT1", "TYPE_INT32", INT16)]
    out = [("OUT0", "TYPE_INT32", INT16), ("OUT1", "TYPE_INT32", INT16)]
    steps = [(inner, -1, {"INPUT0": "INPUT0", "INPUT1": "INPUT1"},
              {"OUTPUT0": "sum", "OUTPUT1": "diff"}),
             ("simple", 2, {"INPUT0": "sum", "INPUT1": "diff"},
              {"OUTPUT0": "OUT0", "OUTPUT1": "OUT1"})]
    return _ensemble_config(name, 8, io, out, steps)
