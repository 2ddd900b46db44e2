"""A trained model as an MLflow pyfunc model, so that the MLflow tools load what trainpipe
registered: ``mlflow.pyfunc.load_model("models:/<group>/<version>")``, ``mlflow models
predict|serve -m models:/<group>/<version> --env-manager local``.

This file is MLflow's "model from code": ``pipeline/tracking`` saves the model with this file
as its ``python_model``, the SavedModel (model.tar.gz extracted) as the artifact
``saved_model``, and the ``serving`` and ``training_entry`` packages as its code, so the
logged model holds all it runs. Rows answer as the endpoint answers them (``serving.codec``:
the same decoding of instances, the same signatures): a DataFrame or a list of rows in, one
prediction per row out (for a classifier ``{"probabilities": [...], "classes": ...}``).
TensorFlow is imported when the model is loaded, not when MLflow saves it.
"""

from __future__ import annotations

import mlflow.models
import mlflow.pyfunc

ARTIFACT = "saved_model"


class TrainpipeModel(mlflow.pyfunc.PythonModel):
    # Rows of any kind (numbers, CSV lines, image bytes) are checked by serving.codec, as the
    # endpoint checks them; MLflow's type-hint validation would only warn on every save.
    _skip_type_hint_validation = True

    def load_context(self, context):
        from serving.model import ServedModel

        self.model = ServedModel(context.artifacts[ARTIFACT])

    def predict(self, context, model_input, params=None):
        from serving.codec import encode, from_json

        rows = model_input.values.tolist() if hasattr(model_input, "values") else list(model_input)
        request = from_json(self.model, {"instances": rows})
        return encode(request, self.model.predict(request.signature, request.inputs))["predictions"]


mlflow.models.set_model(TrainpipeModel())
