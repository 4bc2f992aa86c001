"""Checkpoint registration, listing and byte-exact downloads from a local directory and a real S3 server."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from api_testkit import upload_checkpoint
from fastapi.testclient import TestClient

from api import checkpoints, jobs
from api.db import session_scope
from api.settings import Settings
from api.storage import make_store
from veernet_core.checkpoint import deserialize, load_latest, prune
from worker.attempt import CheckpointRegistry, LeaseLost


def register(job_id: int, attempt: int, ref: Any) -> bool:
    with session_scope() as session:
        return checkpoints.register_checkpoint(session, job_id, attempt, ref)


def test_checkpoints_are_listed_per_job_and_globally(client: TestClient, running_job: Any,
                                                     store: Any) -> None:
    job_id, attempt = running_job
    refs = [upload_checkpoint(store, job_id, attempt, epoch)[0] for epoch in (1, 2)]
    assert all(register(job_id, attempt, ref) for ref in refs)
    listed = client.get(f"/jobs/{job_id}/checkpoints").json()
    assert [c["storage_key"] for c in listed] == [r.key for r in refs]  # oldest first
    assert listed[0]["sha256"] == refs[0].sha256 and listed[0]["size"] == refs[0].size
    page = client.get("/checkpoints", params={"job_id": job_id}).json()
    assert page["total"] == 2 and [c["epoch"] for c in page["items"]] == [2, 1]  # newest first
    assert client.get("/checkpoints", params={"job_id": job_id + 1}).json()["total"] == 0
    one = client.get(f"/checkpoints/{listed[1]['id']}").json()
    assert one["metrics"] == {"val_iou": 0.52} and one["attempt"] == attempt
    assert client.get("/checkpoints/4242").status_code == 404
    assert client.get("/checkpoints/4242/download").status_code == 404


def test_only_the_newest_best_checkpoint_keeps_the_flag(running_job: Any, store: Any) -> None:
    job_id, attempt = running_job
    for epoch in (1, 2, 3):
        register(job_id, attempt, upload_checkpoint(store, job_id, attempt, epoch, is_best=epoch < 3)[0])
    with session_scope() as session:
        assert [c.is_best for c in checkpoints.list_checkpoints(session, job_id)] == [False, True, False]


def test_local_download_is_byte_exact_with_length_and_sha256(client: TestClient, running_job: Any,
                                                             store: Any) -> None:
    job_id, attempt = running_job
    ref, data = upload_checkpoint(store, job_id, attempt, epoch=1)
    register(job_id, attempt, ref)
    checkpoint_id = client.get(f"/jobs/{job_id}/checkpoints").json()[0]["id"]
    response = client.get(f"/checkpoints/{checkpoint_id}/download")
    assert response.status_code == 200
    assert response.content == data
    assert response.headers["content-length"] == str(len(data))
    assert response.headers["x-checksum-sha256"] == hashlib.sha256(response.content).hexdigest() == ref.sha256
    assert deserialize(response.content, ref.sha256)["epoch"] == 1


def test_download_of_a_pruned_object_is_404_and_of_a_truncated_one_503(client: TestClient, running_job: Any,
                                                                        store: Any) -> None:
    job_id, attempt = running_job
    pruned, _ = upload_checkpoint(store, job_id, attempt, epoch=1)
    truncated, data = upload_checkpoint(store, job_id, attempt, epoch=2)
    register(job_id, attempt, pruned)
    register(job_id, attempt, truncated)
    store.delete(pruned.key)
    store.put(truncated.key, data[: len(data) // 2])
    first, second = (c["id"] for c in client.get(f"/jobs/{job_id}/checkpoints").json())
    response = client.get(f"/checkpoints/{first}/download")
    assert response.status_code == 404 and "missing" in response.json()["detail"]
    response = client.get(f"/checkpoints/{second}/download")
    assert response.status_code == 503 and "corrupt" in response.json()["detail"]


@pytest.mark.parametrize("presign", [False, True])
def test_s3_download_streams_or_redirects_to_a_presigned_url(
        client: TestClient, running_job: Any, reconfigure: Any, s3_endpoint: str, s3_bucket: str,
        presign: bool) -> None:
    settings = reconfigure(CHECKPOINT_URL=f"s3://{s3_bucket}/runs/v1", S3_ENDPOINT_URL=s3_endpoint,
                           S3_PRESIGN=str(presign).lower(), PRESIGN_SECONDS=120)
    job_id, attempt = running_job
    ref, data = upload_checkpoint(make_store(settings), job_id, attempt, epoch=1)
    register(job_id, attempt, ref)
    checkpoint_id = client.get(f"/jobs/{job_id}/checkpoints").json()[0]["id"]
    response = client.get(f"/checkpoints/{checkpoint_id}/download", follow_redirects=False)
    if presign:
        assert response.status_code == 307
        url = response.headers["location"]
        assert url.startswith(f"{s3_endpoint}/{s3_bucket}/runs/v1/{ref.key}") and "X-Amz-Expires=120" in url
        response = httpx.get(url)  # a plain HTTP client, no credentials: the URL is the grant
    assert response.status_code == 200
    assert response.content == data and hashlib.sha256(response.content).hexdigest() == ref.sha256
    if not presign:
        assert response.headers["x-checksum-sha256"] == ref.sha256
        assert response.headers["content-length"] == str(len(data))


def test_db_registry_commits_resumes_and_prunes_under_the_fence(service: Settings, running_job: Any,
                                                                store: Any) -> None:
    job_id, attempt = running_job
    registry = CheckpointRegistry(job_id, attempt, service)
    uploads = [upload_checkpoint(store, job_id, attempt, epoch) for epoch in (1, 2, 3)]
    assert all(registry.commit(ref) for ref, _ in uploads)
    store.put(uploads[2][0].key, b"corrupt")  # the newest is damaged: resume falls back to epoch 2
    ref, state = load_latest(store, registry) or (None, None)
    assert ref == uploads[1][0] and state is not None and state["epoch"] == 2
    removed = prune(store, registry, keep_last=2)
    assert [r.key for r in removed] == [uploads[0][0].key] and not store.exists(uploads[0][0].key)
    assert [r.epoch for r in registry.committed()] == [2, 3]

    with session_scope() as session:  # another worker takes over; the old attempt is a zombie now
        assert jobs.release(session, job_id, attempt, "test") and jobs.claim(session, job_id, "w2", 60) == 2
    assert not registry.commit(upload_checkpoint(store, job_id, attempt, epoch=4)[0])
    with pytest.raises(LeaseLost):
        prune(store, registry, keep_last=1)
    assert store.exists(uploads[1][0].key)  # the zombie deleted nothing
