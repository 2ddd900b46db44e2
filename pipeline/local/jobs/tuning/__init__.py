"""A hyperparameter tuning job (SageMaker's CreateHyperParameterTuningJob): its request read and checked, its trials run as training jobs."""
