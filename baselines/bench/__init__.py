"""The trainer's benchmarks: ``trainer`` and ``learning``.

``trainer`` measures tokens per second against TRL's GRPOTrainer; ``learning`` the test
success of credit variants at an equal token budget.
"""
