"""The definition cache: a hit is the same JSON; any input that shapes the definition misses."""

from __future__ import annotations

import json

from pipeline.definition import cache as definition_cache
from pipeline.definition.build import build_definition
from pipeline.settings import Settings


def test_a_hit_returns_what_a_build_returns(tmp_path):
    first, hit = definition_cache.cached_definition(Settings(), {"Epochs": "3"}, tmp_path)
    assert not hit
    second, hit = definition_cache.cached_definition(Settings(), {"Epochs": "3"}, tmp_path)
    assert hit and second == first
    assert json.dumps(second) == json.dumps(build_definition(Settings(), {"Epochs": "3"}))


def test_settings_overrides_sdk_and_sources_are_in_the_key(monkeypatch):
    key = definition_cache.definition_key(Settings(), {"Epochs": "3"})
    assert definition_cache.definition_key(Settings(), {"Epochs": "4"}) != key
    assert definition_cache.definition_key(Settings(bucket="other"), {"Epochs": "3"}) != key
    monkeypatch.setattr(definition_cache, "_sdk_version", lambda: "0.0.0")
    assert definition_cache.definition_key(Settings(), {"Epochs": "3"}) != key
    monkeypatch.undo()
    monkeypatch.setattr(definition_cache, "_sources_digest", lambda: "changed")
    assert definition_cache.definition_key(Settings(), {"Epochs": "3"}) != key


def test_an_unreadable_entry_is_rebuilt(tmp_path):
    key = definition_cache.definition_key(Settings(), {})
    (tmp_path / f"{key}.json").write_text("{not json")
    definition, hit = definition_cache.cached_definition(Settings(), {}, tmp_path)
    assert not hit and definition["Version"] == "2020-12-01"
