"""JSON-RPC and both MCP eras on one endpoint, rule by rule."""

from __future__ import annotations

import base64

import pytest

from .conftest import Endpoint, modern_headers


def _initialize(endpoint: Endpoint, version: str = "2025-11-25") -> str:
    status, headers, body = endpoint.rpc(
        "initialize",
        {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        modern=False,
    )
    assert status == 200
    assert body["result"]["protocolVersion"] == version
    return headers["mcp-session-id"]


def test_initialize_negotiates_each_2025_version_and_issues_a_session(endpoint: Endpoint) -> None:
    for version in ("2025-03-26", "2025-06-18", "2025-11-25"):
        assert _initialize(endpoint, version)
    assert len(endpoint.sessions) == 3


def test_initialize_with_an_unknown_version_gets_our_newest_handshake_version(endpoint: Endpoint) -> None:
    _, _, body = endpoint.rpc("initialize", {"protocolVersion": "1999-01-01", "capabilities": {}}, modern=False)
    assert body["result"]["protocolVersion"] == "2025-11-25"
    assert body["result"]["capabilities"] == {
        "tools": {"listChanged": False},
        "resources": {"subscribe": False, "listChanged": False},  # read; this era's updates are not offered
        "prompts": {"listChanged": False},
    }


def test_legacy_requests_need_a_live_session(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/list", modern=False)
    assert status == 400 and "Mcp-Session-Id" in body["error"]["message"]
    status, _, _ = endpoint.rpc("tools/list", modern=False, Mcp_Session_Id="unknown")
    assert status == 404
    session = _initialize(endpoint)
    status, _, body = endpoint.rpc(
        "tools/list", modern=False, Mcp_Session_Id=session, MCP_Protocol_Version="2025-11-25"
    )
    assert status == 200 and body["result"]["tools"][0]["name"] == "echo"
    assert "resultType" not in body["result"]


def test_legacy_request_with_unsupported_version_header_is_400(endpoint: Endpoint) -> None:
    session = _initialize(endpoint)
    status, _, _ = endpoint.rpc("tools/list", modern=False, Mcp_Session_Id=session, MCP_Protocol_Version="2030-01-01")
    assert status == 400


def test_delete_ends_a_session(endpoint: Endpoint) -> None:
    import http.client

    session = _initialize(endpoint)
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=5)
    conn.request("DELETE", "/mcp", headers=endpoint.headers(Mcp_Session_Id=session))
    assert conn.getresponse().status == 204
    conn.close()
    status, _, _ = endpoint.rpc("tools/list", modern=False, Mcp_Session_Id=session)
    assert status == 404


def test_discover_lists_both_eras_and_marks_results_complete(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("server/discover")
    result = body["result"]
    assert status == 200
    assert result["supportedVersions"][0] == "2026-07-28"
    assert {"2025-03-26", "2025-06-18", "2025-11-25"} <= set(result["supportedVersions"])
    assert result["resultType"] == "complete" and result["cacheScope"] == "private"
    assert result["capabilities"]["tools"] == {"listChanged": False}


def test_modern_requests_need_no_session(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/call", {"name": "echo", "arguments": {"a": [1, 2]}})
    assert status == 200
    assert body["result"]["structuredContent"] == {"echo": {"a": [1, 2]}}
    assert body["result"]["isError"] is False and body["result"]["resultType"] == "complete"


def test_unsupported_modern_version_is_32022_with_the_supported_list(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc(
        "tools/list",
        {"_meta": {"io.modelcontextprotocol/protocolVersion": "2031-01-01"}},
        MCP_Protocol_Version="2031-01-01",
    )
    assert status == 400
    assert body["error"]["code"] == -32022
    assert "2026-07-28" in body["error"]["data"]["supported"]


def test_headers_that_disagree_with_the_body_are_32020(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/list", MCP_Protocol_Version="2025-11-25")
    assert status == 400 and body["error"]["code"] == -32020
    status, _, body = endpoint.rpc("tools/list", Mcp_Method="tools/call")
    assert status == 400 and body["error"]["code"] == -32020


def test_notifications_and_client_responses_get_202_and_no_body(endpoint: Endpoint) -> None:
    status, _, body = endpoint.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert status == 202 and body == ""
    status, _, _ = endpoint.post({"jsonrpc": "2.0", "id": 7, "result": {}})
    assert status == 202


def test_unknown_method_is_32601(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("no/such")
    assert status == 404 and body["error"]["code"] == -32601
    session = _initialize(endpoint)
    status, _, body = endpoint.rpc("no/such", modern=False, Mcp_Session_Id=session)
    assert status == 200 and body["error"]["code"] == -32601


def test_unparsable_body_is_32700(endpoint: Endpoint) -> None:
    for body in (b"{not json", b"\xff\xfe", b""):
        status, _, reply = endpoint.post(None, body=body)
        assert status == 400 and reply["error"]["code"] == -32700, body


def test_malformed_messages_are_32600_or_32602(endpoint: Endpoint) -> None:
    cases = [
        ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], -32600),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, -32600),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, -32600),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, -32602),
        ("just a string", -32600),
    ]
    for message, code in cases:
        status, _, body = endpoint.post(message)
        assert status == 400 and body["error"]["code"] == code, message


def test_tools_call_rejects_bad_params_and_unknown_tools(endpoint: Endpoint) -> None:
    for params, code in (
        ({"name": 3}, -32020),  # Mcp-Name can only mirror a string: header and body disagree
        ({"name": "echo", "arguments": [1]}, -32602),
        ({"name": "nope"}, -32602),
    ):
        _, _, body = endpoint.rpc("tools/call", params)
        assert body["error"]["code"] == code, params


def test_a_tool_error_is_an_is_error_result_not_a_protocol_error(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/call", {"name": "fail"})
    assert status == 200
    assert body["result"]["isError"] is True
    assert "it broke" in body["result"]["content"][0]["text"]


def test_a_host_that_raises_gets_500_and_the_endpoint_keeps_serving(endpoint: Endpoint) -> None:
    status, _, body = endpoint.rpc("tools/call", {"name": "crash"})
    assert status == 500 and body["error"]["code"] == -32603
    assert "host bug" not in str(body)  # no internals leak to the client
    status, _, _ = endpoint.rpc("tools/list")
    assert status == 200


def _modern(endpoint: Endpoint, method: str, params: dict, **headers: str | None) -> tuple[int, dict]:
    """A 2026-07-28 request with exactly these headers (None drops one the client would send)."""
    sent = {**modern_headers(method, params), **headers}
    status, _, body = endpoint.post(
        {"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
        endpoint.headers(**{k: v for k, v in sent.items() if v is not None}),
    )
    return status, body


FULL_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
@pytest.mark.parametrize(
    "meta",
    [
        None,
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
    ],
    ids=["no _meta", "no protocolVersion", "no clientCapabilities"],
)
def test_a_modern_request_without_its_envelope_is_400_32602(endpoint: Endpoint, method: str, meta: dict | None) -> None:
    params: dict = {"name": "echo"} if method == "tools/call" else {}
    if meta is not None:
        params["_meta"] = meta
    status, body = _modern(endpoint, method, params)
    assert (status, body["error"]["code"], body["id"]) == (400, -32602, 7)
    assert endpoint.tools.calls == []


@pytest.mark.parametrize("method", ["initialize", "ping"])
def test_methods_removed_in_2026_07_28_are_404_32601(endpoint: Endpoint, method: str) -> None:
    status, body = _modern(endpoint, method, {"_meta": FULL_META})
    assert (status, body["error"]["code"]) == (404, -32601) and "removed" in body["error"]["message"]


@pytest.mark.parametrize(
    ("headers", "rule"),
    [
        ({"Mcp_Method": None}, "Mcp-Method"),
        ({"Mcp_Method": "tools/list"}, "Mcp-Method"),
        ({"Mcp_Name": None}, "Mcp-Name"),
        ({"Mcp_Name": "fail"}, "Mcp-Name"),
        ({"MCP_Protocol_Version": None}, "MCP-Protocol-Version"),
    ],
)
def test_routing_headers_missing_or_unlike_the_body_are_400_32020(endpoint: Endpoint, headers: dict, rule: str) -> None:
    status, body = _modern(endpoint, "tools/call", {"name": "echo", "_meta": FULL_META}, **headers)
    assert (status, body["error"]["code"]) == (400, -32020) and rule in body["error"]["message"]
    assert endpoint.tools.calls == []


def test_a_non_ascii_tool_name_travels_base64_encoded_in_mcp_name(endpoint: Endpoint) -> None:
    encoded = "=?base64?" + base64.b64encode("écho".encode()).decode() + "?="
    status, body = _modern(endpoint, "tools/call", {"name": "écho", "_meta": FULL_META}, Mcp_Name=encoded)
    assert body["error"]["code"] == -32602 and "écho" in body["error"]["message"]  # past the headers: unknown tool


def test_an_unsupported_meta_version_under_the_2026_header_is_a_mismatch_first(endpoint: Endpoint) -> None:
    meta = {**FULL_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    status, body = _modern(endpoint, "tools/list", {"_meta": meta})
    assert (status, body["error"]["code"]) == (400, -32020)
