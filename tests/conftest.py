"""Test-wide settings: caches go to a throwaway AGENTGYM_HOME, never the user's."""

import atexit
import os
import shutil
import tempfile

# Set before any test imports agentgym code that reads it; subprocesses inherit it.
_HOME = tempfile.mkdtemp(prefix="agentgym-tests-")
os.environ["AGENTGYM_HOME"] = _HOME
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
