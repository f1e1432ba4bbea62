"""Renderers: each turns a result document into text; none measures anything."""
