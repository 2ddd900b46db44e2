"""Experiment tracking: every local execution, its steps and its model, logged to MLflow.

``target`` says where runs go (a server, or the embedded SQLite store in the workdir),
``records`` reads what to log from trainpipe's own records (``execution.json``, each job's
``metrics.json``, ``evaluation.json``, the registry), and ``logger`` writes it through
``MlflowClient``, never failing the pipeline: what a server that is down did not take is
logged later by ``trainpipe track sync`` from the same records.
"""
