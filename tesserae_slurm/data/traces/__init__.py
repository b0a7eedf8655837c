"""Shipped traces (package data); see README.md here for provenance."""
