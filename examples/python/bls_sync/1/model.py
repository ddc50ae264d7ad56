"""bls_sync: forwards its inputs to the model MODEL_NAME names, waits for the answer and returns
that model's outputs; a failed call fails the request with the callee's error."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            model = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            call = pb_utils.InferenceRequest(
                model_name=model.decode("utf-8"),
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                        pb_utils.get_input_tensor_by_name(request, "INPUT1")])
            answer = call.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.get_output_tensor_by_name(answer, "OUTPUT0"),
                pb_utils.get_output_tensor_by_name(answer, "OUTPUT1")]))
        return responses
