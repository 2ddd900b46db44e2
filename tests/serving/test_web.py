"""serving/web.py: the pieces both model servers share (their HTTP behaviour is tested through
test_server.py and test_handler.py, against started servers)."""

from __future__ import annotations

import asyncio
import json

from serving import web


class _Request:
    """What read_body reads of a Starlette request: its headers and its streamed body."""

    def __init__(self, chunks: list[bytes], declared: int | None = None):
        self.chunks = chunks
        self.headers = {} if declared is None else {"content-length": str(declared)}

    async def stream(self):
        for chunk in self.chunks:
            yield chunk


def test_an_error_is_one_line_of_json():
    answer = web.error(400, "the body\nis not\tJSON")
    assert answer.status_code == 400 and answer.media_type == "application/json"
    assert json.loads(answer.body) == {"error": "the body is not JSON"}


def test_the_body_limit_is_checked_on_the_declared_length_and_as_it_streams():
    assert asyncio.run(web.read_body(_Request([b"ab", b"cd"]), limit=4)) == b"abcd"
    for request in (_Request([b"abc", b"de"]), _Request([], declared=5)):
        answer = asyncio.run(web.read_body(request, limit=4))
        assert answer.status_code == 413 and "SageMaker's limit" in json.loads(answer.body)["error"]


def test_startup_time_and_memory_are_read():
    assert web.process_seconds() > 0 and web.resident_mib() > 1
