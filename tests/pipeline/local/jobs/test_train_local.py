"""`train --local`'s request builder: the channel argument grammar and hyperparameter encoding.
(The command end to end is in tests/pipeline/cli/local/test_commands.py.)"""

from __future__ import annotations

import pytest

from pipeline.errors import UserError
from pipeline.local.jobs.train_local import encode_hyperparameter, parse_channel


@pytest.mark.parametrize(("text", "expected"), [
    ("train=./data", ("train", "./data", "File", "FullyReplicated")),
    ("train=./data:Pipe", ("train", "./data", "Pipe", "FullyReplicated")),
    ("train=./data:Pipe:ShardedByS3Key", ("train", "./data", "Pipe", "ShardedByS3Key")),
    ("train=s3://bucket/prefix/", ("train", "s3://bucket/prefix/", "File", "FullyReplicated")),
    ("train=s3://bucket/prefix:FastFile", ("train", "s3://bucket/prefix", "FastFile", "FullyReplicated")),
    ("eval=s3://b/k:File:ShardedByS3Key", ("eval", "s3://b/k", "File", "ShardedByS3Key")),
    ("train=/abs/dir with space", ("train", "/abs/dir with space", "File", "FullyReplicated")),
])
def test_channel_argument(text, expected):
    assert parse_channel(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("train", "expected NAME=PATH_OR_URI"),
    ("=./data", "expected NAME=PATH_OR_URI"),
    ("train=./data:Stream", "'Stream' is neither an input mode"),
    ("train=./data:ShardedByS3Key", "a Distribution needs a Mode before it"),
    ("tr/ain=./data", "channel names use letters"),
])
def test_bad_channel_arguments(text, message):
    with pytest.raises(UserError, match=message):
        parse_channel(text)


def test_hyperparameters_are_json_encoded_like_the_sdk():
    assert encode_hyperparameter("3") == "3"
    assert encode_hyperparameter("0.01") == "0.01"
    assert encode_hyperparameter("adam") == '"adam"'
    assert encode_hyperparameter("true") == "true"
    assert encode_hyperparameter('[1, 2]') == "[1, 2]"
