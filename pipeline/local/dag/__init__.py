"""Reading a definition the way SageMaker Pipelines does: parameters, expressions, step order, caching, stubs and the preflight check; no job runs here."""
