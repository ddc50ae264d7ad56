"""square_int32: n responses of [n] for IN = [n], each request answered by a thread of its own
after execute has returned."""
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException(
                "the model `{}` can generate any number of responses per request, enable "
                "decoupled transaction policy in model configuration to serve this "
                "model".format(args["model_name"]))
        for name in ("IN", "OUT"):
            entry = pb_utils.get_input_config_by_name(config, name) or \
                pb_utils.get_output_config_by_name(config, name)
            if entry is None or entry["data_type"] != "TYPE_INT32" or entry["dims"] != [1]:
                raise pb_utils.TritonModelException(
                    "expected '{}' to be TYPE_INT32 with dims [1]".format(name))
        self.inflight = 0
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)

    def execute(self, requests):
        for request in requests:
            n = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            with self.lock:
                self.inflight += 1
            threading.Thread(target=self.respond, daemon=True,
                             args=(request.get_response_sender(), int(n[0]))).start()
        return None

    def respond(self, sender, n):
        try:
            for _ in range(n):
                sender.send(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("OUT", np.array([n], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.inflight -= 1
                self.idle.notify_all()

    def finalize(self):
        with self.lock:
            while self.inflight > 0:
                self.idle.wait()
