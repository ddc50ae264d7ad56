"""bls_async: `async def execute` with two requests to add_sub awaited together."""
import asyncio

import triton_python_backend_utils as pb_utils


def add_sub(a, b):
    return pb_utils.InferenceRequest(
        model_name="add_sub", requested_output_names=["OUTPUT0", "OUTPUT1"],
        inputs=[pb_utils.Tensor("INPUT0", a), pb_utils.Tensor("INPUT1", b)])


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            first, second = await asyncio.gather(add_sub(in0, in1).async_exec(),
                                                 add_sub(in1, in0).async_exec())
            for answer in (first, second):
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0",
                                pb_utils.get_output_tensor_by_name(first, "OUTPUT0").as_numpy()),
                pb_utils.Tensor("OUTPUT1",
                                pb_utils.get_output_tensor_by_name(second, "OUTPUT1").as_numpy())]))
        return responses
