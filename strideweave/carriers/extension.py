"""Carrier definitions: storage providers and exact transfer routes."""
