"""Specs: what a user asks for, as plain typed data (llmbench/specs/options.py, groups.py)."""
