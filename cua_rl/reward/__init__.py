"""Rewards: the streaming reward-model judge, integrated step rewards and advantages."""
