"""The trainer's benchmarks: ``trainer`` (tokens per second against TRL's GRPOTrainer) and
``learning`` (test success of credit variants at an equal token budget).
"""
