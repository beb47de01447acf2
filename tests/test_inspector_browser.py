"""`memcompile inspect` in a real browser: headless Chromium (Debian's chromium and chromium-driver, which .ci/run
installs) driven by Selenium opens the served page, runs a demo question, forgets a turn through the confirmation,
and signs in with a token bound to one user. A screenshot of each view goes to $MEMCOMPILE_ARTIFACTS (else the
test's temporary folder); MEMCOMPILE_DOCS_SCREENSHOTS=1 also writes them, reduced, to docs/images/."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.inspected import DEMO, GOLD, OTHER, QUESTION, filled
from support.paths import ROOT

from memcompile_langgraph.cli.demo_data import demo_turns

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("MEMCOMPILE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MEMCOMPILE_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
CLI = [sys.executable, "-m", "memcompile_langgraph"]
TOKEN = "demo-token-0123456789abcdef"


@pytest.fixture
def browser(tmp_path, monkeypatch):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.selenium_manager import SeleniumManager

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).is_file()]
    if missing:
        why = f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}: .ci/run installs them")
        pytest.skip(why)

    def no_download(*args, **kwargs):
        raise AssertionError("Selenium Manager was asked for a driver: it would download one")

    monkeypatch.setattr(SeleniumManager, "binary_paths", no_download)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1100,760"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path, backend):
    """shoot(driver, name): a screenshot in the artefacts folder, one folder per records store."""
    folder = Path(os.environ.get("MEMCOMPILE_ARTIFACTS") or tmp_path / "screenshots") / backend.name
    folder.mkdir(parents=True, exist_ok=True)
    wanted = os.environ.get("MEMCOMPILE_DOCS_SCREENSHOTS") == "1" and backend.name == "sqlite"  # the pages are alike
    docs = ROOT / "docs" / "images" if wanted else None

    def shoot(driver, name: str) -> Path:
        path = folder / f"inspector-{name}.png"
        assert driver.save_screenshot(str(path))
        if docs is not None:  # a few tens of KB: the pages are text on flat colours
            from PIL import Image

            Image.open(path).convert("RGB").quantize(colors=32).save(docs / path.name, optimize=True)
        return path

    return shoot


@pytest.fixture
def store(backend, tmp_path, embeddings):
    """The demo conversation and another user's private turn, with SQLite records and then PostgreSQL ones."""
    where = backend.where(tmp_path / "store")
    filled(where, embeddings).close()
    return where


@contextlib.contextmanager
def inspector(tmp_path, store, *extra: str):
    """`memcompile inspect --port 0` over the store (its --store and --records-url): the URL it prints once bound."""
    log = tmp_path / "inspect.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*CLI, "inspect", *store.cli, "--port", "0", *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not (found := re.search(r"inspector at (http://\S+/)", log.read_text(errors="replace"))):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        yield found.group(1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def wait_for(driver, css: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 60).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))


def test_query_shows_the_gold_turn_selected_and_forget_removes_a_turn(browser, shots, store, tmp_path):
    from selenium.webdriver.common.by import By

    with inspector(tmp_path, store) as url:
        browser.get(url)
        users = wait_for(browser, "#users")
        assert [a.text for a in users.find_elements(By.CSS_SELECTOR, "a.user")] == [OTHER, DEMO]
        shots(browser, "users")
        browser.find_element(By.LINK_TEXT, DEMO).click()
        wait_for(browser, "#query-form")
        dias = [t.get_attribute("data-dia") for t in browser.find_elements(By.CSS_SELECTOR, "div.turn")]
        assert len(dias) == len(demo_turns()) and GOLD in dias and "D1:2" in dias
        shots(browser, "timeline")

        box = browser.find_element(By.CSS_SELECTOR, "#query-form input[name=q]")
        box.send_keys(QUESTION)
        browser.find_element(By.ID, "run").click()
        gold = wait_for(browser, f'#packets tr[data-dia="{GOLD}"]')
        heads = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#packets th")]
        cells = dict(zip(heads, (td.text for td in gold.find_elements(By.TAG_NAME, "td"))))
        assert "selected" in gold.get_attribute("class") and cells["#"] == "1"
        for channel in ("BM25", "dense", "fused"):
            assert float(cells[channel]) > 0, (channel, cells)
        assert re.fullmatch(r"\d+\.\d{3} c\d+", cells["Cell routing"])
        selected = browser.find_elements(By.CSS_SELECTOR, "#packets tr.selected")
        assert (
            len(selected) == 12 and len(browser.find_elements(By.CSS_SELECTOR, "#packets tr")) == len(demo_turns()) + 1
        )
        assert browser.find_element(By.ID, "context").text.startswith(f"[{GOLD}] Priya")
        shots(browser, "query")
        left_out = browser.find_element(By.CSS_SELECTOR, '#packets tr[data-why="frontier"]')
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", left_out)
        assert "frontier rank" in left_out.find_elements(By.TAG_NAME, "td")[-1].text
        shots(browser, "query-left-out")

        browser.get(f"{url}timeline?user={DEMO}")
        wait_for(browser, 'div.turn[data-dia="D1:2"] a.forget').click()
        wait_for(browser, "#forget-form")
        shots(browser, "forget")
        browser.find_element(By.ID, "forget").click()  # unticked: the form does not go
        assert browser.find_elements(By.ID, "forget-form")
        browser.find_element(By.ID, "confirm").click()
        browser.find_element(By.ID, "forget").click()
        wait_for(browser, "p.note")
        assert "Removed 1 turn(s) (D1:2)." in browser.find_element(By.CSS_SELECTOR, "p.note").text
        dias = [t.get_attribute("data-dia") for t in browser.find_elements(By.CSS_SELECTOR, "div.turn")]
        assert "D1:2" not in dias and len(dias) == len(demo_turns()) - 1
        browser.refresh()
        assert "D1:2" not in [t.get_attribute("data-dia") for t in browser.find_elements(By.CSS_SELECTOR, "div.turn")]


def test_a_token_bound_to_one_user_never_shows_another(browser, shots, store, tmp_path):
    from selenium.webdriver.common.by import By

    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} {DEMO}\n")
    tokens.chmod(0o600)  # a tokens file others may read is refused, as by ssh
    with inspector(tmp_path, store, "--tokens", str(tokens)) as url:
        browser.get(url)
        wait_for(browser, "#token")
        assert browser.current_url == f"{url}login"
        shots(browser, "login")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.ID, "login").click()
        users = wait_for(browser, "#users")
        assert [a.text for a in users.find_elements(By.CSS_SELECTOR, "a.user")] == [DEMO]
        seen = [browser.page_source]
        for path in (f"timeline?user={OTHER}", f"query?user={OTHER}&q=Where+is+the+spare+key", f"forget?user={OTHER}"):
            browser.get(url + path)
            wait_for(browser, "h1")
            assert browser.find_element(By.TAG_NAME, "h1").text == "Not yours"
            seen.append(browser.page_source)
        browser.get(f"{url}query?user={DEMO}&q=Where+is+the+spare+key")
        wait_for(browser, "#packets")
        seen.append(browser.page_source)
        assert not any("flowerpot" in page for page in seen)
        browser.find_element(By.ID, "logout").click()
        wait_for(browser, "#token")
        browser.get(f"{url}timeline?user={DEMO}")  # the cookie is gone: back to signing in
        wait_for(browser, "#token")
        assert browser.current_url == f"{url}login"


def test_the_served_page_bounds_request_heads_and_bodies(store, tmp_path):
    """Before any route reads them: a head past 16 KiB ends with 431 (or h11's 400, when it arrives in pieces and is
    refused before it is whole), a body past 64 KiB with 413."""
    import httpx

    with inspector(tmp_path, store) as url:
        assert httpx.get(url).status_code == 200
        assert httpx.get(url, headers={"X-Pad": "x" * 20_000}).status_code == 431
        try:
            status = httpx.get(url, headers={"X-Pad": "x" * 4_000_000}).status_code
        except httpx.TransportError:  # refused and closed while the client was still sending
            status = None
        assert status in (400, 431, None)
        assert httpx.post(f"{url}forget", content=b"x" * 1_000_000).status_code == 413
        assert httpx.get(url).status_code == 200  # and it goes on serving
