"""`nslab serve`: one lab, its UI in browser tabs. Who may drive (keys in URLs), what the page
fetches (nothing remote), and — in a real browser, Debian's chromium driven by selenium — two tabs
on the same lab, a key in the teacher's changing both."""

from __future__ import annotations

import re
import shutil
import time
from urllib.parse import urlsplit

import pytest
from lab_process import wait_for
from serve_support import Served, Tab, fetch

from lab.control import live
from lab.tui.serve import Access, is_loopback


def test_loopback_viewers_need_no_key_and_the_teacher_key_drives():
    access = Access(loopback=True, allow_control=False)
    assert access.role(access.control_key) == "control"
    assert access.role(None) == access.role("") == "view"
    assert access.role("guess") is None
    teacher, viewers = access.urls("http://127.0.0.1:8000")
    assert teacher == f"http://127.0.0.1:8000/?key={access.control_key}" and viewers == "http://127.0.0.1:8000/"
    assert Access(loopback=True, allow_control=True).role(None) == "control"


def test_off_loopback_every_url_carries_a_key():
    access = Access(loopback=False, allow_control=False)
    assert access.role(None) is None and access.role("") is None and access.role("guess") is None
    assert access.role(access.view_key) == "view" and access.role(access.control_key) == "control"
    assert access.urls("http://10.0.0.5:8000")[1] == f"http://10.0.0.5:8000/?key={access.view_key}"
    assert access.view_key != access.control_key
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5")


@pytest.fixture
def served():
    served = Served()
    yield served
    served.close()


def test_serve_prints_the_url_first_guards_its_pages_and_fetches_nothing_remote(served):
    assert urlsplit(served.teacher).hostname == "127.0.0.1" and "key=" in served.teacher
    status, page = fetch(served.teacher)
    assert status == 200
    assert f'/ws/{served.teacher.split("key=")[1]}"' in page
    remote = set(re.findall(r"""(?:src|href|url)\(?=?["']?(https?://[^"')\s]+)""", page))
    assert not remote, f"the page fetches from the internet: {remote}"
    assert fetch(served.viewers)[0] == 200, "loopback: viewers need no key"
    assert '/ws/view"' in fetch(served.viewers)[1]
    assert fetch(served.base + "/?key=guess")[0] == 403
    assert fetch(served.viewers, Host="attacker.example:8000")[0] == 403, "no DNS rebinding"
    for asset in ("js/textual.js", "css/xterm.css", "fonts/RobotoMono-VariableFont_wght.ttf"):
        assert fetch(f"{served.base}/static/{asset}")[0] == 200
    assert fetch(f"{served.base}/ws/guess")[0] == 403
    assert fetch(f"{served.base}/ws/view", Origin="http://attacker.example")[0] == 403
    assert served.status()["broker-a-0"] == "up"
    out = served.close()
    assert served.process.returncode == 0
    assert "lab: seed=4 mode=sim" in out and "lab: ran " in out, "the lab stopped gracefully"
    assert not live.running_labs()


# --- the real browser ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
NO_BROWSER = ("the browser test needs Debian's chromium and chromium-driver: "
              "`sudo apt-get install -y chromium chromium-driver` (.ci/run installs them)")

# Before the page's own scripts: every byte the terminal gets over its websocket, as text, so the
# test reads what the tab shows (xterm.js draws on a canvas; there is no text in the DOM).
CAPTURE = """
window.__screen = "";
const Native = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const socket = new Native(url, protocols);
  const decoder = new TextDecoder();
  socket.addEventListener("message", (event) => {
    if (typeof event.data !== "string") {
      window.__screen = (window.__screen + decoder.decode(event.data, {stream: true})).slice(-400000);
    }
  });
  return socket;
};
window.WebSocket.prototype = Native.prototype;
"""
ANSI = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")


@pytest.fixture
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(NO_BROWSER)
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                     "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def open_tab(driver, url: str, new: bool) -> str:
    if new:
        driver.switch_to.new_window("tab")
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CAPTURE})  # per tab
    driver.get(url)
    return driver.current_window_handle


def shown(driver, handle) -> str:
    driver.switch_to.window(handle)
    return ANSI.sub("", driver.execute_script("return window.__screen"))


def test_two_tabs_show_the_same_lab_and_the_teachers_key_changes_both(served, browser):
    from selenium.webdriver.common.action_chains import ActionChains

    teacher = open_tab(browser, served.teacher, new=False)
    viewer = open_tab(browser, served.viewers, new=True)
    lab = f"sim lab {served.lab_pid}"
    for handle in (teacher, viewer):
        wait_for(lambda: lab in shown(browser, handle) and "brokerLiveTable" in shown(browser, handle),
                 f"tab {handle} shows lab {served.lab_pid}", timeout=60, poll=0.25)
    assert "view only" in shown(browser, viewer) and "view only" not in shown(browser, teacher)
    assert live.send(["status"], str(served.lab_pid))["viewers"]["attached"] == 2

    def press(handle, *keys):
        browser.switch_to.window(handle)
        browser.find_element("css selector", ".xterm-helper-textarea").click()
        for key in keys:
            ActionChains(browser).send_keys(key).perform()
            time.sleep(0.5)

    press(viewer, "k", "\ue007")  # a viewer's k opens nothing: the broker stays up
    time.sleep(1.0)
    assert served.status()["broker-a-0"] == "up"
    before = {handle: len(shown(browser, handle)) for handle in (teacher, viewer)}
    press(teacher, "1", "k")
    wait_for(lambda: "broker-a-0" in shown(browser, teacher)[before[teacher]:] and "kill" in shown(browser, teacher),
             "the teacher's kill dialog", timeout=30, poll=0.25)
    press(teacher, "\ue007")  # enter: the first choice, broker-a-0
    wait_for(lambda: served.status()["broker-a-0"] == "killed", "the lab killed broker-a-0", timeout=30)
    for handle in (teacher, viewer):
        wait_for(lambda: "killed" in shown(browser, handle)[before[handle]:], f"tab {handle} shows the kill",
                 timeout=30, poll=0.25)


def attaches(served: Served) -> list[str]:
    return [command for command in served.processes().values() if " attach " in command]


def test_serve_caps_its_tabs_keeps_a_seat_for_the_teacher_and_says_why_it_refuses():
    """Anyone who reaches the loopback page can open tabs, each a process of ~45 MB: at
    --max-sessions the next is refused with a message, and viewers cannot take the last seat."""
    served = Served("--max-sessions", "2")
    tabs = []
    try:
        tabs.append(viewer := Tab(served.base))
        wait_for(lambda: len(attaches(served)) == 1, "the viewer's tab runs its nslab attach", timeout=30)
        status, text = fetch(served.viewers)
        assert status == 503 and "--max-sessions 2" in text and "Close a tab" in text
        tabs.append(refused := Tab(served.base))  # a page loaded before the seats filled
        assert b"Every seat of this lab is taken: 1 tab open (nslab serve --max-sessions 2" \
            in refused.read_until(b"then reload.")
        assert fetch(served.teacher)[0] == 200, "the teacher's seat is kept"
        tabs.append(Tab(served.base, key=served.teacher.split("key=")[1]))
        wait_for(lambda: len(attaches(served)) == 2, "the teacher's tab runs its nslab attach", timeout=30)
        assert fetch(served.teacher)[0] == 503, "every seat taken"
        viewer.close()
        wait_for(lambda: len(attaches(served)) == 1, "the closed tab's nslab attach ends", timeout=30)
        assert fetch(served.viewers)[0] == 200, "its seat is free again"
    finally:
        for tab in tabs:
            tab.close()
        served.close()
    assert served.process.returncode == 0 and not served.processes()
