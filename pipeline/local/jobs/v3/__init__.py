"""SageMaker SDK v3 ModelTrainer training jobs: the launch its sm_drivers files describe, run as v3's drivers run it."""
