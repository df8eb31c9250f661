"""The coordinator: sampling, secure noisy aggregation, PPO. It never reads a data set — only devices do."""
