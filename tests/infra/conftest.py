"""The template as data (CloudFormation's short tags as their long forms), and moto."""

from __future__ import annotations

import pytest
import yaml

from tests.moto_aws import TEMPLATE, aws, moto_url, stack  # noqa: F401


class _CloudFormationLoader(yaml.SafeLoader):
    pass


def _intrinsic(loader, tag_suffix, node):
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if tag_suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CloudFormationLoader.add_multi_constructor("!", _intrinsic)


@pytest.fixture(scope="session")
def template() -> dict:
    return yaml.load(TEMPLATE.read_text(), Loader=_CloudFormationLoader)  # noqa: S506
