"""End to end as a host connects: the official Python SDK client's OAuth
support (``mcp`` 2.3.0) against example/oauth_app.py under gunicorn (two
workers). The client is refused with 401, discovers this app as its
authorization server, identifies itself by a Client ID Metadata Document
this test serves over HTTPS on loopback, and opens the authorization URL in
real headless Chromium (Selenium), where the test signs in on the example's
login form and allows the connection on the consent page. Then it lists and
calls tools, refreshes its token (rotated), and after the member disconnects
it on the "connected apps" page, its token and refresh token are refused.

Both pages are checked as the member sees them (screenshots under the test's
tmp_path): the client's name and logo (served by the app, not the client's
origin), the account, the scope descriptions, the resource, the redirect
host, and the consent page on a phone-sized viewport."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from conftest import GunicornServer
from oauth_fixtures import ClientSite, png

pytestmark = pytest.mark.e2e

ACCESS_TTL = 6  # seconds: short, so the client must refresh during the test
LOGO_SIZE = 40  # the client's logo (the placeholder is 64 pixels wide: a loaded logo is told apart by its width)
SCOPE_TEXT = "See your account and reserve books for you"  # example/oauth_app.py's description of books:read


def _need(thing: str, found: Any) -> None:
    if not found:
        if os.environ.get("CI"):
            pytest.fail(f"{thing} is missing (CI installs it: .ci/run)")
        pytest.skip(f"{thing} is not installed")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[ClientSite]:
    site = ClientSite(tmp_path).start()
    site.files["/logo.png"] = (png(LOGO_SIZE), "image/png")
    yield site
    site.stop()


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    selenium = pytest.importorskip("selenium.webdriver")
    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    _need("Debian's chromium", binary)
    chromedriver = shutil.which("chromedriver")
    _need("Debian's chromium-driver", chromedriver)
    options = selenium.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--ignore-certificate-errors",  # the client's callback page uses the test's own certificate
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    browser = selenium.Chrome(options=options, service=selenium.ChromeService(executable_path=chromedriver))
    browser.set_page_load_timeout(30)
    yield browser
    browser.quit()


def _store_env(tmp_path: Path) -> dict[str, str]:
    return {"FLASK_MCP_OAUTH_STORE": f"sqlite:///{tmp_path / 'oauth.sqlite3'}"}


@pytest.fixture(params=["sqlite", "redis"])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield _store_env(tmp_path)
        return
    redis = pytest.importorskip("redis")
    url = "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url).ping()
    except redis.RedisError:
        _need("Redis on 127.0.0.1:6379", False)
    prefix = f"flask-mcp-test-oauth-{os.getpid()}-{time.monotonic_ns()}:"
    yield {"FLASK_MCP_OAUTH_STORE": url, "FLASK_MCP_OAUTH_STORE_PREFIX": prefix}
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)


@pytest.fixture
def members_server(gunicorn_server: Callable[..., GunicornServer], site: ClientSite, tmp_path: Path,
                   store_env: dict[str, str]) -> GunicornServer:
    return gunicorn_server("example.oauth_app:app", workers=2, env={
        "FLASK_MCP_BACKEND": f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
        "FLASK_MCP_OAUTH_CIMD_ALLOW_LOOPBACK": "true",
        "FLASK_MCP_OAUTH_CIMD_CA_BUNDLE": str(site.cert_file),
        "FLASK_MCP_OAUTH_ACCESS_TOKEN_TTL": str(ACCESS_TTL),
        "FLASK_MEMBERS": "alice:wonderland",
        **store_env,
    })


class Host:
    """What a host keeps: tokens and client information (in memory), and what it saw."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None
        self.issued: list[str] = []

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens
        self.issued.append(tokens.access_token)

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def shown_logo(driver: Any, base: str) -> None:
    """The page's logo loaded, is the client's (not the placeholder), and came from the app."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    logo = driver.find_element(By.CSS_SELECTOR, "img.logo")
    assert logo.get_attribute("src").startswith(base + "/oauth/logo?client_id=")
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return arguments[0].complete", logo))
    assert driver.execute_script("return arguments[0].naturalWidth", logo) == LOGO_SIZE


def sign_in_and_allow(driver: Any, url: str, redirect_uri: str, base: str, artifacts: Path) -> dict[str, str]:
    """What the member does in the browser: sign in, read the consent page (on a desktop and a
    phone-sized window), allow."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, 30)
    driver.get(url)
    wait.until(expected_conditions.presence_of_element_located((By.ID, "username")))
    assert urlsplit(driver.current_url).path == "/login"
    driver.find_element(By.ID, "username").send_keys("alice")
    driver.find_element(By.ID, "password").send_keys("wonderland")
    driver.find_element(By.ID, "sign-in").click()
    wait.until(expected_conditions.presence_of_element_located((By.ID, "allow")))
    text = {name: driver.find_element(By.ID, name).text
            for name in ("client-name", "account", "scopes", "resource", "redirect-host")}
    assert text == {"client-name": "SDK Test Host", "account": "alice", "scopes": f"✓\n{SCOPE_TEXT}books:read",
                    "resource": base + "/mcp", "redirect-host": urlsplit(redirect_uri).netloc}, text
    shown_logo(driver, base)
    driver.set_window_size(900, 1000)
    driver.save_screenshot(str(artifacts / "consent.png"))
    driver.set_window_size(390, 844)  # a phone: nothing wider than the screen, the buttons on it
    try:
        width = driver.execute_script("return window.innerWidth")
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width
        allow = driver.find_element(By.ID, "allow")
        assert allow.location["x"] >= 0 and allow.location["x"] + allow.size["width"] <= width
        driver.save_screenshot(str(artifacts / "consent-phone.png"))
    finally:
        driver.set_window_size(900, 1000)
    driver.find_element(By.ID, "allow").click()
    wait.until(lambda d: d.current_url.startswith(redirect_uri))
    return {k: v[0] for k, v in parse_qs(urlsplit(driver.current_url).query).items()}


def disconnect(driver: Any, base: str, artifacts: Path) -> None:
    """The member's connected apps: the host, what it may do, its last use; then Disconnect."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base + "/oauth/connections")
    assert driver.find_element(By.CSS_SELECTOR, ".app-name").text == "SDK Test Host"
    assert driver.find_element(By.ID, "account").text == "alice"
    assert SCOPE_TEXT in driver.find_element(By.CSS_SELECTOR, "li.app .scopes").text
    assert driver.find_element(By.CSS_SELECTOR, ".last-used").text.startswith("Last used ")
    shown_logo(driver, base)
    driver.save_screenshot(str(artifacts / "connections.png"))
    driver.find_element(By.CSS_SELECTOR, "button.revoke").click()
    WebDriverWait(driver, 30).until(lambda d: "No app is connected" in d.page_source)


def test_a_host_connects_with_the_members_sign_in_then_is_disconnected(
        members_server: GunicornServer, site: ClientSite, driver: Any, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from pydantic import AnyUrl

    client_id = site.add_client("sdk-host", client_name="SDK Test Host", logo_uri=site.base + "/logo.png",
                                client_uri=site.base + "/about")
    base = members_server.url.removesuffix("/mcp")
    host = Host()
    browser_visits: list[dict[str, str]] = []
    asked_again: list[str] = []
    lock = threading.Lock()

    async def redirect_handler(url: str) -> None:
        assert url.startswith(base + "/oauth/authorize?")
        if browser_visits:  # after the disconnection: the member does not connect again
            asked_again.append(url)
            raise RuntimeError("the member declined to connect again")
        with lock:
            browser_visits.append(await asyncio.to_thread(sign_in_and_allow, driver, url, site.redirect_uri, base,
                                                          tmp_path))

    async def callback_handler() -> AuthorizationCodeResult:
        answer = browser_visits[-1]
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"))

    provider = OAuthClientProvider(
        server_url=members_server.url,
        client_metadata=OAuthClientMetadata(redirect_uris=[AnyUrl(site.redirect_uri)], client_name="SDK Test Host",
                                            grant_types=["authorization_code", "refresh_token"],
                                            token_endpoint_auth_method="none"),
        storage=host,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=client_id,
    )

    async def session(action: Callable[[Any], Any]) -> Any:
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            async with Client(streamable_http_client(members_server.url, http_client=http)) as client:
                return await action(client)

    async def list_and_call(client: Any) -> tuple[list[str], str]:
        tools = await client.list_tools()
        result = await client.call_tool("whoami", {})
        return sorted(tool.name for tool in tools.tools), result.content[0].text

    names, who = asyncio.run(session(list_and_call))
    assert names == ["reserve", "whoami"]
    assert who == "alice"
    assert len(browser_visits) == 1 and site.fetches >= 1
    assert host.client_info.client_id == client_id
    first_refresh = host.tokens.refresh_token

    time.sleep(ACCESS_TTL + 1)  # the access token expires: the SDK refreshes it before its next request

    async def reserve(client: Any) -> str:
        result = await client.call_tool("reserve", {"isbn": "978-0141439518"})
        return str(result.content[0].text)

    assert asyncio.run(session(reserve)) == "Reserved 978-0141439518 for alice."
    assert len(host.issued) == 2 and len(browser_visits) == 1  # refreshed, not re-authorized
    assert host.tokens.refresh_token != first_refresh  # rotated

    disconnect(driver, base, tmp_path)
    for shot in ("consent.png", "consent-phone.png", "connections.png"):
        assert (tmp_path / shot).read_bytes().startswith(b"\x89PNG")
    assert site.file_fetches[:1] == ["/logo.png"]  # the app fetched the logo; browsers only asked the app
    answer = httpx2.post(members_server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Authorization": f"Bearer {host.tokens.access_token}",
                                  "Accept": "application/json, text/event-stream"})
    assert answer.status_code == 401
    assert "revoked" in answer.json()["error"]["message"]
    refresh = httpx2.post(base + "/oauth/token", data={"grant_type": "refresh_token", "client_id": client_id,
                                                       "refresh_token": host.tokens.refresh_token})
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
    with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the refusal in its own exception groups
        asyncio.run(session(list_and_call))
    assert len(asked_again) == 1  # the server refused the revoked token and refresh token: back to the member
