"""Who gets in: token, Host and Origin are checked before anything else."""

from __future__ import annotations

import http.client

from .conftest import Endpoint


def test_request_without_token_gets_401_with_a_bearer_challenge(endpoint: Endpoint) -> None:
    headers = endpoint.headers()
    del headers["Authorization"]
    status, response_headers, _ = endpoint.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers)
    assert status == 401
    assert response_headers["www-authenticate"].startswith("Bearer ")
    assert "resource_metadata" not in response_headers["www-authenticate"]
    assert endpoint.tools.calls == []


def test_wrong_token_gets_401_and_reaches_no_tool(endpoint: Endpoint) -> None:
    headers = endpoint.headers(Authorization="Bearer not-the-token")
    status, _, _ = endpoint.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}, headers
    )
    assert status == 401
    assert endpoint.tools.calls == []


def test_token_prefix_or_other_scheme_is_not_accepted(endpoint: Endpoint) -> None:
    token = endpoint.token.reveal()
    for value in (f"Bearer {token[:-1]}", f"Basic {token}", token, f"Bearer {token}x"):
        status, _, _ = endpoint.post(
            {"jsonrpc": "2.0", "id": 1, "method": "ping"}, endpoint.headers(Authorization=value)
        )
        assert status == 401, value


def test_foreign_host_header_is_refused_before_authentication(endpoint: Endpoint) -> None:
    for host in ("evil.example:80", f"evil.example:{endpoint.port}", "127.0.0.1:1", f"192.168.0.2:{endpoint.port}"):
        status, _, body = endpoint.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, endpoint.headers(Host=host))
        assert status == 403, host
        assert "Host" in body


def test_loopback_host_spellings_are_accepted(endpoint: Endpoint) -> None:
    for host in (f"127.0.0.1:{endpoint.port}", f"localhost:{endpoint.port}", f"[::1]:{endpoint.port}"):
        status, _, _ = endpoint.rpc("tools/list", Host=host)
        assert status == 200, host


def test_foreign_origin_is_refused(endpoint: Endpoint) -> None:
    for origin in ("http://evil.example", "https://attacker.test:8443", "null", "file://"):
        status, _, body = endpoint.rpc("tools/list", Origin=origin)
        assert status == 403, origin
        assert "Origin" in body


def test_loopback_origin_is_accepted(endpoint: Endpoint) -> None:
    status, _, _ = endpoint.rpc("tools/list", Origin="http://localhost:5173")
    assert status == 200


def test_get_is_405_and_other_paths_are_404(endpoint: Endpoint) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=5)
    conn.request("GET", "/mcp", headers=endpoint.headers())
    response = conn.getresponse()
    response.read()
    assert response.status == 405
    assert "POST" in response.getheader("Allow", "")
    conn.request("POST", "/other", body=b"{}", headers=endpoint.headers())
    response = conn.getresponse()
    response.read()
    assert response.status == 404
    conn.close()


def test_non_json_content_type_is_415(endpoint: Endpoint) -> None:
    status, _, _ = endpoint.post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"}, endpoint.headers(Content_Type="text/plain")
    )
    assert status == 415
