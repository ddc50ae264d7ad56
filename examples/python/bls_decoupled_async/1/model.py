"""bls_decoupled_async: as bls_decoupled_sync, with async execute: every request's call to
square_int32 is in flight at once (async_exec(decoupled=True) under asyncio.gather)."""
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


async def stream_sum(request):
    call = pb_utils.InferenceRequest(
        model_name="square_int32", requested_output_names=["OUT"],
        inputs=[pb_utils.get_input_tensor_by_name(request, "IN")])
    total = count = 0
    for answer in await call.async_exec(decoupled=True):
        if answer.has_error():
            raise pb_utils.TritonModelException(answer.error().message())
        if len(answer.output_tensors()) > 0:
            total += int(pb_utils.get_output_tensor_by_name(answer, "OUT").as_numpy()[0])
            count += 1
    return pb_utils.InferenceResponse(output_tensors=[
        pb_utils.Tensor("SUM", np.array([total], dtype=np.int32)),
        pb_utils.Tensor("COUNT", np.array([count], dtype=np.int32))])


class TritonPythonModel:
    async def execute(self, requests):
        return list(await asyncio.gather(*(stream_sum(r) for r in requests)))
