"""The commands that use a trained model: ``serve`` and ``predict`` (``serve.py``), and which registered model they take (``model_choice.py``)."""
