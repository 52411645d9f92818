"""Debian's headless Chromium, driven through its ChromeDriver by Selenium, for the tests that open a page as a
person does (the explorer's, the docs site's). `make browser` (part of `make test`) installs both; nothing is
downloaded at run time."""

import contextlib
import os

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@contextlib.contextmanager
def headless_chromium(profile, window="1400,1000"):
    """A Chromium driver with its profile in the folder `profile` and a window of `window` pixels, quit after."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            pytest.fail(f"{path} not found: `make browser` installs Debian's chromium and chromium-driver.")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--window-size={window}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
