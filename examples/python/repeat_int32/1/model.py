"""repeat_int32: one response per element of IN, sent from a thread of the model's own while
execute has already returned; then the final flag without a response."""
import json
import threading
import time

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
        self.inflight = 0
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)

    def execute(self, requests):
        if len(requests) != 1:
            raise pb_utils.TritonModelException("unsupported batch size " + str(len(requests)))
        request = requests[0]
        values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
        delays = pb_utils.get_input_tensor_by_name(request, "DELAY").as_numpy()
        wait = pb_utils.get_input_tensor_by_name(request, "WAIT").as_numpy()
        if values.shape != delays.shape:
            raise pb_utils.TritonModelException(
                "expected IN and DELAY shape to match, got {} and {}.".format(
                    list(values.shape), list(delays.shape)))
        with self.lock:
            self.inflight += 1
        threading.Thread(target=self.respond, daemon=True,
                         args=(request.get_response_sender(), values.copy(),
                               delays.copy())).start()
        time.sleep(int(wait[0]) / 1000)
        return None

    def respond(self, sender, values, delays):
        try:
            for i, (value, delay) in enumerate(zip(values, delays)):
                time.sleep(int(delay) / 1000)
                sender.send(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("OUT", np.array([value], dtype=np.int32)),
                    pb_utils.Tensor("IDX", np.array([i], dtype=np.uint32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        finally:
            with self.lock:
                self.inflight -= 1
                self.idle.notify_all()

    def finalize(self):
        with self.lock:
            while self.inflight > 0:
                self.idle.wait()
