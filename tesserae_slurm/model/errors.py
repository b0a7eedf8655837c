"""Errors that carry a one-line message for the user (CLI prints it, exits 2)."""


class InputError(ValueError):
    """Bad user input: malformed file, unknown node, GPU over capacity, unknown profile key."""
