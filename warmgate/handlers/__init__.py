"""Kopf handlers: thin adapters that call the pure layers."""
