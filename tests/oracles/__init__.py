"""Brute-force and straightforward references the tests hold the placement stages to."""
