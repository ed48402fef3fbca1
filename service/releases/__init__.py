"""Releases: the engine that charges and runs them, their kinds, answers from them, and their runners' lifecycle."""
