"""TF_CONFIG per strategy, host and task, against the toolkit's own functions."""

from __future__ import annotations

import json
import socket

import pytest

from pipeline.local.hosts import tf_config
from tests.pipeline.local.hosts import toolkit_training as toolkit

LAYOUTS = [[f"algo-{i}" for i in range(1, n + 1)] for n in (1, 2, 3, 4)]


@pytest.mark.parametrize("hosts", LAYOUTS, ids=len)
def test_parameter_server_matches_the_toolkit_for_every_host(hosts):
    for host in hosts:
        assert tf_config.for_parameter_server(hosts, host) == toolkit._build_tf_config_for_ps(hosts, host)
        if len(hosts) > 1:
            assert (tf_config.for_parameter_server(hosts, host, ps_task=True)
                    == toolkit._build_tf_config_for_ps(hosts, host, ps_task=True))


def test_parameter_server_two_hosts_spelled_out():
    # training.py L58-87: master is hosts[0], every host a ps on 2223, the rest workers.
    assert tf_config.for_parameter_server(["algo-1", "algo-2"], "algo-2") == {
        "cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"],
                    "worker": ["algo-2:2222"]},
        "environment": "cloud",
        "task": {"index": 0, "type": "worker"},
    }
    assert tf_config.for_parameter_server(["algo-1", "algo-2"], "algo-2", ps_task=True)["task"] == {
        "index": 1, "type": "ps"}


def test_a_ps_task_without_parameter_servers_is_refused_as_the_toolkit_does():
    with pytest.raises(ValueError, match="no parameter servers"):
        tf_config.for_parameter_server(["algo-1"], "algo-1", ps_task=True)
    with pytest.raises(ValueError, match="no parameter servers"):
        toolkit._build_tf_config_for_ps(["algo-1"], "algo-1", ps_task=True)


@pytest.mark.parametrize("hosts", LAYOUTS, ids=len)
def test_mirrored_matches_the_toolkit_for_every_host(hosts):
    for host in hosts:
        assert tf_config.for_mirrored(hosts, host) == toolkit._build_tf_config_for_mwms(hosts, host)


def test_parameter_servers_only_with_more_than_one_host():
    # training.py L163-168: enabled and len(env.hosts) > 1.
    enabled = {tf_config.PARAMETER_SERVER_ENABLED: True}
    assert tf_config.parameter_server_enabled(enabled, ["algo-1", "algo-2"])
    assert not tf_config.parameter_server_enabled(enabled, ["algo-1"])
    assert tf_config.parameter_server_enabled({tf_config.PARAMETER_SERVER_ENABLED: "true"}, ["a", "b"])
    assert not tf_config.parameter_server_enabled({}, ["a", "b"])
    assert tf_config.mirrored_enabled({tf_config.MULTI_WORKER_MIRRORED_ENABLED: True})
    assert not tf_config.mirrored_enabled({tf_config.MULTI_WORKER_MIRRORED_ENABLED: False})


def test_port_map_keeps_the_shape_and_gives_every_task_its_own_free_port():
    hosts = ["algo-1", "algo-2", "algo-3"]
    ports = tf_config.PortMap(hosts, [tf_config.WORKER_PORT, tf_config.PS_PORT])
    configs = [tf_config.for_parameter_server(hosts, h, address=ports.address) for h in hosts]
    ours, theirs = configs[1], toolkit._build_tf_config_for_ps(hosts, "algo-2")
    assert ours["task"] == theirs["task"] and ours["environment"] == theirs["environment"]
    assert {k: [a.split(":")[0] for a in v] for k, v in ours["cluster"].items()} == {
        k: [a.split(":")[0] for a in v] for k, v in theirs["cluster"].items()}
    # Every process of the job agrees on the cluster, and no two tasks share a port.
    assert all(c["cluster"] == ours["cluster"] for c in configs)
    used = [int(a.split(":")[1]) for v in ours["cluster"].values() for a in v]
    assert len(set(used)) == len(used) == 6
    for port in used:  # free: this test can bind each one
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_port_map_without_namespaces_dials_loopback():
    ports = tf_config.PortMap(["algo-1", "algo-2"], [tf_config.MWMS_PORT], names_resolve=False)
    config = tf_config.for_mirrored(["algo-1", "algo-2"], "algo-1", address=ports.address)
    assert all(a.startswith("127.0.0.1:") for a in config["cluster"]["worker"])


def test_encoded_as_the_toolkit_puts_it_in_the_environment():
    config = tf_config.for_mirrored(["algo-1", "algo-2"], "algo-2")
    assert tf_config.encode(config) == json.dumps(toolkit._build_tf_config_for_mwms(["algo-1", "algo-2"], "algo-2"))
