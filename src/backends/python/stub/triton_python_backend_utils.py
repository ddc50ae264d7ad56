"""triton_python_backend_utils for nereid's Python backend.

The module a Triton `model.py` imports (`import triton_python_backend_utils as pb_utils`), written
for nereid from the interface Triton's Python backend documents: tensors, requests, responses,
errors, logging and the model-config helpers. nereid's stub (nereid_stub.py) makes it importable
in every model process; nothing needs installing by hand. What crosses to the server (logging,
requests to other models) goes through `_stub`, which the stub sets once it runs.
"""
import json
import struct
import weakref

import numpy as np

# ---- constants (TRITONSERVER_* values of Triton's C API) ---------------------------------------
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

_stub = None  # the running stub (nereid_stub.Stub): logging and requests to the server

# ---- element types ------------------------------------------------------------------------------
# (TRITONSERVER_DataType code, wire name, numpy type); BF16 has no numpy type.
_TYPES = (
    (1, "BOOL", np.bool_), (2, "UINT8", np.uint8), (3, "UINT16", np.uint16),
    (4, "UINT32", np.uint32), (5, "UINT64", np.uint64), (6, "INT8", np.int8),
    (7, "INT16", np.int16), (8, "INT32", np.int32), (9, "INT64", np.int64),
    (10, "FP16", np.float16), (11, "FP32", np.float32), (12, "FP64", np.float64),
    (13, "BYTES", np.object_), (14, "BF16", None),
)
_CODE_TO_NP = {c: t for c, _, t in _TYPES}
_NAME_TO_NP = {n: t for _, n, t in _TYPES}
_NP_TO_CODE = {np.dtype(t): c for c, _, t in _TYPES if t is not None}
_NP_TO_NAME = {np.dtype(t): n for _, n, t in _TYPES if t is not None}
_NP_TO_NAME[np.dtype(np.bytes_)] = "BYTES"


def triton_to_numpy_type(data_type):
    """The numpy type of a TRITONSERVER_DataType code (None for an unknown one)."""
    return _CODE_TO_NP.get(data_type)


def numpy_to_triton_type(data_type):
    """The TRITONSERVER_DataType code of a numpy type (None when Triton has none)."""
    try:
        dt = np.dtype(data_type)
    except TypeError:
        return None
    if dt.kind in "SU":
        return 13
    return _NP_TO_CODE.get(dt)


def triton_string_to_numpy(triton_type_string):
    """The numpy type of a config data type ("TYPE_FP32", "TYPE_STRING", ...)."""
    name = triton_type_string[5:] if triton_type_string.startswith("TYPE_") else triton_type_string
    if name == "STRING":
        name = "BYTES"
    return _NAME_TO_NP.get(name)


def _wire_name(arr):
    """The KServe datatype name of a numpy array's elements, or None."""
    dt = arr.dtype
    if dt.kind in "SUO":
        return "BYTES"
    return _NP_TO_NAME.get(dt)


def serialize_byte_tensor(input_tensor):
    """An object/bytes array in Triton's BYTES wire form (bytes): each element's length (uint32
    little-endian) then its bytes, in C order. An empty array gives (), another dtype None."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype.kind not in "OS":
        return None
    return _serialize(input_tensor)


def _serialize(arr):
    parts = []
    for e in np.nditer(arr, flags=["refs_ok"], order="C"):
        v = e.item()
        if isinstance(v, str):
            v = v.encode("utf-8")
        elif not isinstance(v, (bytes, bytearray)):
            v = str(v).encode("utf-8")
        parts.append(len(v).to_bytes(4, "little"))
        parts.append(v)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor):
    """The inverse of serialize_byte_tensor: a 1-D np.object_ array of bytes."""
    buf = memoryview(encoded_tensor).cast("B") if not isinstance(encoded_tensor, bytes) else \
        encoded_tensor
    out, off, n = [], 0, len(buf)
    while off < n:
        ln = int.from_bytes(buf[off:off + 4], "little")
        off += 4
        out.append(bytes(buf[off:off + ln]))
        off += ln
    return np.array(out, dtype=np.object_)


# ---- errors -------------------------------------------------------------------------------------
class TritonError(Exception):
    """An error a response carries (InferenceResponse(error=...)) or a model raises, with one of
    Triton's codes."""
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, msg, code=INTERNAL):
        super().__init__(msg)
        self._msg = "" if msg is None else str(msg)
        self._code = code

    def message(self):
        return self._msg

    def code(self):
        return self._code

    def __str__(self):
        return self._msg


class TritonModelException(Exception):
    """What a failed request to another model raises, and what a model may raise itself."""

    def message(self):
        return str(self.args[0]) if self.args else ""


# ---- tensors ------------------------------------------------------------------------------------
class _DLPackHolder:
    """Wraps a bare DLPack capsule so numpy.from_dlpack accepts it (CPU memory only)."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class Tensor:
    """A named tensor: Tensor(name, numpy_array). Every nereid tensor lives in CPU memory."""
    __slots__ = ("_name", "_array")

    def __init__(self, name, data, *args, **kwargs):
        if not isinstance(data, np.ndarray):
            raise TritonModelException(
                "Tensor '%s': data must be a numpy array, got %s" % (name, type(data).__name__))
        if data.dtype.kind == "U" or _wire_name(data) is None:
            raise TritonModelException("NumPy dtype is not supported.")
        if not name:
            raise TritonModelException("Tensor name cannot be an empty string.")
        self._name = name
        self._array = data

    def name(self):
        return self._name

    def as_numpy(self):
        return self._array

    def is_cpu(self):
        return True

    def shape(self):
        return list(self._array.shape)

    def triton_dtype(self):
        return numpy_to_triton_type(self._array.dtype)

    def to_dlpack(self):
        if self._array.dtype == np.object_:
            raise TritonModelException("DLPack does not support BYTES tensors")
        return self._array.__dlpack__()

    @staticmethod
    def from_dlpack(name, capsule):
        src = capsule if hasattr(capsule, "__dlpack__") else _DLPackHolder(capsule)
        return Tensor(name, np.from_dlpack(src))

    def __repr__(self):
        return "Tensor(%r, shape=%s, dtype=%s)" % (self._name, self.shape(), _wire_name(self._array))


def get_input_tensor_by_name(inference_request, name):
    """The input tensor `name` of a request, or None."""
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name):
    """The output tensor `name` of a response, or None."""
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


# ---- requests and responses ---------------------------------------------------------------------
class InferenceResponse:
    """One response: its output tensors, or an error (TritonError)."""
    __slots__ = ("_outputs", "_error", "_parameters")

    def __init__(self, output_tensors=None, error=None, parameters=None):
        self._outputs = list(output_tensors) if output_tensors else []
        if error is not None and not isinstance(error, TritonError):
            error = TritonError(str(error))
        self._error = error
        if parameters is None or (isinstance(parameters, dict) and not parameters):
            self._parameters = "{}"  # the common case, without json's cost per response
        else:
            self._parameters = parameters if isinstance(parameters, str) else \
                json.dumps(parameters)

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        return self._parameters


class InferenceRequest:
    """A request: one the server hands to execute(), or one a model builds to call another model
    (Business Logic Scripting) with exec() / async_exec()."""

    def __init__(self, model_name="", inputs=None, requested_output_names=None, request_id="",
                 correlation_id=0, flags=0, timeout=0, model_version=-1, preferred_memory=None,
                 trace=None, parameters=None):
        self._model_name = model_name
        self._inputs = list(inputs) if inputs else []
        self._want = list(requested_output_names) if requested_output_names else []
        self._id = request_id
        self._corr = correlation_id
        self._flags = flags
        self._timeout = timeout
        self._version = model_version
        if parameters is None:
            parameters = "{}"
        elif not isinstance(parameters, str):
            parameters = json.dumps(parameters)
        self._parameters = parameters
        self._trace = trace  # an InferenceTrace: the request whose trace this one continues
        self._index = None   # its slot, for a request the server handed over
        self._live = False   # handed over and not ended yet (its final flag not sent)
        self._sender = None

    def inputs(self):
        return self._inputs

    def requested_output_names(self):
        return self._want

    def request_id(self):
        return self._id

    def correlation_id(self):
        return self._corr

    def flags(self):
        return self._flags

    def timeout(self):
        return self._timeout

    def model_name(self):
        return self._model_name

    def model_version(self):
        return self._version

    def parameters(self):
        return self._parameters

    def trace(self):
        """The request's trace: given to an InferenceRequest made in execute (trace=...), that
        request is traced as a child of this one when this one is traced (Triton's BLS
        tracing)."""
        return InferenceTrace(self._index)

    def _trace_parent(self):
        t = self._trace
        return t._slot + 1 if isinstance(t, InferenceTrace) and t._slot is not None else 0

    def is_cancelled(self):
        """Whether the client has gone (a cancelled gRPC stream): the model may stop early."""
        return _stub.is_cancelled(self) if _stub is not None else False

    def set_release_flags(self, flags):
        raise TritonModelException("request rescheduling is not supported by nereid yet")

    def get_response_sender(self):
        """The request's InferenceResponseSender (the same one on every call): a decoupled
        model sends any number of responses through it, then the final flag; a default-mode
        model one response and the final flag, returning None from execute."""
        if self._index is None:
            raise TritonModelException("a request made by the model has no response sender")
        if self._sender is None:
            self._sender = InferenceResponseSender(self)
        return self._sender

    def exec(self, decoupled=False):
        """Runs this request on model_name and returns its InferenceResponse (an error in it
        where the server refused the request or the model failed)."""
        return _stub.bls_exec(self, decoupled)

    async def async_exec(self, decoupled=False):
        """exec() on an executor thread, so that several requests can be in flight at once."""
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(
            None, _stub.bls_exec, self, decoupled)


class InferenceTrace:
    """What request.trace() returns: which request's trace a BLS request continues."""

    def __init__(self, slot=None):
        self._slot = slot

    def get_context(self, mode="opentelemetry"):
        """The OpenTelemetry context of the trace, as Triton gives it to a model: None here (a
        BLS request made with trace= continues its parent's trace inside the server)."""
        return None


class InferenceResponseSender:
    """Sends the responses of one request the server handed to execute."""

    def __init__(self, request):
        self._request = request
        self._sent = False    # a response has gone
        self._closed = False  # the final flag has gone (or the batch failed)

    def send(self, response=None, flags=0):
        """Sends `response` (None: none, with flags TRITONSERVER_RESPONSE_COMPLETE_FINAL) to
        the client at once; after the final flag the sender is closed."""
        _stub.sender_send(self, response, flags)

    def is_cancelled(self):
        return _stub.is_cancelled(self._request)


# ---- model control ------------------------------------------------------------------------------
def load_model(model_name, config="", files=None):
    """Loads (or reloads) `model_name` as the repository's load endpoint does (explicit model
    control mode only): `config` a JSON model configuration, `files` {"file:<path>": bytes}
    with paths relative to the model directory. Returns once it is loaded; raises its error."""
    _stub.load_model(model_name, config, files)


def unload_model(model_name, unload_dependents=False):
    """Unloads `model_name` (and, for an ensemble, with unload_dependents, what it brought)."""
    _stub.control_call(2, [str(model_name)], flag=1 if unload_dependents else 0)


def is_model_ready(model_name, model_version=""):
    """Whether `model_name` (version `model_version`, "" for any) is ready."""
    version = int(model_version) if str(model_version) != "" else -1
    return bool(_stub.control_call(3, [str(model_name)], version=version))


# ---- custom metrics -----------------------------------------------------------------------------
_M_FAMILY_NEW, _M_FAMILY_DELETE, _M_METRIC_NEW, _M_METRIC_DELETE = 1, 2, 3, 4
_M_INCREMENT, _M_SET, _M_OBSERVE, _M_VALUE = 5, 6, 7, 8
_KIND_NAMES = ("COUNTER", "GAUGE", "HISTOGRAM")
_FAMILY_DELETED = ("Invalid metric operation as the corresponding 'MetricFamily' has been "
                   "deleted. The 'MetricFamily' object should be deleted AFTER its corresponding "
                   "'Metric' objects have been deleted.")


class MetricFamily:
    """A family of metrics shown on the server's metrics endpoint: MetricFamily(name,
    description, kind) with kind COUNTER, GAUGE or HISTOGRAM. Families of the same name and
    kind are one family, whichever instance or model made them."""
    COUNTER, GAUGE, HISTOGRAM = 0, 1, 2

    def __init__(self, name, description, kind):
        self._id = None
        self._kind = kind
        self._metrics = weakref.WeakSet()
        try:
            self._id = _stub.metric_call(_M_FAMILY_NEW, kind=int(kind),
                                         strings=(str(name), str(description)))
        except TritonModelException as e:
            raise TritonModelException("Error when creating MetricFamily: " + str(e)) from None

    def Metric(self, labels=None, buckets=None):  # noqa: N802 -- Triton's name
        """The family's metric with these labels (a dict of strings); a histogram's needs its
        bucket bounds (a list)."""
        return Metric(self, labels, buckets)

    def __del__(self):
        if self._id is None:
            return
        for m in list(self._metrics):  # Triton clears its metrics first
            m._delete()
        try:
            _stub.metric_call(_M_FAMILY_DELETE, self._id, answer=False)
        except Exception:  # noqa: BLE001 -- the process is ending
            pass
        self._id = None


class Metric:
    """One series of a MetricFamily: increment / set / observe / value, as its kind allows."""

    def __init__(self, family, labels=None, buckets=None):
        self._id = None
        self._family = family
        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None and not isinstance(buckets, list):
            raise TritonModelException("Failed to create metric. Buckets must be a list.")
        if family._kind == MetricFamily.HISTOGRAM and buckets is None:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        if family._kind != MetricFamily.HISTOGRAM and buckets is not None:
            raise TritonModelException("Failed to create metric. Unexpected buckets found.")
        if family._id is None:
            raise TritonModelException(_FAMILY_DELETED)
        strings = []
        for k, v in (labels or {}).items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TritonModelException("Error when creating Metric: label keys and values "
                                           "must be strings")
            strings += [k, v]
        try:
            self._id = _stub.metric_call(_M_METRIC_NEW, family._id,
                                         kind=0 if buckets is None else 1, strings=strings,
                                         buckets=[float(b) for b in buckets or ()])
        except TritonModelException as e:
            raise TritonModelException("Error when creating Metric: " + str(e)) from None
        family._metrics.add(self)

    def _op(self, op, value, what, name):
        if self._id is None or self._family._id is None:
            raise TritonModelException(_FAMILY_DELETED)
        kind = self._family._kind
        allowed = {MetricFamily.COUNTER: (_M_INCREMENT, _M_VALUE),
                   MetricFamily.GAUGE: (_M_INCREMENT, _M_SET, _M_VALUE),
                   MetricFamily.HISTOGRAM: (_M_OBSERVE,)}.get(kind, ())
        text = None
        if op not in allowed:
            text = "TRITONSERVER_METRIC_KIND_%s does not support %s" % (
                _KIND_NAMES[kind] if kind in (0, 1, 2) else kind, name)
        elif kind == MetricFamily.COUNTER and op == _M_INCREMENT and value < 0:
            text = ("TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
                    "non-negative values.")
        if text is not None:  # refused here, as the server would: no round trip
            raise TritonModelException(what + _stub.request_error(text))
        try:
            return _stub.metric_call(op, self._id, value=float(value), answer=op == _M_VALUE)
        except TritonModelException as e:
            raise TritonModelException(what + str(e)) from None

    def increment(self, value):
        self._op(_M_INCREMENT, value, "Failed to increment metric value: ", "Increment")

    def set(self, value):
        self._op(_M_SET, value, "Failed to set metric value: ", "Set")

    def observe(self, value):
        self._op(_M_OBSERVE, value, "Failed to observe metric value: ", "Observe")

    def value(self):
        bits = self._op(_M_VALUE, 0.0, "Failed to get metric value: ", "Value")
        return struct.unpack("<d", struct.pack("<Q", bits))[0]

    def _delete(self):
        if self._id is None:
            return
        try:
            _stub.metric_call(_M_METRIC_DELETE, self._id, answer=False)
        except Exception:  # noqa: BLE001 -- the process is ending
            pass
        self._id = None

    def __del__(self):
        self._delete()


# ---- model configuration ------------------------------------------------------------------------
def get_input_config_by_name(model_config, name):
    """The config entry (dict) of input `name`, or None."""
    for i in model_config.get("input", []):
        if i.get("name") == name:
            return i
    return None


def get_output_config_by_name(model_config, name):
    """The config entry (dict) of output `name`, or None."""
    for o in model_config.get("output", []):
        if o.get("name") == name:
            return o
    return None


def using_decoupled_model_transaction_policy(model_config):
    """True when the config's model_transaction_policy is decoupled."""
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class ModelConfig:
    """The model's configuration as auto_complete_config(auto_complete_model_config) sees and
    completes it."""

    def __init__(self, model_config):
        self._config = json.loads(model_config) if isinstance(model_config, str) else model_config

    def as_dict(self):
        return self._config

    def set_max_batch_size(self, max_batch_size):
        if not isinstance(max_batch_size, int) or max_batch_size < 0:
            raise ValueError("max_batch_size must be a non-negative integer")
        current = int(self._config.get("max_batch_size", 0) or 0)
        if current not in (0, max_batch_size):
            raise ValueError(
                "configuration specified max_batch_size " + str(current) +
                ", but in auto-complete-config function for model '" +
                self._config.get("name", "") + "' specified max_batch_size " + str(max_batch_size))
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        if "sequence_batching" in self._config:
            raise ValueError("Configuration specified scheduling_choice as 'sequence_batching', "
                             "but auto-complete-config function for model '" +
                             self._config.get("name", "") + "' tries to set scheduling_choice "
                             "as 'dynamic_batching'")
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, transaction_policy_dict):
        for k in transaction_policy_dict:
            if k != "decoupled":
                raise ValueError("model transaction property in auto-complete-config function for "
                                 "model '" + self._config.get("name", "") +
                                 "' contains property other than 'decoupled'")
        pol = self._config.setdefault("model_transaction_policy", {})
        if "decoupled" in pol and "decoupled" in transaction_policy_dict and \
                bool(pol["decoupled"]) != bool(transaction_policy_dict["decoupled"]):
            raise ValueError("trying to change decoupled property in auto-complete-config for "
                             "model '" + self._config.get("name", "") + "', which is already "
                             "set to '" + str(pol["decoupled"]) + "'.")
        pol.update(transaction_policy_dict)

    def _add(self, kind, tensor):
        what = "input" if kind == "input" else "output"
        if not isinstance(tensor, dict):
            raise ValueError("model " + what + " must be a dict, got " + type(tensor).__name__)
        for k in tensor:
            if k not in ("name", "data_type", "dims", "optional", "format", "reshape",
                         "label_filename", "is_shape_tensor", "allow_ragged_batch"):
                raise ValueError("model " + what + " in auto-complete-config function for model '" +
                                 self._config.get("name", "") + "' contains property other than "
                                 "'name', 'data_type', 'dims' and 'optional'.")
        if "name" not in tensor:
            raise ValueError(what + " in auto-complete-config function for model '" +
                             self._config.get("name", "") + "' is missing 'name' property.")
        if "data_type" not in tensor:
            raise ValueError(what + " '" + tensor["name"] + "' in auto-complete-config function "
                             "for model '" + self._config.get("name", "") +
                             "' is missing 'data_type' property.")
        if "dims" not in tensor:
            raise ValueError(what + " '" + tensor["name"] + "' in auto-complete-config function "
                             "for model '" + self._config.get("name", "") +
                             "' is missing 'dims' property.")
        entries = self._config.setdefault(kind, [])
        for e in entries:
            if e.get("name") != tensor["name"]:
                continue
            if e.get("data_type", "TYPE_INVALID") not in ("TYPE_INVALID", tensor["data_type"]):
                raise ValueError("unable to load model '" + self._config.get("name", "") +
                                 "', configuration expects datatype " + e["data_type"] + " for " +
                                 what + " '" + tensor["name"] + "', model provides " +
                                 tensor["data_type"])
            dims = [int(d) for d in e.get("dims", [])]
            if dims and dims != [int(d) for d in tensor["dims"]]:
                raise ValueError("model '" + self._config.get("name", "") + "', tensor '" +
                                 tensor["name"] + "': the model expects dims " +
                                 str(list(tensor["dims"])) + " but the model configuration "
                                 "specifies dims " + str(dims))
            e.setdefault("data_type", tensor["data_type"])
            e.setdefault("dims", list(tensor["dims"]))
            if "optional" in tensor:
                e["optional"] = tensor["optional"]
            return
        entries.append(dict(tensor))

    def add_input(self, input):
        self._add("input", input)

    def add_output(self, output):
        self._add("output", output)


# ---- logging ------------------------------------------------------------------------------------
class LogLevel:
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


class Logger:
    """Lines in the server's log, in its format, with the model file's name and line."""

    @staticmethod
    def log(message, level=LogLevel.INFO):
        if _stub is not None:
            _stub.log(level, str(message), 2)

    @staticmethod
    def log_info(message):
        if _stub is not None:
            _stub.log(LogLevel.INFO, str(message), 2)

    @staticmethod
    def log_warn(message):
        if _stub is not None:
            _stub.log(LogLevel.WARNING, str(message), 2)

    @staticmethod
    def log_error(message):
        if _stub is not None:
            _stub.log(LogLevel.ERROR, str(message), 2)

    @staticmethod
    def log_verbose(message):
        if _stub is not None:
            _stub.log(LogLevel.VERBOSE, str(message), 2)
