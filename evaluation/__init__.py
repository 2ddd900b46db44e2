"""The EvaluateModel step: the trained model scored on the test shards, written as evaluation.json for the quality gate."""
