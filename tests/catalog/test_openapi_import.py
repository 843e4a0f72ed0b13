"""OpenAPI 3 documents → a domain's APIs: references resolved, required fields, enums, read/write from the method,
YAML as well as JSON, and malformed documents refused naming the operation and field, with nothing written."""

import json

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from simia_web.catalog.importers import ImportRejected, apis_import
from simia_web.catalog.models import Api, Domain, DomainSource

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "status": {"$ref": "#/components/schemas/Status"},
        "lines": {"type": "array", "items": {"$ref": "#/components/schemas/Line"}},
    },
    "required": ["id", "status"],
}
DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "Shop", "version": "1"},
    "paths": {
        "/orders/{orderId}": {
            "parameters": [{"$ref": "#/components/parameters/OrderId"}],
            "get": {
                "operationId": "getOrderById",
                "summary": "Look up an order.",
                "parameters": [{"name": "expand", "in": "query", "schema": {"type": "boolean"}}],
                "responses": {
                    "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"}}}},
                    "404": {"description": "No such order"},
                },
            },
            "delete": {"summary": "Cancel an order.", "responses": {"204": {"description": "Cancelled"}}},
        },
        "/orders": {
            "post": {
                "operationId": "create-order",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewOrder"}}},
                },
                "responses": {
                    "201": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"}}}}
                },
            },
        },
        "/categories": {
            "get": {
                "operationId": "listCategories",
                "responses": {
                    "200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Category"}}}}
                },
            }
        },
    },
    "components": {
        "parameters": {"OrderId": {"name": "orderId", "in": "path", "schema": {"type": "string"}, "description": "Id"}},
        "schemas": {
            "Status": {"type": "string", "enum": ["pending", "shipped", "cancelled"]},
            "Line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}},
            "Order": ORDER,
            "NewOrder": {
                "type": "object",
                "properties": {
                    "customer": {"type": "string", "nullable": True},
                    "priority": {"type": "string", "enum": ["low", "high"]},
                    "total": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                },
                "required": ["priority"],
            },
            "Category": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/components/schemas/Category"}},
                },
            },
        },
    },
}


def upload(document, name="shop.json", *, as_yaml=False):
    text = yaml.safe_dump(document) if as_yaml else json.dumps(document)
    return SimpleUploadedFile(name, text.encode(), content_type="application/octet-stream")


def imported(document=DOCUMENT, **kwargs) -> dict[str, Api]:
    apis_import(domain="shop", openapi=upload(document, **kwargs))
    return {api.name: api for api in Api.objects.filter(domain__name="shop")}


@pytest.mark.django_db
def test_operations_become_apis_with_refs_required_fields_enums_and_kinds():
    apis = imported()
    assert set(apis) == {"get_order_by_id", "delete_orders_order_id", "create_order", "list_categories"}
    assert Domain.objects.get(name="shop").source == DomainSource.OPENAPI

    get = apis["get_order_by_id"]
    assert get.kind == "read" and get.valid and get.description == "Look up an order."
    assert get.parameters["required"] == ["orderId"]  # a path parameter (from the path item, by $ref) is required
    assert get.parameters["properties"]["orderId"] == {"type": "string", "description": "Id"}
    assert get.parameters["properties"]["expand"] == {"type": "boolean"}
    assert get.returns["properties"]["status"]["enum"] == ["pending", "shipped", "cancelled"]  # $ref resolved
    assert get.returns["properties"]["lines"]["items"]["properties"]["qty"] == {"type": "integer"}
    assert get.provenance == {"import": "openapi", "operation": "GET /orders/{orderId}", "operation_id": "getOrderById"}

    assert apis["delete_orders_order_id"].kind == "write"  # no operationId: named from the method and path
    create = apis["create_order"]
    assert create.kind == "write"
    assert create.parameters["required"] == ["priority"]  # a required body's fields are the API's arguments
    assert create.parameters["properties"]["priority"]["enum"] == ["low", "high"]
    assert create.parameters["properties"]["customer"]["type"] == ["string", "null"]  # OpenAPI 3.0's nullable
    assert create.parameters["properties"]["total"] == {"type": "number", "exclusiveMinimum": 0}

    tree = apis["list_categories"].returns  # a schema that contains itself keeps one reference to itself
    assert tree["properties"]["children"]["items"] == {"$ref": "#/$defs/Category"}
    assert tree["$defs"]["Category"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Category"}


@pytest.mark.django_db
def test_yaml_documents_and_numeric_response_codes_are_read():
    apis = imported(name="shop.yaml", as_yaml=True)
    assert apis["get_order_by_id"].returns["required"] == ["id", "status"]


@pytest.mark.django_db
def test_an_optional_body_with_required_fields_stays_one_argument():
    document = json.loads(json.dumps(DOCUMENT))
    document["paths"]["/orders"]["post"]["requestBody"]["required"] = False
    body = imported(document)["create_order"].parameters
    assert set(body["properties"]) == {"body"} and "required" not in body


@pytest.mark.django_db
def test_importing_the_same_document_again_creates_nothing():
    imported()
    result = apis_import(domain="shop", openapi=upload(DOCUMENT))
    assert result.created["apis"] == 0 and result.skipped["apis"] == 4


def broken(mutate) -> dict:
    document = json.loads(json.dumps(DOCUMENT))
    mutate(document)
    return document


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("document", "field", "message"),
    [
        ({"swagger": "2.0", "paths": {}}, "openapi", "is not an OpenAPI 3 document"),
        ({"openapi": "3.1.0", "paths": {}}, "paths", "describes no operations"),
        (
            broken(lambda d: d["components"]["schemas"].pop("Status")),
            "paths./orders/{orderId}.get.responses.200",
            "'#/components/schemas/Status' points at nothing",
        ),
        (
            broken(lambda d: d["paths"]["/orders/{orderId}"]["get"]["parameters"].append({"name": "x", "in": "body"})),
            "paths./orders/{orderId}.get.parameters[1].in",
            "must be one of path, query, header, cookie",
        ),
        (
            broken(lambda d: d["paths"]["/categories"]["get"].update(operationId="create_order")),
            "paths./categories.get.operationId",
            "is also the name of POST /orders",
        ),
        (
            broken(lambda d: d["paths"]["/orders"]["post"]["requestBody"]["content"]["application/json"].pop("schema")),
            "paths./orders.post.requestBody.content.application/json.schema",
            "has no schema",
        ),
        (
            broken(lambda d: d["components"]["schemas"]["Line"].update(properties={"qty": {"type": "whole"}})),
            "paths./orders/{orderId}.get",
            "returns",
        ),
    ],
)
def test_malformed_documents_are_refused_naming_the_operation_and_field(document, field, message):
    with pytest.raises(ImportRejected) as refused:
        apis_import(domain="shop", openapi=upload(document))
    issues = refused.value.errors
    assert any(issue.field.startswith(field) and message in issue.message for issue in issues), issues
    assert all(issue.file == "shop.json" for issue in issues)
    assert not Api.objects.exists() and not Domain.objects.exists()  # all or nothing


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (b"openapi: 3.0.0\npaths: [unclosed\n", 3, "neither JSON nor valid YAML"),
        (b"openapi: 3.0.0\nbase: &b {a: 1}\npaths: *b\n", 3, "YAML aliases"),
        (b'{"openapi": "3.0.0", "paths": {', 1, "truncated"),
    ],
)
def test_unreadable_documents_are_refused_with_their_line(text, line, message):
    with pytest.raises(ImportRejected) as refused:
        apis_import(domain="shop", openapi=SimpleUploadedFile("shop.yaml", text))
    [issue] = refused.value.errors
    assert issue.line == line and message in issue.message


@pytest.mark.django_db
def test_the_command_imports_a_file_and_reports_refusals(tmp_path, capsys):
    path = tmp_path / "shop.json"
    path.write_text(json.dumps(DOCUMENT))
    call_command("import_apis", "--domain", "shop", "--openapi", str(path))
    assert "apis: 4 created, 0 already present" in capsys.readouterr().out
    path.write_text(json.dumps({"openapi": "3.0.0", "paths": {"/x": {"get": {"operationId": "--"}}}}))
    with pytest.raises(CommandError, match=r"paths\./x\.get\.operationId: '--' gives no usable API name"):
        call_command("import_apis", "--domain", "other", "--openapi", str(path))


@pytest.mark.django_db
def test_the_rest_import_is_for_curators(client_for):
    body = {"domain": "shop", "openapi": upload(DOCUMENT)}
    assert client_for("annotator").post("/api/v1/apis/import/", body).status_code == 403
    answer = client_for("curator").post("/api/v1/apis/import/", {"domain": "shop", "openapi": upload(DOCUMENT)})
    assert answer.status_code == 201, answer.content
    assert answer.json()["created"]["apis"] == 4
    refused = client_for("curator").post("/api/v1/apis/import/", {"domain": "x", "openapi": upload({"openapi": "2"})})
    assert refused.status_code == 400 and refused.json()["errors"][0]["field"] == "openapi"


@pytest.mark.django_db
def test_the_upload_page_imports_apis(client_for):
    page = client_for("curator").get("/seeds/upload/")
    assert b'id="api-import"' in page.content and b'value="mcp_command"' not in page.content  # commands: admins
    answer = client_for("curator").post(
        "/apis/import/", {"api_domain": "shop", "source": "openapi", "document": upload(DOCUMENT)}
    )
    assert answer.status_code == 200 and b"apis: 4 created" in answer.content
    refused = client_for("curator").post(
        "/apis/import/", {"api_domain": "x", "source": "openapi", "document": upload({"openapi": "3.0.0", "paths": {}})}
    )
    assert refused.status_code == 400 and b"describes no operations" in refused.content
