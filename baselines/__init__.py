"""Policies, rollout engine, trainer and credit-assignment variants."""
