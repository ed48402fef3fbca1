"""Sensitive tables: loading and describing them (datasets) and counting them in the database (oracle)."""
