"""Test-wide settings: caches go to a throwaway AGENTGYM_HOME, never the user's."""

import os
import tempfile

# Set before any test imports agentgym code that reads it; subprocesses inherit it.
os.environ["AGENTGYM_HOME"] = tempfile.mkdtemp(prefix="agentgym-tests-")
