"""The example web service's page in a real headless Chromium, driven by selenium.

uvicorn serves ``examples.web.app:app``; Chromium loads its page, a job is submitted
through the page's form, and the test watches its replicas' lines appear while it runs
(the job waits for the test before printing the rest), then its end; with a proxy
that drops the connection (tests/examples/cutting_proxy.py) in between, the page's
``EventSource`` reconnects and resumes with no line twice or missing. The screenshot
taken while the job runs is saved under the test's ``tmp_path``; with
``ASYNCTORCHX_UPDATE_SCREENSHOT=1`` it also replaces ``docs/images/web-example.png``,
the one docs/embedding.md shows.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.examples.conftest import REPO, cutting_proxy, job_script, serve, until

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

pytestmark = pytest.mark.browser

SCREENSHOT = REPO / "docs" / "images" / "web-example.png"


def _submit(driver: WebDriver, body: dict[str, Any] | None) -> None:
    """Type ``body`` as the form's job (``None``: keep the page's example) and submit it."""
    from selenium.webdriver.common.by import By

    if body is not None:
        box = driver.find_element(By.ID, "body")
        box.clear()
        box.send_keys(json.dumps(body))
    driver.find_element(By.CSS_SELECTOR, "#submit button").click()


def _card(driver: WebDriver, name: str) -> WebElement:
    """The card of the job named ``name`` (waits for it to appear)."""
    from selenium.webdriver.common.by import By

    def card(d: WebDriver) -> WebElement | None:
        for article in d.find_elements(By.CSS_SELECTOR, "article.job"):
            if article.find_element(By.TAG_NAME, "h2").text == name:
                return article
        return None

    found: WebElement = until(driver, card, f"the card of job {name}")
    return found


def _state(card: WebElement) -> str:
    from selenium.webdriver.common.by import By

    return card.find_element(By.CSS_SELECTOR, "header .state").text


def _job_id(card: WebElement) -> str:
    return card.get_attribute("data-job") or ""


def _outputs(card: WebElement) -> dict[str, str]:
    """Each replica's output on the card: ``{"role/k": text}``."""
    from selenium.webdriver.common.by import By

    return {
        block.get_attribute("data-replica") or "": block.find_element(By.TAG_NAME, "pre").text
        for block in card.find_elements(By.CSS_SELECTOR, ".replica")
    }


def test_the_page_shows_each_replicas_lines_live_then_the_jobs_end(
    browser: WebDriver, tmp_path: Path
) -> None:
    ticker = [
        "python3" if shutil.which("python3") else sys.executable,  # short, for the screenshot
        "-u",
        "-c",
        "import os, time\n"
        "for i in range(3): print(f'step {i} of 5')\n"
        "while not os.path.exists('go'): time.sleep(0.05)\n"  # the server's directory
        "for i in range(3, 5): print(f'step {i} of 5')\n"
        "print('done')",
    ]
    with serve(tmp_path) as server:
        browser.get(server.url)
        _submit(browser, None)  # the page's example: utils.echo
        echo = _card(browser, "utils.echo")
        until(browser, lambda _: _state(echo) == "SUCCEEDED", "the echo job's end")
        assert _outputs(echo) == {"echo/0": "hello from the browser"}

        _submit(browser, {"command": ticker, "replicas": 2, "name": "ticker"})
        card = _card(browser, "ticker")
        expected_so_far = "step 0 of 5\nstep 1 of 5\nstep 2 of 5"
        until(
            browser,
            lambda _: _outputs(card) == {"ticker/0": expected_so_far, "ticker/1": expected_so_far},
            "the first lines of both replicas",
        )
        assert _state(card) == "RUNNING"  # the lines came while the job runs
        browser.save_screenshot(str(tmp_path / "web-example.png"))
        if os.environ.get("ASYNCTORCHX_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(tmp_path / "web-example.png", SCREENSHOT)

        (tmp_path / "go").touch()
        until(browser, lambda _: _state(card) == "SUCCEEDED", "the ticker job's end")
        expected = "\n".join([*(f"step {i} of 5" for i in range(5)), "done"])
        assert _outputs(card) == {"ticker/0": expected, "ticker/1": expected}


def test_the_page_cancels_a_job_and_shows_what_is_wrong_with_a_bad_one(
    browser: WebDriver, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    forever = job_script("import time", "print('waiting', flush=True)", "time.sleep(600)")
    with serve(tmp_path) as server:
        browser.get(server.url)
        _submit(browser, {"component": "utils.nope"})
        error = browser.find_element(By.ID, "error")
        until(browser, lambda _: error.text != "", "the error message")
        assert error.text.startswith("no component 'utils.nope'")

        _submit(browser, {"command": forever, "name": "forever"})
        card = _card(browser, "forever")
        until(browser, lambda _: _outputs(card) == {"forever/0": "waiting"}, "its first line")
        card.find_element(By.CSS_SELECTOR, "button.cancel").click()
        until(browser, lambda _: _state(card) == "CANCELLED", "the job's cancellation")
        assert error.text == ""  # cleared by the successful submission


def test_the_page_resumes_a_dropped_stream_without_repeating_or_missing_lines(
    browser: WebDriver, tmp_path: Path
) -> None:
    job = job_script(
        "import os, time",
        "for i in range(3): print(f'step {i}')",
        "while not os.path.exists('go'): time.sleep(0.05)",
        "for i in range(3, 6): print(f'step {i}')",
    )
    with serve(tmp_path) as server, cutting_proxy(server) as proxy:
        browser.get(proxy.url)
        _submit(browser, {"command": job, "name": "resumed"})
        card = _card(browser, "resumed")
        first = "step 0\nstep 1\nstep 2"
        until(browser, lambda _: _outputs(card) == {"resumed/0": first}, "the first lines")

        proxy.cut()  # the page's EventSource loses its connection while the job runs
        (tmp_path / "go").touch()
        until(browser, lambda _: _state(card) == "SUCCEEDED", "the job's end")
        assert _outputs(card) == {"resumed/0": "\n".join(f"step {i}" for i in range(6))}

    requests = server.log.read_text().count(f"GET /jobs/{_job_id(card)}/events ")
    assert requests == 2  # the first stream, and the one resumed with Last-Event-ID
