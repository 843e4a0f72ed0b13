"""The export gate (strict normaliser and the format's validator) and the snapshot's provenance: a manifest line per
record, naming its review and verdict and the sha256 of its bytes, and a report of what was left out and why."""

import copy
import hashlib
import io
import json
import zipfile

import pytest

from simia_web.curation.models import Decision, JudgeVerdict, Review, Trajectory, TrajectoryStatus
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write, snapshot_create, snapshot_path

from .data import conversation, domain_make, task_make, trajectory_make

FORMATS = ["openai", "sharegpt", "tau2"]


def _broken(kind: str) -> list[dict]:
    """A conversation with one fault the editor's save path used to let through, stored straight in the database."""
    messages = copy.deepcopy(conversation())
    if kind == "empty_tool_name":
        messages[2]["tool_calls"][0]["function"]["name"] = ""
    elif kind == "arguments_not_json":
        messages[2]["tool_calls"][0]["function"]["arguments"] = "{"
    elif kind == "result_without_call_id":
        del messages[3]["tool_call_id"]
    return messages


BROKEN = ["empty_tool_name", "arguments_not_json", "result_without_call_id"]


def _records(fmt: str, path) -> list[bytes]:
    """The records of a data file as the bytes written (a JSONL line without its newline; a tau2 simulation)."""
    if fmt == "openai":
        return path.read_bytes().splitlines()
    if fmt == "sharegpt":
        with zipfile.ZipFile(path) as archive:
            return archive.read("data.jsonl").splitlines()
    document = path.read_bytes()
    body = document[document.index(b'"simulations":[') + len(b'"simulations":[') : -2]
    return body.split(b",\n") if body else []


def _manifest(path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _accepted_by(trajectory: Trajectory, reviewer, decision=Decision.ACCEPT, based_on=None) -> Review:
    review = Review.objects.create(
        trajectory=trajectory,
        reviewer=reviewer,
        decision=decision,
        trajectory_version=trajectory.version,
        based_on_version=based_on,
    )
    Trajectory.objects.filter(pk=trajectory.pk).update(status=TrajectoryStatus.ACCEPTED)
    return review


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fault", BROKEN)
def test_the_gate_leaves_out_a_record_the_strict_normaliser_or_the_format_refuses(tmp_path, fmt, fault):
    shop = domain_make()
    task = task_make(shop)
    good = trajectory_make(shop, task=task)
    bad = trajectory_make(shop, task=task, messages=_broken(fault))

    result = export_write(format=fmt, filters=export_filters_clean({}), path=tmp_path / f"out.{fmt}")

    assert result.stats.count == 1 and result.stats.refused_count == 1
    (refusal,) = result.stats.refusals
    assert refusal["trajectory"] == bad.pk and refusal["reasons"]
    assert sum(result.stats.refusal_reasons.values()) >= 1
    (line,) = _manifest(tmp_path / "out.manifest.jsonl")
    assert line["trajectory_id"] == good.pk
    report = json.loads((tmp_path / "out.report.json").read_text())
    assert report["records"] == 1 and report["left_out"] == 1
    assert report["left_out_examples"] == [refusal]
    assert report["left_out_by_reason"] == dict(result.stats.refusal_reasons)


@pytest.mark.django_db
def test_the_strict_normaliser_names_the_field_it_refused(tmp_path):
    shop = domain_make()
    nameless = trajectory_make(shop, messages=_broken("empty_tool_name"))
    orphan = trajectory_make(shop, messages=_broken("result_without_call_id"))
    unparsable = trajectory_make(shop, messages=_broken("arguments_not_json"))

    result = export_write(format="sharegpt", filters=export_filters_clean({}), path=tmp_path / "out.zip")

    reasons = {r["trajectory"]: r["reasons"] for r in result.stats.refusals}
    assert reasons[nameless.pk] == ["strict: messages[2].tool_calls[0].function.name: is missing"]
    assert reasons[orphan.pk] == ["strict: messages[3].tool_call_id: is missing"]
    assert reasons[unparsable.pk] == ["sharegpt: conversations[1].value: call 0 arguments must be a JSON object"]
    assert result.stats.count == 0
    assert result.stats.refusal_reasons == {
        "strict: messages[].tool_calls[].function.name: is missing": 1,
        "strict: messages[].tool_call_id: is missing": 1,
        "sharegpt: conversations[].value: call N arguments must be a JSON object": 1,
    }


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", FORMATS)
def test_each_manifest_line_names_its_record_review_and_verdict_and_hashes_its_bytes(tmp_path, fmt, users):
    shop = domain_make()
    task = task_make(shop)
    plain = trajectory_make(shop, task=task, messages=conversation("W1"))
    reviewed = trajectory_make(shop, task=task, messages=conversation("W2"), status=TrajectoryStatus.JUDGED_PASS)
    Trajectory.objects.filter(pk=reviewed.pk).update(version=3)
    reviewed.refresh_from_db()
    JudgeVerdict.objects.create(trajectory=reviewed, passed=False, score=0.3, trajectory_version=1)
    judged = JudgeVerdict.objects.create(trajectory=reviewed, passed=True, score=0.85, trajectory_version=3)
    JudgeVerdict.objects.create(trajectory=reviewed, passed=None, error="connection_error", trajectory_version=3)
    undone = _accepted_by(reviewed, users["curator"])
    Review.objects.filter(pk=undone.pk).update(undone_at=undone.created_at)
    decision = _accepted_by(reviewed, users["annotator"], decision=Decision.FIX_ACCEPT, based_on=2)
    superseded = _accepted_by(reviewed, users["curator"])  # a later text replaced what it accepted
    Review.objects.filter(pk=superseded.pk).update(superseded_at=superseded.created_at)
    trajectory_make(shop, messages=_broken("empty_tool_name"))  # left out: no manifest line

    result = export_write(format=fmt, filters=export_filters_clean({}), path=tmp_path / "data.out")

    records = _records(fmt, tmp_path / "data.out")
    manifest = _manifest(tmp_path / "data.manifest.jsonl")
    assert len(records) == len(manifest) == result.stats.count == 2
    for index, (record, line) in enumerate(zip(records, manifest, strict=True)):
        assert line["index"] == index
        assert line["sha256"] == hashlib.sha256(record).hexdigest()
    assert [line["trajectory_id"] for line in manifest] == [plain.pk, reviewed.pk]
    first, second = manifest
    assert first["decision_id"] is None and first["decided_by"] is None and first["version"] == 1
    assert second["version"] == 3 and second["status"] == "accepted"
    assert second["decision_id"] == decision.pk and second["decision"] == "fix_accept"
    assert second["decided_by"] == "annotator" and second["decision_version"] == 3 and second["decided_at"]
    assert second["decision_made_on"] == 2
    assert second["judge_verdict_id"] == judged.pk and second["judge_passed"] is True
    assert second["judge_score"] == pytest.approx(0.85) and second["judge_version"] == 3
    # The record itself traces back too where its format has room for it (see test_trajectory_ids_in_records).
    if fmt != "openai":
        identity = {"sharegpt": b'"trajectory_id":%d', "tau2": b'"id":"simia-%d"'}[fmt]
        assert all(identity % line["trajectory_id"] in record for record, line in zip(records, manifest, strict=True))
    manifest_file = result.file("manifest")
    body = (tmp_path / "data.manifest.jsonl").read_bytes()
    assert manifest_file.bytes == len(body) and manifest_file.sha256 == hashlib.sha256(body).hexdigest()


@pytest.mark.django_db
def test_trajectory_ids_in_records_only_where_the_trainer_accepts_an_extra_field(tmp_path):
    shop = domain_make()
    trajectory = trajectory_make(shop)

    export_write(format="openai", filters=export_filters_clean({}), path=tmp_path / "o.jsonl")
    export_write(format="sharegpt", filters=export_filters_clean({}), path=tmp_path / "s.zip")

    (openai_record,) = [json.loads(line) for line in (tmp_path / "o.jsonl").read_bytes().splitlines()]
    assert set(openai_record) == {"messages", "tools"}  # OpenAI's upload refuses keys it does not know
    assert _manifest(tmp_path / "o.manifest.jsonl")[0]["trajectory_id"] == trajectory.pk
    with zipfile.ZipFile(tmp_path / "s.zip") as archive:
        (row,) = [json.loads(line) for line in archive.read("data.jsonl").splitlines()]
        inside = archive.read("manifest.jsonl")
        (dataset,) = json.loads(archive.read("dataset_info.json")).values()
        columns = dataset["columns"]
    assert row["trajectory_id"] == trajectory.pk and "trajectory_id" not in columns.values()
    assert inside == (tmp_path / "s.manifest.jsonl").read_bytes()  # the zip carries the same manifest


def test_a_snapshot_that_left_records_out_says_so_on_its_page_in_the_api_and_in_its_files(
    eager, settings, tmp_path, client_for
):
    settings.EXPORTS_DIR = tmp_path / "exports"
    shop = domain_make()
    kept = trajectory_make(shop)
    left_out = [trajectory_make(shop, messages=_broken(fault)) for fault in BROKEN]

    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()

    assert snapshot.count == 1 and snapshot.refused_count == 3
    kinds = ["data", "manifest", "image", "image", "image", "card", "report"]
    assert [entry["kind"] for entry in snapshot.files] == kinds
    client = client_for("annotator")
    body = client.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    assert body["refused_count"] == 3 and sum(body["refusal_reasons"].values()) == 3
    assert sorted(r["trajectory"] for r in body["refusals"]) == sorted(t.pk for t in left_out)
    downloads = {}
    for entry in body["files"]:
        response = client.get(entry["download_url"])
        assert response.status_code == 200, entry
        content = b"".join(response.streaming_content)
        assert hashlib.sha256(content).hexdigest() == entry["sha256"] == response["X-Checksum-SHA256"]
        assert len(content) == entry["bytes"]
        downloads[entry["name"]] = downloads[entry["kind"]] = content
    assert body["download_url"] == body["files"][0]["download_url"] and body["sha256"] == body["files"][0]["sha256"]
    report = json.loads(downloads["report"])
    assert report["snapshot"] == snapshot.pk and report["left_out"] == 3
    assert {f["name"]: f["sha256"] for f in report["files"]} == {
        f["name"]: f["sha256"] for f in body["files"] if f["kind"] != "report"
    }
    assert downloads["images/turns.png"].startswith(b"\x89PNG") and b"![turns](images/turns.png)" in downloads["card"]
    (line,) = [json.loads(line) for line in downloads["manifest"].splitlines()]
    assert line["trajectory_id"] == kept.pk
    assert line["sha256"] == hashlib.sha256(downloads["data"].rstrip(b"\n")).hexdigest()
    assert snapshot_path(snapshot, "manifest").read_bytes() == downloads["manifest"]
    assert client.get(f"/api/v1/snapshots/{snapshot.pk}/download/", {"file": "other"}).status_code == 400

    page = client.get(f"/exports/{snapshot.pk}/").content.decode()
    assert 'id="snapshot-left-out">3 left out<' in page
    assert "strict: messages[].tool_calls[].function.name: is missing" in page
    for trajectory in left_out:
        assert f'href="/trajectories/{trajectory.pk}/"' in page
    assert f"/api/v1/snapshots/{snapshot.pk}/download/?file=manifest" in page
    assert "(3 left out)" in client.get("/exports/").content.decode()


def test_the_count_matches_button_posts_and_never_puts_the_csrf_token_in_a_url(client_for, db):
    shop = domain_make()
    trajectory_make(shop)
    trajectory_make(shop, status=TrajectoryStatus.JUDGED_PASS)
    client = client_for("curator")
    page = client.get("/exports/").content.decode()
    form = page[page.index('<form method="post" class="card" id="export-form">') :]
    form = form[: form.index("</form>")]
    assert "csrfmiddlewaretoken" in form and 'formmethod="get"' not in form
    assert 'name="action" value="count"' in form

    response = client.post("/exports/", {"action": "count", "status": "judged_pass", "format": "openai"})

    assert response.status_code == 200 and 'id="export-matching">1<' in response.content.decode()
    assert "csrfmiddlewaretoken" not in response.request.get("QUERY_STRING", "")
    from simia_web.exports.models import Snapshot

    assert not Snapshot.objects.exists()  # counting built nothing
    assert client_for("annotator").post("/exports/", {"action": "count"}).status_code == 403


def test_the_export_command_writes_the_manifest_and_report_beside_the_data(tmp_path, db):
    from django.core.management import call_command

    shop = domain_make()
    trajectory_make(shop)
    trajectory_make(shop, messages=_broken("arguments_not_json"))
    out = io.StringIO()
    call_command("export", "--format", "openai", "--output", str(tmp_path / "retail.jsonl"), stdout=out)
    text = out.getvalue()
    assert "wrote 1 records" in text and "left out 1 records" in text
    assert f"wrote the manifest {tmp_path / 'retail.manifest.jsonl'}" in text
    assert len(_manifest(tmp_path / "retail.manifest.jsonl")) == 1
    assert json.loads((tmp_path / "retail.report.json").read_text())["left_out"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["retail.jsonl", "retail.manifest.jsonl", "retail.report.json"]


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_lines_written_in_blocks_are_the_bytes_written_one_at_a_time(tmp_path, fmt, monkeypatch):
    from simia_web.exports import records

    shop = domain_make()
    for i in range(7):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    trajectory_make(shop, messages=_broken("arguments_not_json"))  # refused between records written
    written = {}
    for block_bytes in (1, 1500, records.LINES_BYTES):  # a block per line, several lines, all of them
        monkeypatch.setattr(records, "LINES_BYTES", block_bytes)
        folder = tmp_path / str(block_bytes)
        result = export_write(format=fmt, filters=export_filters_clean({}), path=folder / "data.out")
        manifest = (folder / "data.manifest.jsonl").read_bytes()
        assert result.file("manifest").sha256 == hashlib.sha256(manifest).hexdigest()
        written[block_bytes] = (_records(fmt, folder / "data.out"), manifest, result.stats.count)
    first, *others = written.values()
    assert first[2] == 7 and len(first[0]) == 7 and len(first[1].splitlines()) == 7
    assert all(other == first for other in others)
