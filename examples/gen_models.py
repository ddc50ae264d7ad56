#!/usr/bin/env python3
"""Writes the example ONNX models into a Triton model repository: <repo>/<model>/1/model.onnx.

The config.pbtxt and label files next to them are committed; only model.onnx is generated.
Weights are random with a fixed seed, so every run produces byte-identical files; a file whose
content would not change is left alone. Models use IR version 8 and opset 13.

  gen_models.py [--check] REPO      --check also runs each model once with onnxruntime
"""
import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8
OPSET = 13


class Graph:
    """Collects nodes and initializers with deterministic names and weights."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def node(self, op, inputs, output=None, **attrs):
        out = output or self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def const(self, prefix, array):
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def conv(self, x, cin, cout, k, stride=1, pad=0, bias=True, out=None):
        # He initialisation keeps the activation scale steady through ReLU layers.
        std = np.sqrt(2.0 / (cin * k * k))
        w = (self.rng.standard_normal((cout, cin, k, k)) * std).astype(np.float32)
        inputs = [x, self.const("w", w)]
        if bias:
            inputs.append(self.const("b", np.zeros(cout, np.float32)))
        return self.node("Conv", inputs, out, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4)

    def conv_relu(self, x, cin, cout, k, stride=1, pad=0):
        return self.node("Relu", [self.conv(x, cin, cout, k, stride, pad)])

    def bn_relu(self, x, c):
        r = self.rng
        scale = r.uniform(0.8, 1.2, c).astype(np.float32)
        shift = r.uniform(-0.1, 0.1, c).astype(np.float32)
        mean = r.uniform(-0.1, 0.1, c).astype(np.float32)
        var = r.uniform(0.8, 1.2, c).astype(np.float32)
        bn = self.node("BatchNormalization",
                       [x] + [self.const(n, a) for n, a in
                              (("gamma", scale), ("beta", shift), ("mean", mean), ("var", var))],
                       epsilon=1e-5)
        return self.node("Relu", [bn])

    def maxpool(self, x, k, stride, pad):
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)

    def model(self, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, producer_name="nereid-gen_models",
                              opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def gen_simple():
    g = Graph(0)
    g.node("Add", ["INPUT0", "INPUT1"], "OUTPUT0")
    g.node("Sub", ["INPUT0", "INPUT1"], "OUTPUT1")
    shape = ["batch", 16]
    return g.model("simple",
                   [tensor("INPUT0", TensorProto.INT32, shape), tensor("INPUT1", TensorProto.INT32, shape)],
                   [tensor("OUTPUT0", TensorProto.INT32, shape), tensor("OUTPUT1", TensorProto.INT32, shape)])


def gen_identity_fp32():
    g = Graph(0)
    g.node("Identity", ["INPUT0"], "OUTPUT0")
    return g.model("identity_fp32", [tensor("INPUT0", TensorProto.FLOAT, ["batch", "n"])],
                   [tensor("OUTPUT0", TensorProto.FLOAT, ["batch", "n"])])


# Inception-v1 (GoogLeNet) modules: (1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj).
INCEPTION = [
    ("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64), "pool",
    ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64),
    ("4c", 128, 128, 256, 24, 64, 64), ("4d", 112, 144, 288, 32, 64, 64),
    ("4e", 256, 160, 320, 32, 128, 128), "pool",
    ("5a", 256, 160, 320, 32, 128, 128), ("5b", 384, 192, 384, 48, 128, 128),
]


def gen_inception():
    g = Graph(1)
    x = g.conv_relu("input", 3, 64, 7, stride=2, pad=3)        # 112x112
    x = g.maxpool(x, 3, 2, 1)                                    # 56x56
    x = g.conv_relu(x, 64, 64, 1)
    x = g.conv_relu(x, 64, 192, 3, pad=1)
    x = g.maxpool(x, 3, 2, 1)                                    # 28x28
    c = 192
    for mod in INCEPTION:
        if mod == "pool":
            x = g.maxpool(x, 3, 2, 1)                            # 14x14, then 7x7
            continue
        _, n1, r3, n3, r5, n5, pp = mod
        b1 = g.conv_relu(x, c, n1, 1)
        b3 = g.conv_relu(g.conv_relu(x, c, r3, 1), r3, n3, 3, pad=1)
        b5 = g.conv_relu(g.conv_relu(x, c, r5, 1), r5, n5, 5, pad=2)
        bp = g.conv_relu(g.maxpool(x, 3, 1, 1), c, pp, 1)
        x = g.node("Concat", [b1, b3, b5, bp], axis=1)
        c = n1 + n3 + n5 + pp
    x = g.node("GlobalAveragePool", [x])
    x = g.node("Flatten", [x], axis=1)
    w = (g.rng.standard_normal((1000, c)) * np.sqrt(1.0 / c)).astype(np.float32)
    x = g.node("Gemm", [x, g.const("fc_w", w), g.const("fc_b", np.zeros(1000, np.float32))], transB=1)
    g.node("Softmax", [x], "output", axis=1)
    return g.model("inception_onnx", [tensor("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
                   [tensor("output", TensorProto.FLOAT, ["batch", 1000])])


def gen_densenet():
    growth, blocks = 32, (6, 12, 24, 16)
    g = Graph(2)
    x = g.conv("data_0", 3, 64, 7, stride=2, pad=3, bias=False)  # 112x112
    x = g.maxpool(g.bn_relu(x, 64), 3, 2, 1)                     # 56x56
    c = 64
    for i, layers in enumerate(blocks):
        for _ in range(layers):
            y = g.conv(g.bn_relu(x, c), c, 4 * growth, 1, bias=False)
            y = g.conv(g.bn_relu(y, 4 * growth), 4 * growth, growth, 3, pad=1, bias=False)
            x = g.node("Concat", [x, y], axis=1)
            c += growth
        if i < len(blocks) - 1:
            x = g.conv(g.bn_relu(x, c), c, c // 2, 1, bias=False)
            x = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
    x = g.node("GlobalAveragePool", [g.bn_relu(x, c)])           # [1,1024,1,1]
    w = (g.rng.standard_normal((1000, c, 1, 1)) * np.sqrt(1.0 / c)).astype(np.float32)
    x = g.node("Conv", [x, g.const("fc6_w", w), g.const("fc6_b", np.zeros(1000, np.float32))], "fc6",
               kernel_shape=[1, 1])
    g.node("Softmax", [x], "fc6_1", axis=1)
    return g.model("densenet_onnx", [tensor("data_0", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [tensor("fc6_1", TensorProto.FLOAT, [1, 1000, 1, 1])])


MODELS = {
    "simple": gen_simple,
    "identity_fp32": gen_identity_fp32,
    "inception_onnx": gen_inception,
    "densenet_onnx": gen_densenet,
}


def check(name, path):
    """Runs the model once with onnxruntime and checks its outputs."""
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    if name == "simple":
        a = rng.integers(-100, 100, (2, 16), dtype=np.int32)
        b = rng.integers(-100, 100, (2, 16), dtype=np.int32)
        o0, o1 = sess.run(["OUTPUT0", "OUTPUT1"], {"INPUT0": a, "INPUT1": b})
        assert o0.dtype == np.int32 and np.array_equal(o0, a + b) and np.array_equal(o1, a - b)
        return
    if name == "identity_fp32":
        a = rng.standard_normal((3, 5)).astype(np.float32)
        (o,) = sess.run(None, {"INPUT0": a})
        assert np.array_equal(o, a)
        return
    if name == "inception_onnx":
        feed, shape = {"input": rng.standard_normal((2, 3, 224, 224)).astype(np.float32)}, (2, 1000)
    else:
        feed, shape = {"data_0": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}, (1, 1000, 1, 1)
    (o,) = sess.run(None, feed)
    assert o.shape == shape and o.dtype == np.float32, (o.shape, o.dtype)
    assert np.all(np.isfinite(o)), f"{name}: output has NaN/Inf"
    sums = o.reshape(shape[0], 1000).sum(axis=1)
    assert np.allclose(sums, 1.0, atol=1e-4), f"{name}: softmax rows sum to {sums}"
    assert len(np.unique(o)) > 100, f"{name}: degenerate output"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", help="model repository directory")
    ap.add_argument("--check", action="store_true", help="run each model once with onnxruntime")
    args = ap.parse_args()

    for name, gen in MODELS.items():
        t0 = time.monotonic()
        data = gen().SerializeToString()
        path = os.path.join(args.repo, name, "1", "model.onnx")
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except FileNotFoundError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            print(f"gen_models: wrote {path} ({len(data)} bytes, {time.monotonic() - t0:.1f} s)")
        if args.check:
            check(name, path)
            print(f"gen_models: checked {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
