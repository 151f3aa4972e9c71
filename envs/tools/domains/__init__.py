"""The shipped tool domains, one package each: e-commerce, customer accounts and travel.

Each package holds ``tools.py`` (the tools table), ``backend.py`` (the seeded state and the
tool implementations), ``tasks.py`` and ``tasks.json`` (the task templates) and exports its
:class:`~agentgym.envs.tools.backend.Domain` subclass.
"""
