"""The path to SageMaker: what ``trainpipe upsert/start/status/executions/deploy`` do, CLI-free.

- ``aws``: boto3 clients for one region, and AWS errors turned into one-line user errors.
- ``account``: role, bucket, region, model package group and KMS key from flags, then
  TRAINPIPE_* variables, then the infra stack's outputs (``stack``); placeholders refused.
- ``uploads``: content-addressed code bundles and the default data, uploaded only when absent.
- ``secrets``: the scan that keeps credentials out of the definition sent to SageMaker.
- ``diff``: a readable diff of two definitions (deployed vs new, or base vs head in CI).
- ``deploy``: upsert = build, check, scan, diff, upload, create or update.
- ``executions``: start with checked parameters, wait with progress, status and history tables.
- ``endpoint``: deploy = a real-time endpoint from a registry model package, created or
  updated in place, and followed until InService.

Every AWS call honours ``AWS_ENDPOINT_URL`` (boto3 does), which is how the tests point all of
this at a local moto server.
"""
