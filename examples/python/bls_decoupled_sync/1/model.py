"""bls_decoupled_sync: SUM and COUNT of square_int32's responses to IN, read one by one from the
iterator exec(decoupled=True) returns (its last item is empty when square_int32 ends without a
response)."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="square_int32", requested_output_names=["OUT"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")])
            total = count = 0
            for answer in call.exec(decoupled=True):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                if len(answer.output_tensors()) == 0:  # the last, empty response
                    continue
                total += int(pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()[0])
                count += 1
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
                pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32))]))
        return responses
