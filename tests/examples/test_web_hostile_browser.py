"""Another site's page, in the user's real headless Chromium, cannot start or cancel jobs.

The service listens on 127.0.0.1, and so does the browser: any page the user opens can
make it send requests to the service. Each test serves such a page from another origin
(another port of 127.0.0.1, or ``evil.example``, which this browser resolves to
127.0.0.1), lets it attack as it would from the Internet, waits until the browser has
sent the request, and then asks the service, as its own client, which jobs it started:
none. The service's own page, which goes through the same guard, is tested in
test_web_browser.py (submit, follow, cancel).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.examples.conftest import FOREIGN_NAME, foreign_site, job_script, serve, until

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.browser

#: what every attack asks the service to run
ATTACK = {"command": ["touch", "attacked"]}

#: a form that posts itself as text/plain: its one field ``name=value`` is the JSON
#: ``{"command": [...], "pad": "="}``. Browsers send forms without a CORS preflight.
TEXT_PLAIN_FORM = """<!doctype html><title>another site</title>
<form method="post" action="{service}/jobs" enctype="text/plain">
<input name='{name}' value='"}}'></form>
<script>document.forms[0].submit();</script>"""

#: a cross-origin fetch: "no-cors" (the page cannot read the answer, but the browser
#: sends the request without asking, with a form's content type), or "cors" (the
#: browser asks the service first with a preflight, and sends nothing if refused)
CROSS_ORIGIN_FETCH = """<!doctype html><title>another site</title><script>
fetch("{service}/jobs", {{method: "POST", mode: "{mode}",
  headers: {{"Content-Type": "{content_type}"}}, body: {body}}})
  .then(() => {{ document.title = "sent"; }}, (err) => {{ document.title = "failed: " + err; }});
</script>"""


def _jobs(service: str) -> list[dict[str, str]]:
    """The jobs the service started, asked as its own client would."""
    import httpx  # the web extra: imported where a test runs, after the conftest's skip

    listed: list[dict[str, str]] = httpx.get(f"{service}/jobs").json()
    return listed


def test_a_cross_site_text_plain_form_starts_nothing(browser: WebDriver, tmp_path: Path) -> None:
    name = json.dumps(ATTACK)[:-1] + ', "pad": "'
    with serve(tmp_path) as server:
        page = TEXT_PLAIN_FORM.format(service=server.url, name=name)
        with foreign_site({"form.html": page}, tmp_path / "site") as port:
            browser.get(f"http://127.0.0.1:{port}/form.html")
            until(browser, lambda d: d.current_url == f"{server.url}/jobs", "the form's answer")
        assert "cross-origin request refused" in browser.page_source  # the service's answer
        assert _jobs(server.url) == []
        assert not (tmp_path / "attacked").exists()


@pytest.mark.parametrize(
    ("site", "mode", "content_type"),
    [
        ("127.0.0.1", "no-cors", "text/plain"),
        (FOREIGN_NAME, "no-cors", "application/x-www-form-urlencoded"),
        (FOREIGN_NAME, "no-cors", "multipart/form-data"),
        (FOREIGN_NAME, "no-cors", "application/json"),  # the browser sends text/plain
        (FOREIGN_NAME, "cors", "application/json"),  # the preflight has no CORS answer
    ],
)
def test_a_cross_site_fetch_starts_nothing(
    browser: WebDriver, tmp_path: Path, site: str, mode: str, content_type: str
) -> None:
    body = json.dumps(json.dumps(ATTACK))  # a JavaScript string of the JSON
    with serve(tmp_path) as server:
        page = CROSS_ORIGIN_FETCH.format(
            service=server.url, mode=mode, content_type=content_type, body=body
        )
        with foreign_site({"fetch.html": page}, tmp_path / "site") as port:
            browser.get(f"http://{site}:{port}/fetch.html")
            until(browser, lambda d: d.title != "another site", "the fetch's end")
        # "sent": the service answered (unreadable to the page); "failed": the browser
        # sent nothing, the preflight having no CORS answer
        assert browser.title.startswith("sent" if mode == "no-cors" else "failed")
        assert _jobs(server.url) == []


def test_a_dns_rebinding_page_can_neither_start_read_nor_cancel(
    browser: WebDriver, tmp_path: Path
) -> None:
    import httpx

    forever = job_script("import time", "time.sleep(600)")
    with serve(tmp_path) as server:
        started = httpx.post(f"{server.url}/jobs", json={"command": forever, "name": "mine"})
        assert started.status_code == 201, started.text
        job = started.json()["id"]
        # The attacker's name now resolves to the service's address: the page's requests
        # are same-origin to the browser, with the attacker's name as their Host.
        port = server.url.rsplit(":", 1)[1]
        browser.get(f"http://{FOREIGN_NAME}:{port}/")
        answers = browser.execute_async_script(
            """
            const [attack, job, done] = arguments;
            const json = {"Content-Type": "application/json"};
            Promise.all([
              fetch("/jobs", {method: "POST", headers: json, body: JSON.stringify(attack)}),
              fetch(`/jobs/${job}`, {method: "DELETE", headers: json}),
              fetch("/jobs"),
              fetch(`/jobs/${job}/events`),
            ]).then((answers) => done(answers.map((answer) => answer.status)),
                    (err) => done(String(err)));
            """,
            ATTACK,
            job,
        )
        assert answers == [400, 400, 400, 400]
        assert [(j["name"], j["state"]) for j in _jobs(server.url)] == [("mine", "RUNNING")]
