"""Two pipelines written the way AWS's examples write them, with the plain SageMaker SDK (not
trainpipe's get_pipeline), whose scripts open /opt/ml/... directly. Used by
tests/pipeline/local/test_sdk_pipelines.py (slow):

    .venv/bin/pytest tests/pipeline/local/test_sdk_pipelines.py -m slow
"""
