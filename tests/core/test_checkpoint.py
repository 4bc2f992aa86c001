from __future__ import annotations

import hashlib
import io
import socket
from collections.abc import Iterator

import boto3
import botocore.config
import botocore.exceptions
import pytest
import torch
from moto.server import ThreadedMotoServer

from veernet_core.checkpoint import (
    REQUIRED_KEYS,
    CheckpointError,
    CheckpointRef,
    LocalStore,
    S3Store,
    SidecarRegistry,
    deserialize,
    load_latest,
    prune,
    serialize,
)


def _state(epoch: int) -> dict[str, object]:
    state: dict[str, object] = {key: 0 for key in REQUIRED_KEYS}
    state.update(format_version=1, epoch=epoch, model={"w": torch.full((3,), float(epoch))},
                 rng={"torch": torch.get_rng_state()}, history=[{"epoch": 0.0, "iou": 0.5}],
                 best_metric=None, model_config={"widths": [8, 16]})
    return state


def _commit(store: LocalStore | S3Store, registry: SidecarRegistry, epoch: int, best: bool = False) -> CheckpointRef:
    data, digest = serialize(_state(epoch))
    key = f"epoch-{epoch:04d}-step-00000000.pt"
    store.put(key, data)
    ref = CheckpointRef(key, epoch, 0, len(data), digest, {}, best, epoch * 10)
    assert registry.commit(ref)
    return ref


def test_round_trip_loads_with_weights_only() -> None:
    data, digest = serialize(_state(3))
    assert digest == hashlib.sha256(data).hexdigest()
    state = torch.load(io.BytesIO(data), weights_only=True)
    assert torch.equal(state["model"]["w"], torch.full((3,), 3.0))
    assert deserialize(data, digest)["epoch"] == 3


def test_a_flipped_byte_is_caught_by_the_digest() -> None:
    data, digest = serialize(_state(1))
    corrupt = bytearray(data)
    corrupt[len(corrupt) // 2] ^= 0xFF
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        deserialize(bytes(corrupt), digest)


def test_missing_fields_are_refused() -> None:
    with pytest.raises(CheckpointError, match="lacks"):
        serialize({"model": {}})


def test_corrupt_or_missing_newest_falls_back(tmp_path: object) -> None:
    store = LocalStore(str(tmp_path))
    registry = SidecarRegistry(store)
    _commit(store, registry, 1)
    second = _commit(store, registry, 2)
    third = _commit(store, registry, 3)
    store.put(third.key, b"torn upload")
    skipped: list[tuple[CheckpointRef, str]] = []
    found = load_latest(store, registry, on_skip=lambda ref, why: skipped.append((ref, why)))
    assert found is not None and found[0] == second and found[1]["epoch"] == 2
    assert skipped[0][0] == third and "sha256" in skipped[0][1]
    store.delete(second.key)
    found = load_latest(store, registry)
    assert found is not None and found[1]["epoch"] == 1


def test_an_upload_without_its_commit_is_never_used(tmp_path: object) -> None:
    store = LocalStore(str(tmp_path))
    registry = SidecarRegistry(store)
    _commit(store, registry, 1)
    data, _ = serialize(_state(2))
    store.put("epoch-0002-step-00000000.pt", data)  # uploaded, never committed
    found = load_latest(store, registry)
    assert found is not None and found[1]["epoch"] == 1


def test_prune_keeps_the_last_k_and_the_best(tmp_path: object) -> None:
    store = LocalStore(str(tmp_path))
    registry = SidecarRegistry(store)
    refs = [_commit(store, registry, e, best=(e == 2)) for e in range(1, 7)]
    removed = prune(store, registry, keep_last=2)
    assert [r.epoch for r in removed] == [1, 3, 4]
    assert [r.epoch for r in registry.committed()] == [2, 5, 6]
    assert not store.exists(refs[0].key) and store.exists(refs[1].key)


def test_local_store_refuses_keys_outside_its_root(tmp_path: object) -> None:
    with pytest.raises(ValueError, match="escapes"):
        LocalStore(str(tmp_path)).put("../outside.pt", b"x")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def s3_client() -> Iterator[object]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket="ckpt")
    yield client
    server.stop()


def test_s3_store_over_a_real_http_server(s3_client: object) -> None:
    store = S3Store(s3_client, "ckpt", "team-a/runs")
    registry = SidecarRegistry(store, "jobs/7/")
    assert store.list() == []
    data, digest = serialize(_state(1))
    store.put("jobs/7/attempt-1/epoch-0001-step-00000000.pt", data)
    ref = CheckpointRef("jobs/7/attempt-1/epoch-0001-step-00000000.pt", 1, 0, len(data), digest)
    registry.commit(ref)
    assert store.exists(ref.key) and not store.exists("jobs/7/nothing.pt")
    assert store.list("jobs/7/") == [ref.key, ref.key + ".json"]
    head = s3_client.head_object(Bucket="ckpt", Key="team-a/runs/" + ref.key)  # type: ignore[attr-defined]
    assert head["ContentLength"] == len(data)
    found = load_latest(store, registry)
    assert found is not None and found[0] == ref
    with pytest.raises(CheckpointError, match="no object"):
        store.get("jobs/7/missing.pt")
    store.delete(ref.key)
    assert not store.exists(ref.key)


def test_s3_store_retries_while_the_endpoint_is_down() -> None:
    port = _free_port()
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    waits: list[float] = []

    def sleep_then_start(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:  # the endpoint comes back after two failed tries
            server.start()
            client.create_bucket(Bucket="late")

    store = S3Store(client, "late", sleep=sleep_then_start, backoff_s=0.01)
    try:
        store.put("a.pt", b"payload")
        assert store.get("a.pt") == b"payload"
        assert waits == [0.01, 0.02]
    finally:
        server.stop()


def test_the_default_s3_store_outlasts_a_15_second_outage() -> None:
    """The e2e outage tests cut S3 for a few seconds only; the store's own schedule (its defaults, as the
    worker builds it in api/storage.py) keeps an upload trying for longer than a 15-second outage before it
    gives up: its waits, against an endpoint that refuses every connection, add up to more than 15 s."""
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{_free_port()}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing",
                          config=botocore.config.Config(retries={"max_attempts": 1}))
    waits: list[float] = []
    store = S3Store(client, "down", sleep=waits.append)
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        store.put("a.pt", b"payload")
    assert sum(waits) > 15.0, waits
