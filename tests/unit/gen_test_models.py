#!/usr/bin/env python3
"""gen_test_models.py - writes the small ONNX models that tests/unit/test_ort_backend.c loads.

Usage: gen_test_models.py [OUT_DIR]   (default: tests/unit/models next to this script)

Every model is IR 8 / opset 13 so that older ONNX Runtime releases load it too. Graph tensors
use a symbolic batch dimension "batch" (and "n" for a variable inner dimension), as the
examples do. Idempotent: rewrites the files each time.
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

T = TensorProto


def save(model_graph, path):
    model = helper.make_model(model_graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def identity(name, elem, shape):
    g = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], name,
        [helper.make_tensor_value_info("INPUT0", elem, shape)],
        [helper.make_tensor_value_info("OUTPUT0", elem, shape)])
    return g


def simple():
    """INT32 [batch,16]: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."""
    shape = ["batch", 16]
    return helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])], "simple",
        [helper.make_tensor_value_info("INPUT0", T.INT32, shape),
         helper.make_tensor_value_info("INPUT1", T.INT32, shape)],
        [helper.make_tensor_value_info("OUTPUT0", T.INT32, shape),
         helper.make_tensor_value_info("OUTPUT1", T.INT32, shape)])


def bad_batch():
    """Declares OUTPUT0 as [batch,n] but transposes, so its first dim is the input's second."""
    return helper.make_graph(
        [helper.make_node("Transpose", ["INPUT0"], ["OUTPUT0"], perm=[1, 0])], "bad_batch",
        [helper.make_tensor_value_info("INPUT0", T.FLOAT, ["batch", "n"])],
        [helper.make_tensor_value_info("OUTPUT0", T.FLOAT, ["batch", "n"])])


def optional_bias():
    """OUTPUT0 = INPUT0 + BIAS, FP32 [3]; BIAS is an initializer that is also a graph input,
    i.e. an overridable initializer that a request may leave out (config `optional`)."""
    bias = helper.make_tensor("BIAS", T.FLOAT, [3], [10.0, 20.0, 30.0])
    return helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "BIAS"], ["OUTPUT0"])], "optional_bias",
        [helper.make_tensor_value_info("INPUT0", T.FLOAT, [3]),
         helper.make_tensor_value_info("BIAS", T.FLOAT, [3])],
        [helper.make_tensor_value_info("OUTPUT0", T.FLOAT, [3])], [bias])


def many_io(count):
    """`count` FP32 [batch,2] inputs, each copied to an output; the names exercise the
    std::unordered_map order that Triton's auto-complete emits (past one rehash)."""
    names = ["in_%s" % w for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta",
                                    "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron",
                                    "pi", "rho", "sigma", "tau", "upsilon")[:count]]
    nodes, ins, outs = [], [], []
    for n in names:
        o = "out" + n[2:]
        nodes.append(helper.make_node("Identity", [n], [o]))
        ins.append(helper.make_tensor_value_info(n, T.FLOAT, ["batch", 2]))
        outs.append(helper.make_tensor_value_info(o, T.FLOAT, ["batch", 2]))
    return helper.make_graph(nodes, "many_io", ins, outs)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "models")
    os.makedirs(out, exist_ok=True)
    models = {
        "simple": simple(),
        "identity_fp32": identity("identity_fp32", T.FLOAT, ["batch", "n"]),
        "identity_string": identity("identity_string", T.STRING, ["batch", "n"]),
        "identity_fp16": identity("identity_fp16", T.FLOAT16, ["batch", "n"]),
        "identity_bool": identity("identity_bool", T.BOOL, ["batch", "n"]),
        "fixed_fp32": identity("fixed_fp32", T.FLOAT, [2, 3]),      # not batchable
        "scalar_fp32": identity("scalar_fp32", T.FLOAT, []),        # rank 0
        "many_io": many_io(20),
        "bad_batch": bad_batch(),
        "optional_bias": optional_bias(),
    }
    for name, g in models.items():
        save(g, os.path.join(out, name + ".onnx"))
    with open(os.path.join(out, "broken.onnx"), "wb") as f:
        f.write(b"this is not an onnx model \0\1\2\xff garbage bytes\n" * 4)


if __name__ == "__main__":
    main()
