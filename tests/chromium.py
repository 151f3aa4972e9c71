"""The browser tests' one requirement, shared: headless Chromium and its driver at the paths
CI installs them to (a missing browser is a failure, not a skip)."""

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def require_chromium() -> None:
    """Fail the test, naming the install command, unless Chromium and its driver exist."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"headless Chromium is needed for the browser tests ({', '.join(missing)} missing): "
            "run `apt-get update && apt-get install -y chromium chromium-driver`",
            pytrace=False,
        )
