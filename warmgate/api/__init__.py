"""Pydantic models of the SpecDecodeDeployment CRD, condition helpers and constants."""
