"""Environment families, one package each: a folder here is a family.

A family's ``__init__`` exposes ``register()`` (its ids, with string entry points); the
registry finds the folder, imports it by name and calls it. A ``bench.py`` beside it is its
``agentgym bench <family>`` part.
"""
