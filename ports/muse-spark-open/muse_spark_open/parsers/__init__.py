"""Reasoning and tool parsers `muse` for the Muse channel format."""
