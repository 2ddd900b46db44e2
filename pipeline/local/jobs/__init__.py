"""One SageMaker job (Training or Processing) run as local processes under the container contract."""
