"""nereid_stub: the process one Python model instance runs in (nereid's Python backend).

The server starts it as `python3 -u -c <loader> <mode> <instance name>` with five descriptors:
  3  this file's source (a sealed memfd)          4  triton_python_backend_utils's source
  5  the control socket (AF_UNIX, SOCK_SEQPACKET)  6  the shared-memory file (memfd)
  7  the reply file: the server's answers to this process's requests to other models
Every control message starts with a 24-byte header, `<IIQQ`: kind, arg, offset, length. The
bodies of requests and responses (tensor bytes included) are in the shared memory at
[offset, offset + length); only log lines and error texts travel inline, after the header.
The layout of each body is described in src/backends/python/py_wire.h; both sides must agree.
The server writes a batch from offset 0; this process writes its answer after it, growing the
shared file when the answer does not fit (the server maps the new size when it reads it).

Modes: "instance" (INIT, then EXECUTE ... until FINALIZE or end of file) and "autocomplete"
(AUTOCOMPLETE once). The process ends when the server closes the socket, so it never outlives
the server.
"""
import asyncio
import importlib.util
import json
import linecache
import mmap
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
import types

SRC_FD, UTILS_FD, CTRL_FD, SHM_FD, REPLY_FD, BATCH_FD = 3, 4, 5, 6, 7, 8

# message kinds (py_wire.h)
MSG_INIT, MSG_EXECUTE, MSG_FINALIZE, MSG_AUTOCOMPLETE, MSG_BLS_REPLY = 1, 2, 3, 4, 5
MSG_SIDE_REPLY = 6
MSG_OK, MSG_ERROR, MSG_RESPONSES, MSG_LOG, MSG_CONFIG, MSG_BLS = 10, 11, 12, 13, 14, 15
MSG_RESPONSE, MSG_CANCELLED, MSG_METRIC, MSG_CONTROL = 16, 17, 18, 19
FLAG_FINAL, FLAG_NONE = 1, 2            # a sender's response: the last; no response, the end
FLAG_CANCELLED = 4                      # the answer to MSG_CANCELLED: the client has gone
FLAG_ERROR = 8                          # an answer that is an error (its text inline)

HDR = struct.Struct("<IIQQ")
BATCH = struct.Struct("<II")            # n_requests, 0
REQ = struct.Struct("<IIIIIIIIQQ")      # n_inputs, n_want, id_len, params_len, corr_kind,
                                        # corr_len, slot, 0, flags, corr_u64
TENSOR = struct.Struct("<IIIIQQ")       # index or name_len, type code, ndim, 0, offset, nbytes
RESP = struct.Struct("<iIII")           # error code (-1: none), n_outputs, err_len, params_len
LOGHDR = struct.Struct("<II")           # level, line
BLS = struct.Struct("<IIIIIIqQII")      # name_len, n_inputs, n_want, id_len, want_len, flags,
                                        # version, timeout_us, params_len, 1 + parent slot
METRIC = struct.Struct("<IIQdII")       # op, kind, id, value, n_strings, n_buckets
CONTROL = struct.Struct("<IIqII")       # op, flag, version, n_strings, 0
COUNT = struct.Struct("<Q")             # the reply file's head: the server's count of messages read;
                                        # the shared file's head: this process's count of replies read
HEAD = 64                               # bytes of either file's head
ALIGN = 64
GROWTH = 1 << 20
BACKLOG = 8 << 20                       # bytes of messages the server has not read yet


def pad8(n):
    return (n + 7) & ~7


def align(n):
    return (n + ALIGN - 1) & ~(ALIGN - 1)


def load_source(fd, name):
    src = os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8")
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    return compile(src, name, "exec")


def error_text(exc):
    """An exception as Triton's stub reports it: "ValueError: bad\n\nAt:\n  <file>(<line>):
    <function>\n" with the innermost frame first (this file's own frames left out)."""
    head = "%s: %s" % (type(exc).__name__, exc)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename != "nereid_stub.py"]
    if not frames:
        return head
    return head + "\n\nAt:\n" + "".join(
        "  %s(%d): %s\n" % (f.filename, f.lineno, f.name) for f in reversed(frames))


class ModelError(Exception):
    """What the stub finds wrong with what execute returned (reported without a traceback)."""


class Stub:
    def __init__(self, mode, instance_name):
        self.mode = mode
        self.name = instance_name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=CTRL_FD)
        self.send_lock = threading.Lock()
        self.mm = None                        # the shared file (this process writes it)
        self.mm_size = 0
        self.bmm = None                       # the batch file (the server writes it)
        self.bmm_size = 0
        self.model = None
        self.config = None
        self.loop = None
        self.pb = None
        # requests to other models (BLS), from execute's thread, async_exec's executor threads or
        # any thread of the model's between initialize and finalize
        self.serving = False                  # initialize has returned, finalize not begun
        self.cursor = HEAD                    # where the next thing this process writes goes
        self.alloc_lock = threading.Lock()    # cursor and the shared file's growth
        self.tag = 0
        self.cv = threading.Condition()       # replies, reading
        self.replies = {}                     # tag -> [(offset, length, flags, inline body)]
        self.dropped = set()                  # tags whose later replies nobody reads
        self.replies_read = 0                 # replies in the reply file read (the head's count)
        self.head = None                      # the shared file's head, mapped on its own
        self.head_lock = threading.Lock()     # replies_read (not alloc_lock: a writer waiting
                                              # for the server holds that one)
        self.bg_loop = None                   # a decoupled model's async execute runs here
        self.control = []                     # the server's requests, read by another thread
        self.reading = False                  # one waiting thread reads the socket at a time
        self.rmm = None
        self.rmm_size = 0
        self.allocs = 0                       # messages written into the shared file
        # response senders (decoupled models; the default mode's sender)
        self.decoupled = False
        self.sender_cv = threading.Condition()
        self.batch = []                       # the requests of the batch in execute
        self.open = 0                         # of them, those without their final flag

    # ---- control messages ----------------------------------------------------------------
    def send(self, kind, arg=0, off=0, length=0, body=b""):
        with self.send_lock:
            if body:
                self.sock.sendmsg([HDR.pack(kind, arg, off, length or len(body)), body])
            else:
                self.sock.send(HDR.pack(kind, arg, off, length))

    def send_error(self, text, code=1):
        self.send(MSG_ERROR, code, body=text.encode("utf-8", "replace")[:60000] or b" ")

    def log(self, level, message, depth):
        """A line in the server's log with the caller's file name and line (depth frames up from
        Logger's method)."""
        try:
            f = sys._getframe(depth)
            fname, line = os.path.basename(f.f_code.co_filename), f.f_lineno
        except ValueError:
            fname, line = "model.py", 0
        body = LOGHDR.pack(level, line) + fname.encode() + b"\0" + \
            message.encode("utf-8", "replace")[:60000]
        self.send(MSG_LOG, 0, body=body)

    # ---- requests to other models (BLS) -------------------------------------------------
    def bls_exec(self, request, decoupled):
        """InferenceRequest.exec(): the request goes to the server, which runs it on the named
        model (its own scheduler and batching); the answer is an InferenceResponse, an error in
        it where the server refused or the model failed."""
        pb = self.pb
        if not self.serving:  # Triton's words: not from initialize or finalize
            raise pb.TritonModelException("BLS is only supported during the 'execute' function.")
        name = str(request.model_name()).encode()
        rid = str(request.request_id()).encode()
        want = b"\0".join(str(n).encode() for n in request.requested_output_names())
        ins, room = [], 0
        for t in request.inputs():
            arr = t.as_numpy()
            code = pb.numpy_to_triton_type(arr.dtype)
            if code == 13 or arr.dtype.kind in "SO":
                data, code = pb._serialize(arr), 13
                nbytes = len(data)
            elif code is None:
                raise pb.TritonModelException("NumPy dtype is not supported.")
            else:
                data, nbytes = arr, arr.nbytes
            tname = t.name().encode()
            ins.append((tname, code, arr.shape, data, nbytes))
            room += TENSOR.size + pad8(len(tname)) + 8 * arr.ndim + ALIGN + nbytes
        params = request.parameters()
        params = params.encode() if params not in ("", "{}") else b""
        strings = len(name) + len(rid) + len(want) + len(params)
        head = BLS.size + pad8(strings)
        with self.alloc_lock:
            base, mm = self.alloc(head + room + ALIGN)
            self.tag = (self.tag + 1) & 0xffffff or 1
            tag = self.tag
            BLS.pack_into(mm, base, len(name), len(ins), len(request.requested_output_names()),
                          len(rid), len(want), 1 if decoupled else 0,
                          int(request.model_version()), int(request.timeout()), len(params),
                          request._trace_parent())
            p = base + BLS.size
            for b in (name, rid, want, params):
                mm[p:p + len(b)] = b
                p += len(b)
            p = pad8(p)
            d = align(p + sum(TENSOR.size + pad8(len(i[0])) + 8 * len(i[2]) for i in ins))
            for tname, code, shape, data, nbytes in ins:
                TENSOR.pack_into(mm, p, len(tname), code, len(shape), 0, d, nbytes)
                p += TENSOR.size
                mm[p:p + len(tname)] = tname
                p += pad8(len(tname))
                if shape:
                    struct.pack_into("<%dq" % len(shape), mm, p, *shape)
                p += 8 * len(shape)
                if code == 13:
                    mm[d:d + nbytes] = data
                elif nbytes:
                    pb.np.ndarray(shape, data.dtype, mm, d)[...] = data
                d = align(d + nbytes)
        self.send(MSG_BLS, tag, base, d - base)
        if decoupled:
            return self.responses(tag)
        off, length, _, _ = self.wait_for(tag)
        return self.decode_reply(off, length)

    def is_cancelled(self, request):
        """request.is_cancelled(): asks the server whether the client has gone (a request of a
        batch that has ended, or one the model made, is not)."""
        if request._index is None or not request._live:
            return False
        tag = self.next_tag()
        self.send(MSG_CANCELLED, tag, request._index)
        return bool(self.wait_for(tag)[2] & FLAG_CANCELLED)

    def responses(self, tag):
        """exec(decoupled=True)'s iterator: every response of request `tag` as it comes, the
        last one included (an empty one when the model ended without a response)."""
        done = False
        try:
            while not done:
                off, length, flags, _ = self.wait_for(tag)
                done = bool(flags & FLAG_FINAL)
                yield self.decode_reply(off, length)
        finally:
            if not done:  # a model that stops reading early: what comes later is dropped
                with self.cv:
                    for off, length, flags, _ in self.replies.pop(tag, []):
                        self.reply_done(length)
                        done = done or bool(flags & FLAG_FINAL)
                    if not done:
                        self.dropped.add(tag)

    def wait_for(self, tag):
        """The next message for its owner: tag None, the main loop's (a request from the server;
        None at end of file); else the next reply to request `tag`: offset, length, flags,
        inline body. Of the threads waiting, one reads the socket and hands each message to its
        owner (the main loop reads too while idle, so a model's own thread that waits for an
        answer between requests gets it)."""
        with self.cv:
            while True:
                q = self.control if tag is None else self.replies.get(tag)
                if q:
                    return q.pop(0)
                if not self.reading:
                    break
                self.cv.wait()
            self.reading = True
        try:
            while True:
                try:
                    msg = self.sock.recv(4096)
                except (ConnectionResetError, InterruptedError):
                    msg = b""
                if len(msg) < HDR.size:
                    if tag is None:
                        return None
                    raise self.pb.TritonModelException("the server closed the stub's socket")
                kind, arg, off, length = HDR.unpack_from(msg)
                if kind in (MSG_BLS_REPLY, MSG_SIDE_REPLY):
                    owner, item = arg & 0xffffff, (off, length, arg >> 24, msg[HDR.size:])
                    if owner == tag:
                        return item
                    with self.cv:
                        if kind == MSG_BLS_REPLY and owner in self.dropped:
                            self.reply_done(length)
                            if item[2] & FLAG_FINAL:
                                self.dropped.discard(owner)
                            continue
                        self.replies.setdefault(owner, []).append(item)
                        self.cv.notify_all()
                else:
                    if tag is None:
                        return kind, arg, off, length
                    with self.cv:
                        self.control.append((kind, arg, off, length))
                        self.cv.notify_all()
        finally:
            with self.cv:
                self.reading = False
                self.cv.notify_all()

    def next_tag(self):
        with self.alloc_lock:
            self.tag = (self.tag + 1) & 0xffffff or 1
            return self.tag

    # ---- custom metrics ------------------------------------------------------------------
    def metric_call(self, op, mid=0, kind=0, value=0.0, strings=(), buckets=(), answer=True):
        """One custom-metrics request to the server (py_int.h, NR_PY_METRIC); with `answer`,
        waits for its result (an id, a value's bits) and raises its error in Triton's words."""
        pb = self.pb
        tag = self.next_tag() if answer else 0
        body = METRIC.pack(op, kind, mid, value, len(strings), len(buckets)) + \
            struct.pack("<%dd" % len(buckets), *buckets) + \
            b"".join(x.encode("utf-8") + b"\0" for x in strings)
        if len(body) > 60000:
            raise pb.TritonModelException("the metrics request is too large")
        self.send(MSG_METRIC, tag, body=body)
        if not answer:
            return None
        result, _, flags, text = self.wait_for(tag)
        if flags & FLAG_ERROR:
            raise pb.TritonModelException(self.request_error(text.decode("utf-8", "replace")))
        return result

    # ---- model control ---------------------------------------------------------------------
    def control_call(self, op, strings, flag=0, version=-1):
        """load_model / unload_model / is_model_ready: the server's answer (it blocks until a
        load has finished), its error raised."""
        pb = self.pb
        tag = self.next_tag()
        body = CONTROL.pack(op, flag, version, len(strings), 0) + \
            b"".join(x.encode("utf-8") + b"\0" for x in strings)
        if len(body) > 60000:
            raise pb.TritonModelException("the model control request is too large")
        self.send(MSG_CONTROL, tag, body=body)
        result, _, flags, text = self.wait_for(tag)
        if flags & FLAG_ERROR:
            raise pb.TritonModelException(self.request_error(text.decode("utf-8", "replace")))
        return result

    def load_model(self, name, config, files):
        """pb_utils.load_model: the files go through a directory of their own, read by the
        server during the load and removed after it."""
        import shutil
        import tempfile
        strings = [str(name), config or ""]
        tmp = tempfile.mkdtemp(prefix="nereid-load-") if files else None
        try:
            for i, (key, data) in enumerate((files or {}).items()):
                path = key[5:] if key.startswith("file:") else key
                where = os.path.join(tmp, "%d" % i)
                with open(where, "wb") as f:
                    f.write(data)
                strings += [path, where]
            self.control_call(1, strings)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def request_error(self, text):
        # how Triton's stub wraps an error the server returned
        return "Failed to process the request for model '%s', message: %s" % (self.name, text)

    def reply_view(self, end):
        """The reply file mapped at least up to `end` (the server grows it)."""
        if self.rmm is None or end > self.rmm_size:
            self.rmm_size = os.fstat(REPLY_FD).st_size
            self.rmm = mmap.mmap(REPLY_FD, self.rmm_size)
        return self.rmm

    def reply_done(self, length):
        """One more answer in the reply file has been read (copied out): the server may write
        over it once it has had every one read (the count in the shared file's head)."""
        if length:
            with self.head_lock:
                if self.head is None:  # the server made the file far longer than its head
                    self.head = mmap.mmap(SHM_FD, HEAD)
                self.replies_read += 1
                COUNT.pack_into(self.head, 0, self.replies_read)

    def decode_reply(self, off, length):
        """An InferenceResponse from the reply file; its arrays are copies (the file is reused)."""
        try:
            return self.read_reply(off, length)
        finally:
            self.reply_done(length)

    def read_reply(self, off, length):
        pb = self.pb
        np = pb.np
        mm = self.reply_view(off + length)
        code, n_out, err_len, _ = RESP.unpack_from(mm, off)
        p = off + RESP.size
        if code >= 0:
            text = mm[p:p + err_len].decode("utf-8", "replace")
            return pb.InferenceResponse(error=pb.TritonError(text, code))
        p = pad8(p + err_len)
        outs = []
        for _ in range(n_out):
            name_len, tcode, ndim, _, doff, nbytes = TENSOR.unpack_from(mm, p)
            p += TENSOR.size
            name = mm[p:p + name_len].decode()
            p += pad8(name_len)
            dims = struct.unpack_from("<%dq" % ndim, mm, p) if ndim else ()
            p += 8 * ndim
            if tcode == 13:
                arr = pb.deserialize_bytes_tensor(mm[doff:doff + nbytes]).reshape(dims)
            else:
                arr = np.ndarray(dims, pb.triton_to_numpy_type(tcode), mm, doff).copy()
            t = pb.Tensor.__new__(pb.Tensor)
            t._name, t._array = name, arr
            outs.append(t)
        return pb.InferenceResponse(outs)

    # ---- shared memory -------------------------------------------------------------------
    def view(self, end):
        """The shared file mapped at least up to `end` (the server wrote initialize's and
        auto_complete_config's arguments there)."""
        if self.mm is None or end > self.mm_size:
            size = os.fstat(SHM_FD).st_size
            if size < end:
                raise RuntimeError("shared memory holds %d bytes, message ends at %d" % (size, end))
            self.mm = mmap.mmap(SHM_FD, size)  # the old map lives on while arrays view it
            self.mm_size = size
        return self.mm

    def batch_view(self, end):
        """The batch file mapped at least up to `end` (the server may have grown it)."""
        if self.bmm is None or end > self.bmm_size:
            size = os.fstat(BATCH_FD).st_size
            if size < end:
                raise RuntimeError("the batch file holds %d bytes, the batch ends at %d" %
                                   (size, end))
            self.bmm = mmap.mmap(BATCH_FD, size)  # the old map lives on while arrays view it
            self.bmm_size = size
        return self.bmm

    def alloc(self, size):
        """Room in the shared file for one message the server reads (a request to another
        model, a sender's response, execute's responses); alloc_lock held. Once the server has
        read every one written so far (its count in the reply file's head), the next goes at
        the start again; while more than BACKLOG bytes wait to be read, the writer waits (a
        model streaming faster than its client reads is slowed down instead of growing the
        file)."""
        while self.allocs:
            if self.allocs == COUNT.unpack_from(self.reply_view(COUNT.size), 0)[0]:
                self.cursor = HEAD
                break
            if self.cursor + size <= HEAD + BACKLOG:
                break
            time.sleep(0.0002)  # the server is behind: it catches up within a few messages
        base = self.cursor
        mm = self.reserve(base + size)
        self.cursor = align(base + size)
        self.allocs += 1
        return base, mm

    def reserve(self, end):
        """Room up to `end` for an answer: the shared file grows (in GROWTH steps) when needed."""
        if end > self.mm_size:
            size = os.fstat(SHM_FD).st_size
            if size < end:
                size = (end + GROWTH - 1) // GROWTH * GROWTH
                os.ftruncate(SHM_FD, size)
            self.mm = mmap.mmap(SHM_FD, size)
            self.mm_size = size
        return self.mm

    def read_json(self, off, length):
        return json.loads(bytes(self.view(off + length)[off:off + length]))

    def write_blob(self, off, data):
        mm = self.reserve(off + len(data))
        mm[off:off + len(data)] = data
        return len(data)

    # ---- the model -----------------------------------------------------------------------
    def import_model(self, path):
        """model.py as Triton's stub imports it: the version and model directories appended to
        sys.path, the file imported as module "<version>.<file>" (so `from . import x` works)."""
        version_dir = os.path.dirname(path)
        model_dir = os.path.dirname(version_dir)
        for d in (version_dir, model_dir):
            if d not in sys.path:
                sys.path.append(d)
        base = os.path.basename(path)
        if not base.endswith(".py"):
            raise ValueError("Model name must end with '.py'. Model name is \"%s\"." % base)
        name = os.path.basename(version_dir) + "." + base[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        cls = module.TritonPythonModel
        if not hasattr(cls, "execute"):
            raise ValueError("Python model " + path + " does not implement `execute` method.")
        return cls

    def on_init(self, off, length):
        init = self.read_json(off, length)
        args = init["args"]
        self.config = json.loads(args["model_config"])
        pb = self.pb
        self.inputs = [(i["name"], pb.triton_string_to_numpy(i.get("data_type", "TYPE_INVALID")))
                       for i in self.config.get("input", [])]
        self.outputs = [o["name"] for o in self.config.get("output", [])]
        self.decoupled = bool(self.config.get("model_transaction_policy", {}).get("decoupled"))
        try:
            cls = self.import_model(init["model_path"])
            self.model = cls()
            if hasattr(self.model, "initialize"):
                r = self.model.initialize(args)
                if asyncio.iscoroutine(r):
                    self.run_coroutine(r)
        except BaseException as e:  # noqa: B036 -- any failure is the load's error
            self.send_error(error_text(e))
            return
        self.serving = True
        self.send(MSG_OK)

    def on_autocomplete(self, off, length):
        req = self.read_json(off, length)
        try:
            cls = self.import_model(req["model_path"])
            cfg = self.pb.ModelConfig(req["config"])
            fn = getattr(cls, "auto_complete_config", None)
            if fn is not None:
                cfg = fn(cfg)
                if not isinstance(cfg, self.pb.ModelConfig):
                    raise ModelError("auto_complete_config function in model '" +
                                     req["config"].get("name", "") +
                                     "' must return a valid pb.ModelConfig object.")
            out = json.dumps(cfg.as_dict()).encode()
        except ModelError as e:
            self.send_error(str(e))
            return
        except BaseException as e:  # noqa: B036
            self.send_error(error_text(e))
            return
        base = align(off + length)
        self.send(MSG_CONFIG, 0, base, self.write_blob(base, out))

    def on_finalize(self):
        self.serving = False
        if self.model is not None and hasattr(self.model, "finalize"):
            try:
                r = self.model.finalize()
                if asyncio.iscoroutine(r):
                    self.run_coroutine(r)
            except BaseException as e:  # noqa: B036
                self.log(0, error_text(e), 1)
        self.send(MSG_OK)

    def run_background(self, coro, reqs):
        """A decoupled model's `async def execute`: scheduled on the background loop; when it
        fails (or returns something), the requests it left open end with the error."""
        if self.bg_loop is None:
            self.bg_loop = asyncio.new_event_loop()
            threading.Thread(target=self.bg_loop.run_forever, name="nereid-async-execute",
                             daemon=True).start()
        fut = asyncio.run_coroutine_threadsafe(coro, self.bg_loop)
        fut.add_done_callback(lambda f: self.background_done(f, reqs))

    def background_done(self, fut, reqs):
        pb = self.pb
        if fut.cancelled():
            text = "the execute coroutine was cancelled"
        elif fut.exception() is not None:
            text = error_text(fut.exception())
        elif fut.result() is not None:
            text = ("Python model '%s' is using the decoupled mode and the execute function "
                    "must return None." % self.name)
        else:
            return
        text = self.execute_error(text)
        self.log(2, text, 1)
        for r in reqs:  # Triton leaves them waiting; nereid ends them with the error
            if r._live:
                try:
                    r.get_response_sender().send(
                        pb.InferenceResponse(error=pb.TritonError(text)), flags=FLAG_FINAL)
                except pb.TritonModelException:
                    pass  # it ended meanwhile

    def run_coroutine(self, coro):
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(coro)

    # ---- one batch -----------------------------------------------------------------------
    def decode(self, off, length):
        pb = self.pb
        mm = self.batch_view(off + length)
        n, _ = BATCH.unpack_from(mm, off)
        p = off + BATCH.size
        reqs = []
        for _ in range(n):
            (n_in, n_want, id_len, par_len, corr_kind, corr_len, slot, _, flags,
             corr) = REQ.unpack_from(mm, p)
            p += REQ.size
            rid = mm[p:p + id_len].decode("utf-8", "replace") if id_len else ""
            p += id_len
            params = mm[p:p + par_len].decode("utf-8", "replace") if par_len else "{}"
            p += par_len
            if corr_kind == 2:
                corr = mm[p:p + corr_len].decode("utf-8", "replace")
                p += corr_len
            elif corr_kind == 0:
                corr = 0
            p = pad8(p)
            want = struct.unpack_from("<%dI" % n_want, mm, p) if n_want else ()
            p = pad8(p + 4 * n_want)
            tensors = []
            for _ in range(n_in):
                idx, code, ndim, _, doff, nbytes = TENSOR.unpack_from(mm, p)
                p += TENSOR.size
                dims = struct.unpack_from("<%dq" % ndim, mm, p) if ndim else ()
                p += 8 * ndim
                name, npt = self.inputs[idx]
                if code == 13:
                    arr = pb.deserialize_bytes_tensor(memoryview(mm)[doff:doff + nbytes])
                    arr = arr.reshape(dims)
                else:
                    arr = pb.np.ndarray(dims, pb.triton_to_numpy_type(code), mm, doff)
                t = pb.Tensor.__new__(pb.Tensor)
                t._name, t._array = name, arr
                tensors.append(t)
            r = pb.InferenceRequest(inputs=tensors, request_id=rid, correlation_id=corr,
                                    flags=flags, parameters=params)
            r._index, r._live = slot, True
            r._want = {self.outputs[i] for i in want}
            r._model_name = self.config.get("name", "")
            reqs.append(r)
        return reqs

    def plan(self, reqs, resps):
        """What each response sends, and the room they need."""
        pb = self.pb
        plan, room = [], BATCH.size
        for req, resp in zip(reqs, resps):
            err = resp.error() if resp.has_error() else None
            etext = err.message().encode("utf-8", "replace") if err is not None else b""
            params = resp.parameters().encode() if resp.parameters() not in ("", "{}") else b""
            outs = []
            if err is None:
                want = set(req.requested_output_names())
                for t in resp.output_tensors():
                    if t is None:
                        raise ModelError("Output tensor for inference response should not be "
                                         "empty.")
                    if not isinstance(t, pb.Tensor):
                        raise ModelError("Expected a 'Tensor' object in the output tensors, "
                                         "found type '" + str(type(t)) + "'.")
                    if t.name() not in want:
                        continue
                    arr = t.as_numpy()
                    code = pb.numpy_to_triton_type(arr.dtype)
                    if code == 13 or arr.dtype.kind in "SUO":
                        data = pb._serialize(arr)
                        code = 13
                    elif code is None:
                        raise ModelError("NumPy dtype is not supported.")
                    else:
                        data = arr
                    name = t.name().encode()
                    nbytes = len(data) if code == 13 else arr.nbytes
                    outs.append((name, code, arr.shape, data, nbytes))
                    room += TENSOR.size + pad8(len(name)) + 8 * arr.ndim + ALIGN + nbytes
            plan.append((err, etext, params, outs))
            room += RESP.size + pad8(len(etext) + len(params))
        return plan, room + ALIGN

    def write(self, base, mm, plan):
        """Writes planned responses at `base`; returns the length written."""
        np = self.pb.np
        p = base + BATCH.size
        BATCH.pack_into(mm, base, len(plan), 0)
        tensors = []
        for err, etext, params, outs in plan:
            RESP.pack_into(mm, p, -1 if err is None else err.code(), len(outs), len(etext),
                           len(params))
            p += RESP.size
            mm[p:p + len(etext)] = etext
            p += len(etext)
            mm[p:p + len(params)] = params
            p = pad8(p + len(params))
            for o in outs:
                tensors.append((p, o))
                p += TENSOR.size + pad8(len(o[0])) + 8 * len(o[2])
        # tensor bytes after every header, each aligned
        d = align(p)
        for hp, (name, code, shape, data, nbytes) in tensors:
            TENSOR.pack_into(mm, hp, len(name), code, len(shape), 0, d, nbytes)
            q = hp + TENSOR.size
            mm[q:q + len(name)] = name
            q += pad8(len(name))
            if shape:
                struct.pack_into("<%dq" % len(shape), mm, q, *shape)
            if code == 13:
                mm[d:d + nbytes] = data
            elif nbytes:
                np.ndarray(shape, data.dtype, mm, d)[...] = data
            d = align(d + nbytes)
        return d - base

    def on_execute(self, off, length):
        pb = self.pb
        try:
            reqs = self.decode(off, length)
        except BaseException as e:  # noqa: B036
            self.send_error("nereid: malformed batch: " + error_text(e))
            return
        with self.sender_cv:
            self.batch = reqs
            self.open = len(reqs)
        try:
            resps = self.model.execute(reqs)
            if type(resps) is list:  # the common case first: no coroutine check
                pass
            elif asyncio.iscoroutine(resps) and self.decoupled:
                # as Triton does since 24.04: the coroutine runs on an event loop of its own
                # and the instance takes its next batch meanwhile
                self.run_background(resps, reqs)
                resps = None
            elif asyncio.iscoroutine(resps):
                resps = self.run_coroutine(resps)
            if resps is None:  # answered through the requests' response senders
                if not self.decoupled:
                    # Triton leaves a request whose sender was never asked for waiting forever;
                    # nereid answers it with the error a None return had before senders existed
                    # (a decoupled model may still ask for it later, from another thread)
                    text = self.execute_error("Expected a list in the execute return, found "
                                              "type '<class 'NoneType'>'.")
                    for r in reqs:
                        if r._sender is None:
                            r.get_response_sender().send(
                                pb.InferenceResponse(error=pb.TritonError(text)),
                                flags=FLAG_FINAL)
                    # the default mode's batch ends with its last final flag
                    with self.sender_cv:
                        while self.open > 0:
                            self.sender_cv.wait()
                    self.close_senders()
                else:  # a decoupled model's requests stay open until their final flags
                    with self.sender_cv:
                        self.batch = []
                self.send(MSG_OK)
                return
            if self.decoupled:
                raise ModelError("Python model '%s' is using the decoupled mode and the execute "
                                 "function must return None." % self.name)
            if not isinstance(resps, list):
                raise ModelError("Expected a list in the execute return, found type '" +
                                 str(type(resps)) + "'.")
            if len(resps) != len(reqs):
                raise ModelError(
                    "Number of InferenceResponse objects do not match the number of "
                    "InferenceRequest objects. InferenceRequest(s) size is:%d, and "
                    "InferenceResponse(s) size is:%d\n" % (len(reqs), len(resps)))
            for r in resps:
                if not isinstance(r, pb.InferenceResponse):
                    raise ModelError(
                        "Expected an 'InferenceResponse' object in the execute function return "
                        "list, found type '" + str(type(r)) + "'.")
            if self.close_senders():
                raise ModelError("a response was sent through a response sender and returned "
                                 "by execute too")
            plan, room = self.plan(reqs, resps)
            with self.alloc_lock:
                base, mm = self.alloc(room)
                n = self.write(base, mm, plan)
        except ModelError as e:
            self.close_senders()
            self.send_error(self.execute_error(str(e)))
            return
        except BaseException as e:  # noqa: B036
            self.close_senders()
            self.send_error(self.execute_error(error_text(e)))
            return
        self.send(MSG_RESPONSES, 0, base, n)

    # ---- response senders ----------------------------------------------------------------
    def close_senders(self):
        """Closes the senders of the batch in execute (its end, or its failure: the server
        answers every request without its final flag with the error); whether any had sent a
        response."""
        with self.sender_cv:
            sent = False
            for r in self.batch:
                r._live = False
                if r._sender is not None:
                    sent = sent or r._sender._sent
                    r._sender._closed = True
            self.batch = []
            self.open = 0
            return sent

    def sender_send(self, sender, response, flags):
        """InferenceResponseSender.send: one response (or only the final flag) of its request
        to the server at once, in the order the model sends them (Triton's texts for misuse)."""
        pb = self.pb
        if flags not in (0, FLAG_FINAL):
            raise pb.TritonModelException("Unable to send response. Unsupported flag provided.")
        if response is None and flags == 0:
            raise pb.TritonModelException("Inference Response object must be provided when the "
                                          "response flags is set to zero.")
        if response is not None and not isinstance(response, pb.InferenceResponse):
            raise pb.TritonModelException("Expected an 'InferenceResponse' object, found type '"
                                          + str(type(response)) + "'.")
        req = sender._request
        with self.sender_cv:
            if sender._closed or not req._live:
                raise pb.TritonModelException(
                    "Unable to send response. Response sender has been closed.")
            if not self.decoupled:
                if response is not None and sender._sent:
                    raise pb.TritonModelException("Unable to send response. Non-decoupled model "
                                                  "cannot send more than one response.")
                if response is None and not sender._sent:
                    raise pb.TritonModelException(
                        "Unable to send response. Non-decoupled model cannot send complete "
                        "final before sending a response.")
            if response is None:
                self.send(MSG_RESPONSE, req._index | (FLAG_FINAL | FLAG_NONE) << 24)
            else:
                try:
                    plan, room = self.plan([req], [response])
                except ModelError as e:
                    raise pb.TritonModelException(str(e)) from None
                with self.alloc_lock:
                    base, mm = self.alloc(room)
                    n = self.write(base, mm, plan)
                self.send(MSG_RESPONSE, req._index | flags << 24, base, n)
                sender._sent = True
            if flags & FLAG_FINAL:
                sender._closed = True
                req._live = False
                if not self.decoupled:
                    self.open -= 1
                    self.sender_cv.notify_all()

    def execute_error(self, text):
        # Triton 2.51's wording (the instance's name after "model")
        return "Failed to process the request(s) for model '%s', message: %s" % (self.name, text)

    # ---- the loop ------------------------------------------------------------------------
    def run(self):
        try:
            self.pb = make_utils(self)
        except BaseException as e:  # noqa: B036 -- e.g. no numpy in this environment
            # the answer to the server's first message (so it is never sent to nobody)
            self.sock.recv(4096)
            self.send_error(error_text(e))
            return
        while True:
            msg = self.wait_for(None)
            if msg is None:
                return  # the server closed the socket
            kind, arg, off, length = msg
            if kind == MSG_EXECUTE:
                self.on_execute(off, length)
            elif kind == MSG_INIT:
                self.on_init(off, length)
            elif kind == MSG_AUTOCOMPLETE:
                self.on_autocomplete(off, length)
            elif kind == MSG_FINALIZE:
                self.on_finalize()
                return
            else:
                self.send_error("nereid: unknown message kind %d" % kind)


def make_utils(stub):
    """triton_python_backend_utils, made from descriptor 4 and registered under its name."""
    name = "triton_python_backend_utils"
    mod = types.ModuleType(name)
    mod.__file__ = name + ".py"
    sys.modules[name] = mod
    try:
        exec(load_source(UTILS_FD, mod.__file__), mod.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    mod._stub = stub
    return mod


def main():
    # The server decides when this process ends (a terminal's Ctrl-C reaches the whole group).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.closerange(BATCH_FD + 1, 1 << 16)  # whatever else the server had open
    mode = sys.argv[1] if len(sys.argv) > 1 else "instance"
    name = sys.argv[2] if len(sys.argv) > 2 else ""
    sys.argv = [name]
    Stub(mode, name).run()


main()
