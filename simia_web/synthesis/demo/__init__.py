"""Demo data written by the team: two small domains with APIs, tasks and judged trajectories."""
