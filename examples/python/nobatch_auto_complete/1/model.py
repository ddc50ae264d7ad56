"""nobatch_auto_complete: add_sub whose inputs, outputs and batching are declared by
auto_complete_config rather than in config.pbtxt (max_batch_size 0)."""
import numpy as np
import triton_python_backend_utils as pb_utils

INPUTS = [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [4]},
          {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4]}]
OUTPUTS = [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4]},
           {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [4]}]


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        config = auto_complete_model_config.as_dict()
        have_in = {i["name"] for i in config.get("input", [])}
        have_out = {o["name"] for o in config.get("output", [])}
        for i in INPUTS:
            if i["name"] not in have_in:
                auto_complete_model_config.add_input(i)
        for o in OUTPUTS:
            if o["name"] not in have_out:
                auto_complete_model_config.add_output(o)
        auto_complete_model_config.set_max_batch_size(0)
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", (in0 + in1).astype(np.float32)),
                pb_utils.Tensor("OUTPUT1", (in0 - in1).astype(np.float32))]))
        return responses
