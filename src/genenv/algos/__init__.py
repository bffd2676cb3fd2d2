"""The two learning algorithms: GRPO for the agent, reward-weighted regression for the simulator."""
