"""Where things are kept: the ``s3://`` object store, the channels that deliver it to hosts, and the model registry."""
