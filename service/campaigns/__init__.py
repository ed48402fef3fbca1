"""Local-DP collections: public tables, campaigns and their rounds, report submission, estimates, the simulator."""
