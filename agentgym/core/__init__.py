"""The bottom layer: the env base class, spaces, menus, info keys, errors, paths, canonical JSON.

It imports nothing else of agentgym.
"""
