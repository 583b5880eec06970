"""Learners: off-policy-corrected training of the policy and the reward model.

Importing this package is cheap; torch is imported by the engine, batching, loss
and logprob modules only. Start from `engines.build_engine(LearnerConfig, model_dir)`.
"""
