"""What can be run: the scenarios, the levers table, and the planner that checks a configuration."""
