# Generated at build time from meson.build (see _version.py.in).
version: str
