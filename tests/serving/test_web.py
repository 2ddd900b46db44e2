"""serving/web.py: the pieces both model servers share (their HTTP behaviour is tested through
test_server.py and test_handler.py, against started servers)."""

from __future__ import annotations

import asyncio
import json

from serving import web
from tests import readme_record


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


def test_a_body_that_stalls_is_a_408_and_its_bytes_are_let_go():
    class Stalled(_Request):
        async def stream(self):
            yield b"{\"instances\": "
            await asyncio.sleep(30)  # the client stopped sending
            yield b"[]}"

    answer = asyncio.run(web.read_body(Stalled([]), seconds=0.2))
    readme_record.record(json.loads(answer.body)["error"])
    assert answer.status_code == 408
    assert json.loads(answer.body) == {"error": "the request body did not arrive within 0.2 s (14 bytes came); "
                                                "send it whole and at once"}


def test_a_client_gone_mid_body_is_a_400_not_an_internal_error():
    from starlette.requests import ClientDisconnect

    class Gone(_Request):
        async def stream(self):
            yield b"1,"
            raise ClientDisconnect()

    answer = asyncio.run(web.read_body(Gone([]), seconds=5))
    assert answer.status_code == 400
    assert json.loads(answer.body) == {"error": "the client closed the connection before its body arrived (2 bytes came)"}


def test_the_host_names_a_server_answers_to():
    assert web.host_names("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert web.host_names("10.1.2.3") == {"10.1.2.3"}
    assert {"localhost", "127.0.0.1"} < web.host_names("0.0.0.0")
    check = web.CallerCheck(None, "0.0.0.0")
    assert check.allowed("192.168.1.20") and not check.allowed("attacker.example")
    assert [web._host_of(v) for v in ("127.0.0.1:8080", "[::1]:8080", "LocalHost", "::1")] == [
        "127.0.0.1", "::1", "localhost", "::1"]
