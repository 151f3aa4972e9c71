"""``import agentgym`` and a harness worker's path stay light: no heavy optional package.

Every process-pool worker imports the package before its first episode, so what
``import agentgym`` pulls in is paid once per worker (and once per CLI command).
"""

import json
import subprocess
import sys
import textwrap

HEAVY = ("torch", "faiss", "ray", "transformers", "peft", "tokenizers", "safetensors")

CODE = textwrap.dedent(
    """
    import json, sys
    heavy = {heavy!r}
    loaded = lambda: sorted(m for m in heavy if m in sys.modules)
    import agentgym
    on_import = loaded()
    from agentgym.harness.evaluate import RunPlan, plan_units
    from agentgym.harness.pool import LocalPool
    units = plan_units(RunPlan("random", ("agentgym/Search-Menu-Small-v0",), 2), done=set())
    with LocalPool() as pool:
        played = sum(1 for _ in pool.run(units))
    print(json.dumps({{"import": on_import, "worker": loaded(), "played": played}}))
    """
)


def test_import_agentgym_and_a_workers_episodes_load_no_heavy_package():
    out = subprocess.run(
        [sys.executable, "-c", CODE.format(heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"import": [], "worker": [], "played": 2}
